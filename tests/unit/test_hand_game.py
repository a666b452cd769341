"""A game of Hand across deals: starter rotation, totals, the end of the game, the pot."""

import hashlib
import json

import pytest

from games.fair import FairStream
from games.hand.bot import play_bot_turn
from games.hand.deal_state import DealState, Phase
from games.hand.errors import HandMoveError
from games.hand.game import (
    GameState,
    game_payout_postings,
    record_deal,
    start_deal,
    start_game,
)
from games.hand.ledger import POT, net_movements
from games.hand.ruleset import RuleSet

pytestmark = pytest.mark.unit


def seed(n: int) -> bytes:
    return hashlib.sha512(f"hand-game-{n}".encode()).digest() + bytes(16)


def play_out(deal: DealState, n: int) -> DealState:
    stream = FairStream(seed(n), [], tag="test-bots")
    while deal.phase is not Phase.ENDED:
        deal, _ = play_bot_turn(deal, stream)
    return deal


def test_a_game_is_seven_deals_with_the_starter_rotating() -> None:
    game, buy_in = start_game(["ann", "ben", "cat"], 10, first_starter=1)
    assert net_movements(buy_in) == {"ann": -10, "ben": -10, "cat": -10, POT: 30}
    assert game.pot == 30
    starters = []
    all_events = []
    for n in range(7):
        assert not game.finished
        deal, _ = start_deal(game, seed(n), ["client"])
        starters.append(deal.starter)
        assert deal.deal_no == n
        assert len(deal.hands[deal.starter]) == 15
        deal = play_out(deal, n)
        before = game.totals
        game, events = record_deal(game, deal)
        all_events.extend(events)
        assert deal.scores is not None
        assert game.totals == [b + s for b, s in zip(before, deal.scores, strict=True)]
        assert events[0].kind == "deal_scored"
    assert starters == [1, 2, 0, 1, 2, 0, 1]
    assert game.finished
    assert all_events[-1].kind == "game_ended"
    payouts = all_events[-1].data["payouts"]
    assert sum(payouts) == 30
    postings = game_payout_postings(game)
    net = net_movements(buy_in + postings)
    assert net.get(POT, 0) == 0
    assert sum(net.values()) == 0
    assert sum(p.amount for p in postings) == 30
    with pytest.raises(HandMoveError) as caught:
        start_deal(game, seed(99))
    assert caught.value.reason == "GAME_OVER"
    with pytest.raises(HandMoveError):
        record_deal(game, deal)


def test_deals_are_recorded_in_order_and_only_when_over() -> None:
    game, _ = start_game(["a", "b"], 5, RuleSet(deals_per_game=2))
    deal, _ = start_deal(game, seed(1))
    with pytest.raises(HandMoveError) as caught:
        record_deal(game, deal)
    assert caught.value.reason == "INVALID_STATE"
    deal = play_out(deal, 1)
    other_rules = start_game(["a", "b"], 5, RuleSet(deals_per_game=2, win_score=60))[0]
    with pytest.raises(HandMoveError, match="other rules"):
        record_deal(other_rules, deal)
    game, _ = record_deal(game, deal)
    with pytest.raises(HandMoveError):
        record_deal(game, deal)  # deal 0 again
    with pytest.raises(HandMoveError):
        game_payout_postings(game)
    second = play_out(start_deal(game, seed(2))[0], 2)
    game, events = record_deal(game, second)
    assert game.finished
    assert [e.kind for e in events] == ["deal_scored", "game_ended"]


def test_the_game_state_round_trips_through_json() -> None:
    game, _ = start_game(["a", "b", "c", "d"], 7, RuleSet(deals_per_game=3), first_starter=3)
    game, _ = record_deal(game, play_out(start_deal(game, seed(5))[0], 5))
    back = GameState.from_dict(json.loads(json.dumps(game.to_dict())))
    assert back == game
    assert back.next_starter == 0
    with pytest.raises(HandMoveError):
        GameState.from_dict({"players": ["a"]})


def test_a_game_needs_two_to_four_players() -> None:
    for players in (["a"], ["a", "b", "c", "d", "e"]):
        with pytest.raises(HandMoveError):
            start_game(players, 1)
    with pytest.raises(HandMoveError):
        start_game(["a", "b"], 1, first_starter=2)


def test_leaders_and_payouts_follow_the_totals() -> None:
    game, _ = start_game(["a", "b", "c"], 100, RuleSet(deals_per_game=1))
    deal = play_out(start_deal(game, seed(8))[0], 8)
    game, events = record_deal(game, deal)
    assert deal.scores is not None
    best = max(deal.scores)
    assert game.leaders() == [s for s, t in enumerate(deal.scores) if t == best]
    assert sum(game.payouts()) == 300
    assert events[-1].data["winners"] == game.leaders()
