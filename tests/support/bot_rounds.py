"""A Kishpa round played to its end by seeded bots on the pure rules engine."""

from __future__ import annotations

from games.fair import FairStream
from games.kishpa.bot import BOT_TAG, choose_action
from games.kishpa.round import (
    ENDED,
    CloseWindow,
    RoundState,
    apply,
    new_round,
    seats_to_act,
    tile_places,
    view_for,
)

PLAYERS = ["ann", "ben", "cat", "dan"]


def play_round_with_bots(
    seed: bytes,
    seats: int = 4,
    *,
    starter: int = 0,
    bowl: int = 0,
    previous_winner: str | None = None,
    last_round: bool = False,
    check_every_step: bool = False,
) -> RoundState:
    """Play one round to its end with a bot on every seat; closes windows nobody acts in."""
    players = PLAYERS[:seats]
    state, _ = new_round(
        players,
        starter,
        seed,
        ["x"] * seats,
        bowl=bowl,
        previous_winner=previous_winner,
        last_round=last_round,
    )
    stream = FairStream(seed, [], BOT_TAG)
    for _ in range(1000):
        if check_every_step:
            tile_places(state)
            assert RoundState.from_dict(state.to_dict()) == state
        if state.phase == ENDED:
            return state
        waiting = seats_to_act(state)
        action = None
        for seat in waiting:
            action = choose_action(view_for(state, seat), stream)
            if action is not None:
                break
        state, _ = apply(state, action if action is not None else CloseWindow())
    raise AssertionError("a round never ended")
