"""Whole rounds played by bots: never an illegal state, every tile always in one place."""

from __future__ import annotations

import hashlib
import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cli.demo import play_demo_round
from games.fair import SERVER_SEED_BYTES, commitment
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
    TurnTimeout,
    Win,
    apply,
    end_record,
    new_round,
    start_record,
    tile_places,
)
from tests.support.bot_rounds import PLAYERS, play_round_with_bots

pytestmark = pytest.mark.unit


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
