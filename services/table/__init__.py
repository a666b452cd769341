"""The table service: live game state in Redis, per-viewer views, events, timers."""
