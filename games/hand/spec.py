"""Hand as the platform sees it (:mod:`games.registry`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from games.hand.record import BUY_IN, PAYOUT, postings_for_phase
from games.hand.ruleset import DEFAULT_RULES
from games.ledger import Posting
from games.spec import GameSpec


def _buy_in(record: Mapping[str, Any]) -> list[Posting]:
    """Every player pays the stake into the pot."""
    return postings_for_phase(BUY_IN, record)


def _payout(record: Mapping[str, Any]) -> list[Posting]:
    """The pot is paid out by the game's totals."""
    return postings_for_phase(PAYOUT, record)


GAME = GameSpec(
    name="hand",
    title="Hand",
    wire_value=2,
    postings={BUY_IN: _buy_in, PAYOUT: _payout},
    ending_phase=PAYOUT,
    settles_since=BUY_IN,
    round_start_event="deal_started",
    round_end_event="seed_revealed",
    restarts=frozenset({"turn_started", "deal_started"}),
    fixed_rounds=DEFAULT_RULES.deals_per_game,
)
