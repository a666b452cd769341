"""The rulings for a table every human left (docs/rules/kishpa.md and hand.md, "Leaving the
table"): it ends with the round in progress; Hand between deals ends at once."""

from __future__ import annotations

from dataclasses import replace

import pytest

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
