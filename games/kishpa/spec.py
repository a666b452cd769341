"""Kishpa as the platform sees it (:mod:`games.registry`)."""

from __future__ import annotations

from games.kishpa.record import end_postings, start_postings
from games.spec import GameSpec

GAME = GameSpec(
    name="kishpa",
    title="Kishpa",
    wire_value=1,
    postings={"start": start_postings, "end": end_postings},
    ending_phase="end",
    settles_since=None,
    round_start_event="round_started",
    round_end_event="round_ended",
    restarts=frozenset({"turn_started", "reveal_window_opened", "kishpa_replaced"}),
    fixed_rounds=None,
)
