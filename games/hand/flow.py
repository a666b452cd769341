"""A Hand game at a table: opening it, closing each deal, and the settlement phases each
step records.

A table settles two phases per game with the wallet (``games.hand.record``): ``buy_in`` when
the game opens, before its first deal, and ``payout`` when its last deal is scored. The rules
decide when each is due; the table service only writes what these functions return.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from games.hand.deal_state import DealState
from games.hand.events import Event
from games.hand.game import (
    GameState,
    end_early,
    game_ended_event,
    record_deal,
    seed_revealed_event,
    start_game,
    started_event,
)
from games.hand.record import BUY_IN, PAYOUT, buy_in_record, payout_record
from games.hand.ruleset import DEFAULT_RULES, RuleSet


@dataclass(frozen=True, slots=True)
class PhaseRecord:
    """A settlement phase due now: its name (``buy_in``, ``payout``), the number of deals
    played before it (0 for the buy-in; the last deal's number, from 1, for the payout) and
    its record (plain JSON)."""

    phase: str
    deals_played: int
    record: dict[str, Any]


def open_game(
    players: Sequence[str], stake: int, rules: RuleSet = DEFAULT_RULES
) -> tuple[GameState, list[Event], list[PhaseRecord]]:
    """A new game: ``game_started`` and the ``buy_in`` phase (every player pays the stake
    into the pot); its first deal is dealt next (:func:`games.hand.start_deal`)."""
    game, _postings = start_game(players, stake, rules)
    return game, [started_event(game)], [PhaseRecord(BUY_IN, 0, buy_in_record(game))]


def close_deal(
    game: GameState,
    deal: DealState,
    server_seed_hex: str,
    client_seeds: Sequence[str | None],
) -> tuple[GameState, list[Event], list[PhaseRecord]]:
    """A deal just ended: its seed revealed (``seed_revealed``), its scores added
    (``deal_scored``, after the last deal ``game_ended``) and, once the game is over, the
    ``payout`` phase."""
    new, scored = record_deal(game, deal)
    events = [seed_revealed_event(server_seed_hex, deal.commitment, client_seeds), *scored]
    phases = [PhaseRecord(PAYOUT, new.deals_played, payout_record(new))] if new.finished else []
    return new, events, phases


def abandon(game: GameState, deal_ended: bool) -> tuple[GameState, list[Event], list[PhaseRecord]]:
    """Every player left a table where only bots remain (``RuleSet.abandoned_ends_with_deal``):
    the game ends with the deal in progress, or at once between deals (``deal_ended``) with
    ``game_ended`` and the ``payout`` phase by the totals so far."""
    new = end_early(game, deal_ended)
    if new.finished and not game.finished:
        return (
            new,
            [game_ended_event(new)],
            [PhaseRecord(PAYOUT, new.deals_played, payout_record(new))],
        )
    return new, [], []
