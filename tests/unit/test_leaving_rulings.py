"""The rulings for a table every human left (docs/rules/kishpa.md and hand.md, "Leaving the
table"): it ends with the round in progress; Hand between deals ends at once."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import games.hand as hand
import games.kishpa as kishpa
from games.hand.game import DealResult, start_game
from games.hand.record import PAYOUT
from games.hand.ruleset import DEFAULT_RULES as HAND_RULES

pytestmark = pytest.mark.unit

PLAYERS = ["ann", "bob", "cat"]


def _kishpa_round(rules: kishpa.RuleSet = kishpa.DEFAULT_RULES) -> kishpa.GameState:
    game = kishpa.new_game(PLAYERS, rules)
    started, _ = kishpa.start_round(game, bytes(80))
    return started


def test_kishpa_the_round_in_progress_becomes_the_last() -> None:
    game = _kishpa_round()
    assert game.round is not None
    assert not game.round.last_round
    left, events = kishpa.abandon(game)
    assert left.round is not None
    assert left.round.last_round
    assert left.last_round_pressed
    assert [(e.type, e.data["next_round"]) for e in events] == [("last_round_pressed", 1)]
    assert game.round.last_round is False, "the state given is not changed"
    again, more = kishpa.abandon(left)
    assert (again, more) == (left, []), "pressed once"
    # Its end is a last round's: the stored round says so (the end record reads it).
    stored = kishpa.GameState.from_dict(left.to_dict(), PLAYERS, kishpa.DEFAULT_RULES)
    assert stored.round is not None
    assert stored.round.last_round


def test_kishpa_between_rounds_and_with_the_ruling_off_nothing_changes_here() -> None:
    off = _kishpa_round(replace(kishpa.DEFAULT_RULES, abandoned_ends_with_round=False))
    assert kishpa.abandon(off) == (off, [])
    between = kishpa.new_game(PLAYERS)
    assert kishpa.abandon(between) == (between, []), "no round: start_round presses it"


def _played(stake: int, scores: tuple[int, int]) -> hand.GameState:
    game, _ = start_game(["ann", "bob"], stake, HAND_RULES)
    return replace(game, results=(DealResult(0, 0, 0, False, scores),))


def test_hand_ends_after_the_deal_in_progress() -> None:
    game, _ = start_game(["ann", "bob"], 10, HAND_RULES)
    left, events, phases = hand.abandon(game, deal_ended=False)
    assert (left.ends_after, left.deals, left.finished) == (1, 1, False)
    assert (events, phases) == ([], [])
    assert hand.GameState.from_dict(left.to_dict()) == left, "stored and read back"


def test_hand_between_deals_ends_at_once_and_pays_the_pot_by_the_totals_so_far() -> None:
    # Totals 50 and 10 after one deal, pot 2 x 10 = 20: the shared part is 25% = 5; bob is
    # within 50 points (gap 40, weight 10), the only sharer: 5 to him, the other 15 to ann.
    game = _played(10, (50, 10))
    left, events, phases = hand.abandon(game, deal_ended=True)
    assert left.finished
    assert left.deals == 1
    assert [e.kind for e in events] == ["game_ended"]
    assert events[0].data["payouts"] == [15, 5]
    assert events[0].data["ended_early"] is True
    assert [(p.phase, p.deals_played) for p in phases] == [(PAYOUT, 1)]
    assert phases[0].record["totals"] == {"ann": 50, "bob": 10}
    assert phases[0].record["pot"] == 20


def test_hand_with_the_ruling_off_the_bots_play_every_deal() -> None:
    rules = replace(HAND_RULES, abandoned_ends_with_deal=False)
    game, _ = start_game(["ann", "bob"], 1, rules)
    assert hand.abandon(game, deal_ended=False) == (game, [], [])


@settings(max_examples=200, deadline=None)
@given(
    seats=st.integers(2, 4),
    stake=st.integers(1, 100),
    deals=st.lists(
        st.lists(st.integers(-200, 100), min_size=4, max_size=4), min_size=1, max_size=6
    ),
    in_progress=st.booleans(),
)
def test_hand_ended_early_pays_out_the_whole_pot_by_the_totals_played(
    seats: int, stake: int, deals: list[list[int]], in_progress: bool
) -> None:
    """Whenever the game ends early, the pot is paid out whole (never more, never less), by
    the totals of the deals played, and only once the game is over."""
    players = [f"p{s}" for s in range(seats)]
    game, _ = start_game(players, stake, HAND_RULES)
    results = tuple(
        DealResult(n, n % seats, None, False, tuple(scores[:seats]))
        for n, scores in enumerate(deals)
    )
    game = replace(game, results=results)
    left, events, phases = hand.abandon(game, deal_ended=not in_progress)
    if in_progress:
        assert (events, phases) == ([], [])
        assert not left.finished
        assert left.deals == len(deals) + 1
        return
    assert left.finished
    payouts = events[0].data["payouts"]
    assert sum(payouts) == stake * seats
    assert all(p >= 0 for p in payouts)
    totals = [sum(scores[s] for scores in deals) for s in range(seats)]
    assert phases[0].record["totals"] == dict(zip(players, totals, strict=True))
    # The leaders share at least 75% of the pot between them (docs/rules/hand.md).
    leaders = [s for s in range(seats) if totals[s] == max(totals)]
    assert sum(payouts[s] for s in leaders) * 4 >= stake * seats * 3
