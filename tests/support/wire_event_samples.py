"""Table events in the shapes the service, the workers and the games write: whole games of
both games played through the engines (no Redis), and the rarer events the service and the
workers write. The wire-event tests convert them; the TypeScript contract test sends them
through a real table service to the web client's adapter."""

from __future__ import annotations

from functools import cache

from services.table.hand_engine import HandEngine
from shared.stream import NO_SEAT, TableEvent
from tests.support import hand_engine_play, kishpa_engine_play


@cache
def kishpa_games() -> tuple[tuple[TableEvent, ...], ...]:
    """The events of two whole Kishpa games of bots (three rounds each)."""
    out = []
    for seed in (7, 21):
        _table, steps = kishpa_engine_play.play_game(rounds_before_last=2, seed=seed)
        out.append(tuple(e for s in steps for e in s.events))
    return tuple(out)


@cache
def hand_game() -> tuple[TableEvent, ...]:
    """The events of one whole Hand game of bots (seven deals)."""
    events, _steps = hand_engine_play.play_game(HandEngine(), hand_engine_play.new_table())
    return tuple(events)


SETTINGS = {
    "seats": 3,
    "turn_seconds": 30,
    "reveal_window_seconds": 15,
    "next_round_pause_ms": 2500,
    "stake": 1,
    "options": {"allow_high_wrap": True},
}
SERVICE_EVENTS = (
    TableEvent("table_created", 0, 0, {"creator": "ann", "game": "kishpa", **SETTINGS}),
    TableEvent("player_joined", 0, 1, {"player_id": "bob", "name": "Bob"}),
    TableEvent("player_left", 0, 1, {"player_id": "bob"}),
    TableEvent("seed_committed", 2, NO_SEAT, {"deal": 2, "commitment": "ab" * 32}),
    TableEvent("contribution_accepted", 2, 1, {"deal": 2, "contribution": 'x\\"y'}),
    TableEvent("autoplay_on", 3, 2, {"player_id": "cat"}),
    TableEvent("player_ready", 3, 1, {"player_id": "bob", "next_round": 4}),
    TableEvent("deadline", 3, NO_SEAT, {"kind": "window", "at_ms": 1_700_000_123_456}),
    TableEvent("last_round_pressed", 2, NO_SEAT, {"next_round": 3, "reason": "every seat auto"}),
    TableEvent("last_round_pressed", 2, NO_SEAT, {"next_round": 3}),
    TableEvent(
        "settled",
        3,
        NO_SEAT,
        {
            "phase": "end",
            "batch_id": "42",
            "balances": {"ann": 2003, "bob": 1999},
            "settled_ms": 1_700_000_000_500,
            "postings": [
                {"from": "player:bob", "to": "player:ann", "amount": 2, "reason": "win"},
                {"from": "bank", "to": "player:cat", "amount": 50, "reason": "bank_load"},
            ],
        },
    ),
    TableEvent("table_closed", 0, NO_SEAT, {}),
    TableEvent("turn_timed_out", 3, 1, {"in_a_row": 2}),
    TableEvent("timed_out", 2, 1, {"phase": "draw"}),
    TableEvent("pile_exhausted", 2, NO_SEAT, {"turns": 48}),
    TableEvent(
        "turn_undone",
        2,
        1,
        {
            "discard_pile": [0, 5],
            "melds": [{"id": 0, "kind": "set", "cards": [1, 14, 27], "owner": 3}],
        },
    ),
)
"""Events the service, the workers and rarer rule paths write (in their real shapes)."""
