"""Prometheus metrics of the matchmaking service (served on KISHPA_METRICS_PORT)."""

from __future__ import annotations

from prometheus_client import Counter

TICKETS = Counter(
    "kishpa_matchmaking_tickets",
    "Queue tickets by what became of them: queued, matched, cancelled, expired.",
    ["outcome"],
)
TABLES_FORMED = Counter(
    "kishpa_matchmaking_tables_formed",
    "Tables created for a full group popped from a queue, by seats.",
    ["seats"],
)
SEATING_FAILURES = Counter(
    "kishpa_matchmaking_seating_failures",
    "Groups whose table could not be created: retried (table service unreachable) or "
    "requeued (refused).",
    ["action"],
)
PRIVATE_TABLES = Counter(
    "kishpa_matchmaking_private_tables",
    "Private tables created, and players seated at them by an invite code.",
    ["event"],
)
