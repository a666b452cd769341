"""What each viewer of a Hand table sees (``games.hand.view``) and when a game's settlement
phases are due (``games.hand.flow``): decided by the rules package, not by the table service.

Positions are written as card text (``devkit.hand_positions``); expected values are written
out by hand from the rules (RULES-HAND: 7 deals, the pot is every stake)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from devkit.hand_positions import position
from games.hand import (
    BUY_IN,
    PAYOUT,
    GameState,
    advice_for,
    close_deal,
    open_game,
    view_for,
)
from games.hand.cards import parse_card
from games.hand.deal_state import Phase
from games.hand.game import DealResult

pytestmark = pytest.mark.unit

PLAYERS = ("ann", "bob", "cat")


def _deal(scores: list[int] | None = None) -> dict[str, Any]:
    """Seat 1 on turn, holding a picked-up KH it must use; ``scores``: the deal has ended."""
    state = position(
        [["AS", "2S", "3S", "9H"], ["KD", "KC", "KH", "4C"], ["5D", "6D"]],
        discard_pile=["7C"],
        melds=[(2, ["JS", "QS", "KS"])],
        opened=[2],
        turn=1,
    )
    state.must_use = parse_card("KH")
    if scores is not None:
        state.phase, state.scores = Phase.ENDED, scores
    return state.to_dict()


def test_a_seat_sees_its_own_cards_and_only_counts_of_the_others() -> None:
    game, _events, _due = open_game(PLAYERS, 5)
    deal = _deal()
    mine = view_for(game, deal, 0, server_seed_hex="ab" * 40, client_seeds=["c0", None, None])
    assert mine.my_cards == [parse_card(c) for c in ("AS", "2S", "3S", "9H")]
    assert [(s.player, s.cards) for s in mine.seats] == [("ann", 4), ("bob", 4), ("cat", 2)]
    assert mine.public.hands is None
    assert mine.server_seed == ""  # the deal is being played: the seed stays hidden
    assert mine.public.opened == [False, False, True]
    assert mine.public.pot == 15
    assert mine.public.client_seeds == ["c0", None, None]
    spectator = view_for(game, deal, None, server_seed_hex="ab" * 40, client_seeds=[])
    assert spectator.my_cards == []
    assert spectator.actions == []
    assert "stock" not in str(spectator.public)
    assert spectator.public.pile == 106 - 4 - 4 - 2 - 1 - 3


def test_the_card_to_use_is_shown_only_to_the_seat_on_turn() -> None:
    game, _events, _due = open_game(PLAYERS, 5)
    deal = _deal()
    seen = {
        seat: view_for(game, deal, seat, server_seed_hex="", client_seeds=[]).public.must_use
        for seat in (None, 0, 1, 2)
    }
    assert seen == {None: None, 0: None, 1: parse_card("KH"), 2: None}


def test_an_ended_deal_shows_every_hand_and_the_seed() -> None:
    game, _events, _due = open_game(PLAYERS, 5)
    deal = _deal(scores=[0, 30, 11])
    view = view_for(game, deal, 2, server_seed_hex="ab" * 40, client_seeds=[])
    assert view.ended
    assert view.turn is None
    assert view.server_seed == "ab" * 40
    assert (view.public.hands or [])[1] == [parse_card(c) for c in ("KD", "KC", "KH", "4C")]
    assert view.public.deal_scores == [0, 30, 11]


def test_a_finished_game_shows_an_empty_pot_and_the_payouts() -> None:
    game, _events, _due = open_game(PLAYERS, 5)
    results = tuple(DealResult(n, n % 3, 0, False, (50, -10, -20)) for n in range(7))
    over = replace(game, results=results)
    deal = _deal(scores=[50, -10, -20])
    view = view_for(over, deal, None, server_seed_hex="", client_seeds=[])
    assert view.public.pot == 0
    # ann has the highest total and nobody is within 50 points of it: the whole pot is hers.
    assert view.public.payouts == [15, 0, 0]
    assert [s.deals_won for s in view.seats] == [7, 0, 0]
    assert [s.total for s in view.seats] == [350, -70, -140]


def test_the_buy_in_is_due_when_the_game_opens_and_the_payout_after_its_last_deal() -> None:
    game, events, due = open_game(PLAYERS, 5)
    assert [e.kind for e in events] == ["game_started"]
    assert [(p.phase, p.deals_played) for p in due] == [(BUY_IN, 0)]
    assert due[0].record == {"players": list(PLAYERS), "stake": 5}
    ended = position([["AS"], ["2S"], ["3S"]], turn=0)
    ended.phase, ended.scores = Phase.ENDED, [0, 2, 3]
    for n in range(7):
        ended.deal_no = n
        ended.starter = game.next_starter
        game, events, due = close_deal(game, ended, "cd" * 40, ["x", None, None])
        kinds = [e.kind for e in events]
        if n < 6:
            assert kinds == ["seed_revealed", "deal_scored"]
            assert due == []
        else:
            assert kinds == ["seed_revealed", "deal_scored", "game_ended"]
            assert [(p.phase, p.deals_played) for p in due] == [(PAYOUT, 7)]
            assert due[0].record["totals"] == {"ann": 0, "bob": 14, "cat": 21}
            assert due[0].record["pot"] == 15
    assert isinstance(game, GameState)
    assert game.finished


def test_advice_groups_the_melds_and_leaves_the_rest_loose() -> None:
    deal = position([["AS", "2S", "3S", "9H", "9D", "9C", "KD"], ["4C"]], turn=0)
    advice = advice_for(deal, 0)
    groups = {kind: sorted(cards) for kind, cards in advice.groups}
    assert groups == {
        "run": sorted(parse_card(c) for c in ("AS", "2S", "3S")),
        "set": sorted(parse_card(c) for c in ("9H", "9D", "9C")),
    }
    assert advice.loose == (parse_card("KD"),)
