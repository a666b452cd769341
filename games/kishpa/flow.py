"""A Kishpa game at a table: its rules from the table's settings, the round dealt next, the
moves made, the turn that timed out, and the settlement phases each step records.

A table settles two phases per round with the wallet (``games.kishpa.record``): ``start``
once the start reveal window closed and ``end`` once the round ended. The round writes a
``phase_recorded`` event when one is due; which record goes with it is decided here, and the
table service only writes what these functions return.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from games.kishpa.game import (
    GameState,
    apply_action,
    autoplay_turn,
    bots_in_window,
    start_round,
)
from games.kishpa.round import Event, RoundState, TurnTimeout, end_record, start_record
from games.kishpa.ruleset import DEFAULT_RULES, RuleSet
from games.table import BOT_NORMAL, TableSettings

HIGH_WRAP = "allow_high_wrap"
"""The table option that lets a run wrap from 13 to 1 (``RuleSet.allow_run_12_13_1``)."""
KNOWN_OPTIONS = frozenset({HIGH_WRAP})
RECORDS: Mapping[str, Callable[[RoundState], dict[str, Any]]] = {
    "start": start_record,
    "end": end_record,
}
"""The record of each settlement phase (the ``phase`` of a ``phase_recorded`` event)."""


def rules_for(settings: TableSettings) -> RuleSet:
    """The rules a table plays by: its timers, its stake and its options."""
    return replace(
        DEFAULT_RULES,
        turn_seconds=settings.turn_seconds,
        reveal_window_seconds=settings.reveal_window_seconds,
        allow_run_12_13_1=bool(settings.options.get(HIGH_WRAP, False)),
        stake=settings.stake,
    )


def unknown_options(options: Mapping[str, Any]) -> list[str]:
    """The table options Kishpa does not know (sorted; a table with any is refused)."""
    return sorted(set(options) - KNOWN_OPTIONS)


@dataclass(frozen=True, slots=True)
class PhaseRecord:
    """A settlement phase due now: its name (``start``, ``end``), its round and its record
    (plain JSON)."""

    phase: str
    round_no: int
    record: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Moved:
    """The game after a step: its events and the settlement phases they made due."""

    game: GameState
    events: list[Event]
    """The events of the round in play (``game.round_no``)."""
    phases: list[PhaseRecord]
    earlier: list[Event] = field(default_factory=list)
    """Events that belong to the round before (``game.round_no - 1``): *last round* pressed
    between rounds is the ended round's news."""


def settle(game: GameState, events: list[Event], bot_seats: Collection[int]) -> Moved:
    """After a move: the table's bots answer a reveal window at once, and every
    ``phase_recorded`` gets its record."""
    game, more = bots_in_window(game, bot_seats)
    events = [*events, *more]
    state = game.round
    assert state is not None
    phases = [
        PhaseRecord(e.data["phase"], state.round_no, RECORDS[e.data["phase"]](state))
        for e in events
        if e.type == "phase_recorded"
    ]
    return Moved(game, events, phases)


def next_round(
    game: GameState,
    seed: bytes,
    client_seeds: list[str | None],
    *,
    abandoned: bool,
    bot_seats: Collection[int],
) -> Moved:
    """Deal the next round (``abandoned``: every seat is played by the server, so it is the
    last: :func:`games.kishpa.start_round`)."""
    new, events = start_round(game, seed, client_seeds, abandoned=abandoned)
    earlier: list[Event] = []
    if events and events[0].type == "last_round_pressed":
        earlier = [events.pop(0)]
    moved = settle(new, events, bot_seats)
    return replace(moved, earlier=earlier)


def timed_out_turn(
    game: GameState,
    seat: int,
    seed: bytes,
    *,
    on_autoplay: bool,
    house_bot: bool,
    bot_level: str,
) -> tuple[GameState, list[Event]]:
    """The turn of a seat whose time ran out: played by the server when the seat is on
    auto-play (a house bot at the table's ``bot_level``, an absent player's seat at normal),
    else the rules' timeout."""
    if not on_autoplay:
        return apply_action(game, TurnTimeout(seat))
    return autoplay_turn(game, seat, seed, bot_level if house_bot else BOT_NORMAL)
