"""Settlement records of a Hand game: what the table service writes to the outbox, and the
postings the workers compute from it.

A Hand table settles two phases per game (see the settlement hand-off contract):

* ``buy_in`` when the game starts: ``{"players": [ids in seat order], "stake": int}``;
* ``payout`` when the last deal is scored: the same plus ``"totals": {player: int}`` and
  ``"pot": int`` (the tokens bought in).

Both are plain JSON values; :func:`postings_for_phase` turns one into the wallet batch and
refuses anything impossible with :class:`InvalidRecordError` (reason ``INVALID_RECORD``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from games.errors import InvalidRecordError
from games.hand.game import GameState
from games.hand.ledger import Posting, buy_in_postings, payout_postings
from games.hand.ruleset import DEFAULT_RULES, RuleSet

BUY_IN = "buy_in"
PAYOUT = "payout"
PHASES = (BUY_IN, PAYOUT)


def buy_in_record(game: GameState) -> dict[str, Any]:
    """The record of the ``buy_in`` phase of a game that is starting."""
    return {"players": list(game.players), "stake": game.stake}


def payout_record(game: GameState) -> dict[str, Any]:
    """The record of the ``payout`` phase of a finished game."""
    if not game.finished:
        raise InvalidRecordError("the game is still being played")
    totals = game.totals
    return {
        "players": list(game.players),
        "stake": game.stake,
        "pot": game.pot,
        "totals": dict(zip(game.players, totals, strict=True)),
    }


def _int(record: Mapping[str, Any], key: str) -> int:
    value = record.get(key)
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidRecordError(f"field {key!r} must be a whole number, got {value!r}")
    return value


def _players(record: Mapping[str, Any], rules: RuleSet) -> list[str]:
    players = record.get("players")
    if not isinstance(players, list) or not all(isinstance(p, str) and p for p in players):
        raise InvalidRecordError("field 'players' must be a list of player ids")
    if not rules.min_seats <= len(players) <= rules.max_seats:
        raise InvalidRecordError(f"Hand is played by {rules.min_seats}-{rules.max_seats} players")
    if len(set(players)) != len(players) or "pot" in players:
        raise InvalidRecordError("player ids must be distinct and not 'pot'")
    return players


def postings_for_phase(
    phase: str, record: Mapping[str, Any], rules: RuleSet = DEFAULT_RULES
) -> list[Posting]:
    """The wallet batch of one phase (``buy_in`` or ``payout``) of a Hand game."""
    if phase not in PHASES:
        raise InvalidRecordError(f"a Hand game settles {PHASES}, not {phase!r}")
    players = _players(record, rules)
    stake = _int(record, "stake")
    if stake < 0:
        raise InvalidRecordError("the stake is never negative")
    if phase == BUY_IN:
        return buy_in_postings(players, stake)
    pot = _int(record, "pot")
    if pot != stake * len(players):
        raise InvalidRecordError(f"the pot holds {stake * len(players)} tokens, not {pot}")
    totals = record.get("totals")
    if not isinstance(totals, Mapping) or set(totals) != set(players):
        raise InvalidRecordError("field 'totals' must give every player's total")
    return payout_postings(players, {p: _int(totals, p) for p in players}, pot, rules)
