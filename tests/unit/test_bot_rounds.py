"""Whole rounds played by bots: never an illegal state, every tile always in one place."""

from __future__ import annotations

import hashlib
import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cli.demo import play_demo_round
from games.fair import SERVER_SEED_BYTES, FairStream, commitment
from games.kishpa.bot import BOT_TAG, choose_action
from games.kishpa.errors import IllegalMoveError
from games.kishpa.record import end_postings, settle_record, start_postings
from games.kishpa.round import (
    DISCARD,
    ENDED,
    PILE,
    Action,
    CloseWindow,
    Discard,
    Draw,
    Pass,
    Reveal,
    RoundState,
    TurnTimeout,
    Win,
    apply,
    end_record,
    new_round,
    seats_to_act,
    start_record,
    tile_places,
    view_for,
)

pytestmark = pytest.mark.unit

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


def seed_of(text: str) -> bytes:
    return hashlib.sha512(text.encode()).digest() + bytes(16)


@settings(max_examples=15)
@given(
    seed=st.binary(min_size=SERVER_SEED_BYTES, max_size=SERVER_SEED_BYTES),
    seats=st.integers(2, 4),
)
def test_bot_rounds_stay_legal_and_every_tile_is_in_exactly_one_place(
    seed: bytes, seats: int
) -> None:
    state = play_round_with_bots(seed, seats, starter=seats - 1, check_every_step=True)
    assert state.phase == ENDED
    assert all(len(h) == 14 for h in state.hands)
    # The records the service writes are accepted by the settlement code.
    start = start_postings(start_record(state))
    end = end_postings(end_record(state))
    out = settle_record(end_record(state))
    assert [p.to_dict() for p in start] == out["start"]
    assert [p.to_dict() for p in end] == out["end"]


def test_bots_win_rounds() -> None:
    outcomes = [play_round_with_bots(seed_of(f"bots-{k}")).winner for k in range(12)]
    assert any(w is not None for w in outcomes)


def test_the_demo_narrates_a_whole_round_and_its_postings() -> None:
    out = io.StringIO()
    seed = seed_of("demo")
    play_demo_round(seed, out)
    text = out.getvalue()
    assert commitment(seed) in text
    assert "dealt: ann 15, ben 14, cat 14, dan 14" in text
    assert "bowl_contribution" in text
    assert "round over" in text
    assert seed.hex() in text


ACTION_KINDS = ("draw_pile", "draw_discard", "discard", "win", "reveal", "pass", "close", "timeout")


@settings(max_examples=20)
@given(seed=st.binary(min_size=SERVER_SEED_BYTES, max_size=SERVER_SEED_BYTES), data=st.data())
def test_random_actions_are_applied_or_refused_cleanly(seed: bytes, data: st.DataObject) -> None:
    """Any action from any seat either applies keeping every invariant, or raises
    IllegalMoveError leaving the state unchanged."""
    state, _ = new_round(PLAYERS, 0, seed)
    for _ in range(150):
        if state.phase == ENDED:
            break
        seat = data.draw(st.integers(0, 3))
        kind = data.draw(st.sampled_from(ACTION_KINDS))
        some_tile = data.draw(st.integers(0, 105))
        own = state.hands[seat]
        tile = own[some_tile % len(own)] if data.draw(st.booleans()) else some_tile
        action: Action = {
            "draw_pile": Draw(seat, PILE),
            "draw_discard": Draw(seat, DISCARD),
            "discard": Discard(seat, tile),
            "win": Win(seat, tile),
            "reveal": Reveal(seat),
            "pass": Pass(seat),
            "close": CloseWindow(),
            "timeout": TurnTimeout(seat),
        }[kind]
        before = state.to_dict()
        try:
            state, _ = apply(state, action)
        except IllegalMoveError:
            assert state.to_dict() == before
            continue
        tile_places(state)
        assert sum(len(h) for h in state.hands) in (56, 57)
