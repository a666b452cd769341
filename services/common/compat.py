"""Compatibility branches: code kept only for data an older release wrote, and its metric.

Each such branch calls :func:`compat_hit` with its name, counted in
``kishpa_compat_branch_hits_total{branch}``, and carries a comment with the condition under
which it goes. A branch whose counter has stayed at 0 for its whole window on every replica
(the longest such data can still live) serves nobody: remove it, with its test.
The branches (docs/operations.md, "Compatibility branches"):

* ``matchmaking_legacy_seating`` (services/matchmaking/store.py) — where a player was
  seated, read from the single-slot key space of the releases before per-queue slots.
  Those keys expire ``seating_ttl_s`` (12 h) after they were written.
* ``hand_deal_without_contributions`` (services/table/hand_engine.py) — a Hand deal stored
  before seat contributions existed has no ``client_seeds``: its seeds are the sit-down
  ones. Such a deal ends with its table's game (7 deals).
"""

from __future__ import annotations

from prometheus_client import Counter

COMPAT_BRANCH_HITS = Counter(
    "kishpa_compat_branch_hits",
    "Times a compatibility branch served data an older release wrote (0 all its window: remove).",
    ("branch",),
)

BRANCHES = ("matchmaking_legacy_seating", "hand_deal_without_contributions")


def compat_hit(branch: str) -> None:
    """Count one use of the compatibility branch ``branch`` (one of :data:`BRANCHES`)."""
    COMPAT_BRANCH_HITS.labels(branch=branch).inc()
