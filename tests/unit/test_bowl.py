"""The bowl: contributions, streaks, taking it, and the last-round split."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from games.kishpa.bowl import (
    bowl_end_postings,
    completes_streak,
    contribution,
    next_streaks,
    previous_winner_of,
    split_shares,
)
from games.kishpa.ledger import Reason
from games.kishpa.tiles import parse_face

pytestmark = pytest.mark.unit

PLAYERS = ["a", "b", "c", "d"]


def test_contribution_is_1_or_2_when_the_kishpa_is_a_1() -> None:
    assert contribution(parse_face("R5")) == 1
    assert contribution(parse_face("K1")) == 2
    assert contribution(parse_face("Y13")) == 1


def test_streaks_grow_break_and_restart_after_taking_the_bowl() -> None:
    streaks = dict.fromkeys(PLAYERS, 0)
    streaks = next_streaks(streaks, "b", took_bowl=False)
    assert streaks == {"a": 0, "b": 1, "c": 0, "d": 0}
    assert previous_winner_of(streaks) == "b"
    assert completes_streak("b", previous_winner_of(streaks))
    assert not completes_streak("c", previous_winner_of(streaks))
    assert next_streaks(streaks, "b", took_bowl=True) == dict.fromkeys(PLAYERS, 0)
    assert next_streaks(streaks, "c", took_bowl=False) == {"a": 0, "b": 0, "c": 1, "d": 0}
    # No winner breaks every streak.
    assert next_streaks(streaks, None, took_bowl=False) == dict.fromkeys(PLAYERS, 0)
    assert previous_winner_of(dict.fromkeys(PLAYERS, 0)) is None


def test_split_gives_the_remainder_one_each_from_the_first_player() -> None:
    assert split_shares(14, PLAYERS, "c") == [("c", 4), ("d", 4), ("a", 3), ("b", 3)]
    assert split_shares(3, PLAYERS, "b") == [("b", 1), ("c", 1), ("d", 1), ("a", 0)]
    assert split_shares(0, PLAYERS, "a") == [(p, 0) for p in PLAYERS]


@given(amount=st.integers(0, 10_000), first=st.sampled_from(PLAYERS), seats=st.integers(2, 4))
def test_split_conserves_the_bowl_and_differs_by_at_most_one(
    amount: int, first: str, seats: int
) -> None:
    players = PLAYERS[:seats]
    if first not in players:
        first = players[0]
    shares = [s for _, s in split_shares(amount, players, first)]
    assert sum(shares) == amount
    assert max(shares) - min(shares) <= 1
    assert shares == sorted(shares, reverse=True)


def test_bowl_end_postings() -> None:
    win = bowl_end_postings(PLAYERS, 9, "b", "b", last_round=False, starter="a")
    assert [(p.to_account, p.amount, p.reason) for p in win] == [("b", 9, Reason.BOWL_WIN)]
    assert bowl_end_postings(PLAYERS, 9, "b", "c", last_round=False, starter="a") == []
    assert bowl_end_postings(PLAYERS, 9, None, "c", last_round=False, starter="a") == []
    split = bowl_end_postings(PLAYERS, 5, None, None, last_round=True, starter="d")
    assert [(p.to_account, p.amount) for p in split] == [("d", 2), ("a", 1), ("b", 1), ("c", 1)]
    assert all(p.reason is Reason.BOWL_SPLIT and p.from_account == "bowl" for p in split)
    # Shares of 0 are not posted.
    tiny = bowl_end_postings(PLAYERS, 2, "c", None, last_round=True, starter="a")
    assert [(p.to_account, p.amount) for p in tiny] == [("c", 1), ("d", 1)]
