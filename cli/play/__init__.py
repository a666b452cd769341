"""Helpers of ``kishpa play`` and ``kishpa bots``: bot seats, rendering, the session loop."""
