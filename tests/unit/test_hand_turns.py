"""The Hand deal state machine: the deal, the turn, opening, lay-offs, releases, the end."""

import json
from typing import Any

import pytest

from devkit.hand_positions import position
from games.hand.actions import (
    Action,
    Discard,
    DrawDiscard,
    DrawStock,
    LayMelds,
    LayOff,
    MeldSpec,
    ReleaseJoker,
    TimeOut,
    UndoTurn,
    action_from_dict,
    action_to_dict,
)
from games.hand.cards import card_text, parse_card
from games.hand.deal import deal_from_deck, new_deal
from games.hand.deal_state import DealState, EndReason, Phase, seat_view, seats_to_act
from games.hand.errors import HandMoveError
from games.hand.events import Event
from games.hand.melds import MeldKind
from games.hand.ruleset import RuleSet
from games.hand.turns import apply

pytestmark = pytest.mark.unit

SEED = bytes(range(80))
F0 = ["2D", "6D", "QC"]
F1 = ["3D", "7D", "JC"]
"""Loose cards that pad seat 0's and seat 1's hands (they form nothing with the rest)."""


def ids(state: DealState, seat: int, *texts: str) -> tuple[int, ...]:
    """Ids of the named cards in a seat's hand (each copy used once)."""
    pool = list(state.hands[seat])
    out = []
    for text in texts:
        card = next(c for c in pool if card_text(c) == text.upper())
        pool.remove(card)
        out.append(card)
    return tuple(out)


def refused(state: DealState, action: Action, reason: str) -> None:
    before = state.to_dict()
    with pytest.raises(HandMoveError) as caught:
        apply(state, action)
    assert caught.value.reason == reason, str(caught.value)
    assert state.to_dict() == before  # a refusal changes nothing


def melds(state: DealState, seat: int, *groups: list[str]) -> LayMelds:
    return LayMelds(seat, tuple(MeldSpec(ids(state, seat, *g)) for g in groups))


def test_the_deal_gives_14_each_15_to_the_starter_and_turns_one_card() -> None:
    state, events = new_deal(SEED, ["alice-seed", None], 4, 2)
    assert [len(h) for h in state.hands] == [14, 14, 15, 14]
    assert len(state.discard_pile) == 1
    assert len(state.stock) == 106 - 57 - 1
    assert (state.turn, state.phase, state.starter) == (2, Phase.PLAY, 2)
    assert len(state.commitment) == 64
    public = [e for e in events if e.is_public]
    assert all("cards" not in e.data for e in public)
    private = [e for e in events if not e.is_public]
    assert sorted(e.private_to for e in private if e.private_to is not None) == [0, 1, 2, 3]
    for e in private:
        assert e.private_to is not None
        assert e.data["cards"] == state.hands[e.private_to]
    again, _ = new_deal(SEED, ["alice-seed", None], 4, 2)
    assert again.to_dict() == state.to_dict()
    other, _ = new_deal(SEED, ["bob-seed", None], 4, 2)
    assert other.hands != state.hands


def test_deal_order_is_clockwise_from_the_starter() -> None:
    deck = list(range(106))
    state, _ = deal_from_deck(deck, 3, 1)
    assert state.hands[1][:2] == [0, 3]
    assert state.hands[2][:2] == [1, 4]
    assert state.hands[0][:2] == [2, 5]
    assert state.hands[1][-1] == 42
    assert state.discard_pile == [43]
    assert state.stock[0] == 44
    with pytest.raises(HandMoveError):
        deal_from_deck(deck, 5, 0)
    with pytest.raises(HandMoveError):
        deal_from_deck(deck[:-1], 3, 0)


def test_the_starter_skips_his_first_draw_and_everyone_else_draws() -> None:
    state, _ = new_deal(SEED, [], 2, 0)
    refused(state, DrawStock(0), "ALREADY_DREW")
    refused(state, DrawStock(1), "NOT_YOUR_TURN")
    state, events = apply(state, Discard(0, state.hands[0][0]))
    assert (state.turn, state.phase) == (1, Phase.DRAW)
    assert events[-1].kind == "turn_started"
    refused(state, Discard(1, state.hands[1][0]), "MUST_DRAW_FIRST")
    refused(state, LayMelds(1, (MeldSpec(tuple(state.hands[1][:3])),)), "MUST_DRAW_FIRST")
    top = state.stock[0]
    state, events = apply(state, DrawStock(1))
    assert state.hands[1][-1] == top
    drew, private = events
    assert drew.is_public
    assert "card" not in drew.data
    assert private.private_to == 1
    assert private.data["card"] == top
    refused(state, DrawDiscard(1), "ALREADY_DREW")
    refused(state, DrawStock(7), "UNKNOWN_SEAT")


def opening_position(extra: list[str], **kwargs: Any) -> DealState:
    hand = ["KS", "KH", "KD", *extra]
    return position([[*hand, *F0], F1], **kwargs)


def test_an_opening_of_50_is_refused_and_51_accepted() -> None:
    fifty = opening_position(["2C", "3C", "4C", "5C", "6C"])
    refused(
        fifty,
        melds(fifty, 0, ["KS", "KH", "KD"], ["2C", "3C", "4C", "5C", "6C"]),
        "OPENING_BELOW_51",
    )
    fifty_one = opening_position(["6C", "7C", "8C"])
    state, events = apply(fifty_one, melds(fifty_one, 0, ["KS", "KH", "KD"], ["6C", "7C", "8C"]))
    assert state.has_opened(0)
    assert events[0].kind == "melds_laid"
    assert events[0].data["opening"] is True
    assert events[0].data["value"] == 51
    assert len(state.melds) == 2
    assert all(m.owner == 0 for m in state.melds)
    assert len(state.hands[0]) == len(F0)


def test_the_low_ace_counts_one_toward_the_opening() -> None:
    low = opening_position(["AC", "2C", "3C", "JS", "JH", "JD"])
    refused(low, melds(low, 0, ["KS", "KH", "KD"], ["AC", "2C", "3C"]), "OPENING_BELOW_51")
    apply(low, melds(low, 0, ["KS", "KH", "KD"], ["AC", "2C", "3C"], ["JS", "JH", "JD"]))
    high = opening_position(["QC", "KC", "AC"])
    state, _ = apply(high, melds(high, 0, ["KS", "KH", "KD"], ["QC", "KC", "AC"]))
    assert state.has_opened(0)


def test_lay_offs_do_not_count_toward_the_opening() -> None:
    state = opening_position(["5C", "6C", "7C", "8H"], melds=[(1, ["9H", "10H", "JH"])], opened=[1])
    refused(state, LayOff(0, 0, ids(state, 0, "8H")[0]), "NOT_OPENED")
    # 30 + 18 = 48 with the lay-off's 8 would pass, but lay-offs never count.
    refused(state, melds(state, 0, ["KS", "KH", "KD"], ["5C", "6C", "7C"]), "OPENING_BELOW_51")


def test_after_opening_a_player_lays_off_on_any_meld() -> None:
    state = opening_position(
        ["6C", "7C", "8C", "8H", "9C"], melds=[(1, ["9H", "10H", "JH"])], opened=[1]
    )
    state, _ = apply(state, melds(state, 0, ["KS", "KH", "KD"], ["6C", "7C", "8C"]))
    state, events = apply(state, LayOff(0, 0, ids(state, 0, "8H")[0]))
    assert events[0].kind == "laid_off"
    assert str(state.melds[0]) == "8H 9H 10H JH"
    state, _ = apply(state, LayOff(0, 2, ids(state, 0, "9C")[0]))
    assert str(state.melds[2]) == "6C 7C 8C 9C"
    refused(state, LayOff(0, 9, state.hands[0][0]), "UNKNOWN_MELD")
    refused(state, LayOff(0, 0, ids(state, 0, "2D")[0]), "INVALID_LAYOFF")


def test_no_lay_off_on_the_opening_turn_when_the_table_says_so() -> None:
    rules = RuleSet(layoff_on_opening_turn=False)
    state = opening_position(["6C", "7C", "8C", "9C"], rules=rules)
    state, _ = apply(state, melds(state, 0, ["KS", "KH", "KD"], ["6C", "7C", "8C"]))
    refused(state, LayOff(0, 1, ids(state, 0, "9C")[0]), "NOT_OPENED")


def test_the_discard_taken_must_be_used_in_the_same_turn() -> None:
    state = position(
        [
            [*F0, "9H", "10H", "5S", "5H", "5D", "KC"],
            F1,
        ],
        discard_pile=["JH"],
        melds=[(0, ["AS", "2S", "3S"]), (1, ["JS", "JD", "JC"])],
        opened=[0],
        phase=Phase.DRAW,
    )
    state, events = apply(state, DrawDiscard(0))
    assert events[0].kind == "drew_from_discard"
    assert events[0].is_public
    taken = events[0].data["card"]
    assert state.must_use == taken
    refused(state, Discard(0, ids(state, 0, "KC")[0]), "DISCARD_NOT_USED")
    refused(state, Discard(0, taken), "DISCARD_NOT_USED")
    # Melding other cards does not use it either.
    after, _ = apply(state, melds(state, 0, ["5S", "5H", "5D"]))
    refused(after, Discard(0, ids(after, 0, "KC")[0]), "DISCARD_NOT_USED")
    used, _ = apply(state, LayMelds(0, (MeldSpec(ids(state, 0, "9H", "10H", "JH")),)))
    assert used.must_use is None
    done, _ = apply(used, Discard(0, ids(used, 0, "KC")[0]))
    assert done.turn == 1
    laid, _ = apply(state, LayOff(0, 1, taken))
    apply(laid, Discard(0, ids(laid, 0, "KC")[0]))


def test_a_player_who_has_not_opened_takes_the_discard_only_to_open_with_it() -> None:
    hand = ["KS", "KH", "KD", "6C", "7C", "8C", "QS", "QH", *F0]
    state = position([hand, F1], discard_pile=["QD"], phase=Phase.DRAW)
    state, _ = apply(state, DrawDiscard(0))
    refused(state, melds(state, 0, ["KS", "KH", "KD"], ["6C", "7C", "8C"]), "DISCARD_NOT_USED")
    opened, _ = apply(
        state, melds(state, 0, ["KS", "KH", "KD"], ["6C", "7C", "8C"], ["QS", "QH", "QD"])
    )
    assert opened.must_use is None
    assert opened.has_opened(0)
    loose = RuleSet(discard_pick_must_be_in_opening=False)
    relaxed = position([hand, F1], discard_pile=["QD"], phase=Phase.DRAW, rules=loose)
    relaxed, _ = apply(relaxed, DrawDiscard(0))
    relaxed, _ = apply(relaxed, melds(relaxed, 0, ["KS", "KH", "KD"], ["6C", "7C", "8C"]))
    assert relaxed.must_use is not None
    refused(relaxed, Discard(0, ids(relaxed, 0, "2D")[0]), "DISCARD_NOT_USED")


def test_a_turn_begun_from_the_discard_pile_can_be_taken_back() -> None:
    hand = ["KS", "KH", "KD", "6C", "7C", "8C", "QS", "QH", *F0]
    start = position([hand, F1], discard_pile=["4S", "QD"], phase=Phase.DRAW)
    state, _ = apply(start, DrawDiscard(0))
    state, _ = apply(
        state, melds(state, 0, ["KS", "KH", "KD"], ["6C", "7C", "8C"], ["QS", "QH", "QD"])
    )
    assert state.has_opened(0)
    undone, events = apply(state, UndoTurn(0))
    assert undone.to_dict() == start.to_dict()
    assert events[0].kind == "turn_undone"
    assert events[0].data["discard_pile"] == start.discard_pile
    drawn, _ = apply(undone, DrawStock(0))
    refused(drawn, UndoTurn(0), "NOTHING_TO_UNDO")


def test_empty_discard_pile_cannot_be_drawn() -> None:
    state = position([F1, F1], phase=Phase.DRAW)
    refused(state, DrawDiscard(0), "EMPTY_DISCARD_PILE")


def test_jokers_are_released_only_after_opening_and_stay_in_hand() -> None:
    table = [(1, ["5H", "J1", "7H"]), (1, ["10S", "10H", "J2"])]
    hand = ["6H", "10D", "10C", *F0]
    closed = position([hand, F1], melds=table, opened=[1])
    refused(closed, ReleaseJoker(0, 0, ids(closed, 0, "6H")), "NOT_OPENED")
    state = position([hand, F1], melds=table, opened=[0, 1])
    refused(state, ReleaseJoker(0, 1, ids(state, 0, "10D")), "INVALID_RELEASE")
    state, events = apply(state, ReleaseJoker(0, 0, ids(state, 0, "6H")))
    assert events[0].kind == "joker_released"
    assert parse_card("J1") in state.hands[0]
    assert str(state.melds[0]) == "5H 6H 7H"
    state, _ = apply(state, ReleaseJoker(0, 1, ids(state, 0, "10D", "10C")))
    assert parse_card("J2") in state.hands[0]
    assert not state.melds[1].jokers
    assert len(state.melds[1].cards) == 4
    assert len(state.hands[0]) == len(F0) + 2
    # A released joker may be used later in the turn, or kept.
    state, _ = apply(state, LayOff(0, 0, parse_card("J1")))
    assert str(state.melds[0]) == "5H 6H 7H J1"


def test_a_closed_four_is_refused_for_release() -> None:
    state = position([["10C", *F0], F1], melds=[(1, ["10S", "10H", "10D", "J1"])], opened=[0])
    refused(state, ReleaseJoker(0, 0, ids(state, 0, "10C")), "CLOSED_FOUR")
    three = position([["10D", "10C", *F0], F1], melds=[(1, ["10S", "10H", "J1"])], opened=[0])
    closed, _ = apply(three, LayOff(0, 0, ids(three, 0, "10D")[0]))
    refused(closed, ReleaseJoker(0, 0, ids(closed, 0, "10C")), "CLOSED_FOUR")


def test_nobody_goes_out_without_a_discard() -> None:
    state = position([["5S", "5H", "5D"], F1], melds=[(1, ["9H", "10H", "JH"])], opened=[0])
    refused(state, melds(state, 0, ["5S", "5H", "5D"]), "MUST_KEEP_DISCARD")
    two = position([["QH", "5S"], F1], melds=[(1, ["9H", "10H", "JH"])], opened=[0])
    refused(two, LayOff(0, 0, ids(two, 0, "5S")[0]), "INVALID_LAYOFF")
    one = position([["QH"], F1], melds=[(1, ["9H", "10H", "JH"])], opened=[0])
    refused(one, LayOff(0, 0, ids(one, 0, "QH")[0]), "MUST_KEEP_DISCARD")


def test_going_out_scores_50_and_the_others_their_hands() -> None:
    state = position(
        [["QH", "5S"], ["AS", "KD", "J1", "3C"], ["2C"]],
        melds=[(1, ["9H", "10H", "JH"])],
        opened=[0],
    )
    state, _ = apply(state, LayOff(0, 0, ids(state, 0, "QH")[0]))
    state, events = apply(state, Discard(0, ids(state, 0, "5S")[0]))
    assert (state.phase, state.winner, state.hand_win) == (Phase.ENDED, 0, False)
    assert state.end_reason is EndReason.WENT_OUT
    assert state.scores == [50, -(11 + 10 + 25 + 3), -2]
    assert [e.kind for e in events] == ["discarded", "went_out", "deal_ended"]
    assert events[-1].data["hands"][1] == state.hands[1]
    refused(state, DrawStock(1), "DEAL_OVER")


HAND_CARDS = ["AS", "2S", "3S", "4S", "5S", "6S", "7S", "KH", "KD", "KC", "9H", "9D", "9C", "9S"]


def test_a_hand_scores_100_and_doubles_the_losers_penalties() -> None:
    state = position([[*HAND_CARDS, "4D"], ["J1", "AH", "3C"], ["2C"]], turn_no=0)
    state, _ = apply(state, melds(state, 0, HAND_CARDS[:7], HAND_CARDS[7:10], HAND_CARDS[10:]))
    state, events = apply(state, Discard(0, ids(state, 0, "4D")[0]))
    assert (state.winner, state.hand_win) == (0, True)
    assert state.scores == [100, -2 * (25 + 11 + 3), -2 * 2]
    assert events[-2].kind == "went_out"
    assert events[-2].data["hand"] is True


def test_going_out_after_opening_on_an_earlier_turn_is_no_hand() -> None:
    state = position(
        [["QH", "5S"], ["J1"]], melds=[(0, ["9H", "10H", "JH"])], opened=[0], turn_no=3
    )
    state, _ = apply(state, LayOff(0, 0, ids(state, 0, "QH")[0]))
    state, _ = apply(state, Discard(0, ids(state, 0, "5S")[0]))
    assert (state.hand_win, state.scores) == (False, [50, -25])


def test_when_the_stock_runs_out_nobody_wins_and_everyone_pays_his_hand() -> None:
    state = position([["KS", "3H"], ["J1", "AH"], ["4C"]], phase=Phase.DRAW, stock_top=["5D"])
    state.discard_pile = state.stock[1:]
    state.stock = state.stock[:1]
    state, _ = apply(state, DrawStock(0))
    state, events = apply(state, Discard(0, ids(state, 0, "KS")[0]))
    assert (state.phase, state.winner, state.end_reason) == (
        Phase.ENDED,
        None,
        EndReason.STOCK_EXHAUSTED,
    )
    assert state.scores == [-(3 + 5), -(25 + 11), -4]
    assert events[-1].data["reason"] == "stock_exhausted"


def test_timeout_draws_from_the_stock_and_discards_the_drawn_card() -> None:
    state = position([F1, F1], phase=Phase.DRAW, stock_top=["QC"])
    before = list(state.hands[0])
    state, events = apply(state, TimeOut(0))
    assert state.hands[0] == before
    assert card_text(state.discard_pile[-1]) == "QC"
    assert [e.kind for e in events] == [
        "timed_out",
        "drew_from_stock",
        "card_drawn",
        "discarded",
        "turn_started",
    ]
    assert state.turn == 1


def test_timeout_of_the_starters_first_turn_discards_the_last_card_dealt() -> None:
    state, _ = new_deal(SEED, [], 3, 1)
    last = state.hands[1][-1]
    state, _ = apply(state, TimeOut(1))
    assert state.discard_pile[-1] == last
    assert len(state.hands[1]) == 14


def test_timeout_after_taking_the_discard_takes_the_turn_back_first() -> None:
    hand = ["KS", "KH", "KD", "6C", "7C", "8C", "QS", "QH", *F0]
    state = position([hand, F1], discard_pile=["QD"], phase=Phase.DRAW, stock_top=["AD"])
    pile = list(state.discard_pile)
    state, _ = apply(state, DrawDiscard(0))
    state, events = apply(state, TimeOut(0))
    assert "turn_undone" in [e.kind for e in events]
    assert state.discard_pile == [*pile, parse_card("AD")]
    assert sorted(state.hands[0]) == sorted(position([hand, F1]).hands[0])
    assert not state.melds


def test_timeout_after_melding_from_the_stock_discards_the_drawn_card_if_held() -> None:
    state = opening_position(["6C", "7C", "8C"], phase=Phase.DRAW, stock_top=["2H"])
    state, _ = apply(state, DrawStock(0))
    state, _ = apply(state, melds(state, 0, ["KS", "KH", "KD"], ["6C", "7C", "8C"]))
    state, _ = apply(state, TimeOut(0))
    assert card_text(state.discard_pile[-1]) == "2H"
    assert len(state.melds) == 2  # melds laid legally stay


def mentioned(data: Any) -> set[int]:
    found: set[int] = set()
    if isinstance(data, dict):
        for key, value in data.items():
            if key in ("card", "top_discard") and isinstance(value, int):
                found.add(value)
            elif key in ("cards", "jokers", "discard_pile") and isinstance(value, list):
                found.update(v for v in value if isinstance(v, int))
            else:
                found |= mentioned(value)
    elif isinstance(data, list):
        for item in data:
            found |= mentioned(item)
    return found


def assert_public_events_hide_hands_and_stock(state: DealState, events: list[Event]) -> None:
    """No public event names a card in the stock or (unless publicly taken) in a hand."""
    publicly_taken = {"drew_from_discard", "joker_released", "deal_ended", "dealt"}
    for event in events:
        if not event.is_public:
            continue
        cards = mentioned(event.data)
        assert not cards & set(state.stock), event
        if event.kind not in publicly_taken:
            for hand in state.hands:
                assert not cards & set(hand), event


def test_public_events_never_show_a_hand_or_the_stock() -> None:
    state, events = new_deal(SEED, [], 3, 0)
    assert_public_events_hide_hands_and_stock(state, events)
    for _ in range(30):
        if state.phase is Phase.ENDED:
            break
        state, events = apply(state, TimeOut(state.turn))
        assert_public_events_hide_hands_and_stock(state, events)


def test_the_view_shows_a_seat_only_its_own_hand() -> None:
    state, _ = new_deal(SEED, [], 3, 0)
    view = seat_view(state, 1)
    assert view["hand"] == state.hands[1]
    assert view["hand_sizes"] == [15, 14, 14]
    assert view["hands"] is None
    assert "stock" not in view
    assert view["stock_size"] == len(state.stock)
    flat = json.dumps(view)
    assert json.loads(flat) == view
    with pytest.raises(HandMoveError):
        seat_view(state, 3)


def test_state_round_trips_through_json_and_bad_state_is_refused() -> None:
    state = opening_position(["6C", "7C", "8C"], discard_pile=["QD"], phase=Phase.DRAW)
    state, _ = apply(state, DrawDiscard(0))
    text = json.dumps(state.to_dict())
    back = DealState.from_dict(json.loads(text))
    assert back.to_dict() == state.to_dict()
    broken = json.loads(text)
    broken["hands"][1].append(broken["hands"][0][0])
    with pytest.raises(HandMoveError) as caught:
        DealState.from_dict(broken)
    assert caught.value.reason == "INVALID_STATE"
    with pytest.raises(HandMoveError):
        DealState.from_dict({"format": 99})


def test_apply_never_mutates_the_state_it_is_given() -> None:
    state, _ = new_deal(SEED, [], 2, 0)
    before = state.to_dict()
    apply(state, Discard(0, state.hands[0][0]))
    assert state.to_dict() == before


@pytest.mark.parametrize(
    "action",
    [
        DrawStock(1),
        DrawDiscard(0),
        UndoTurn(2),
        TimeOut(3),
        Discard(1, 40),
        LayOff(0, 2, 104, "low"),
        ReleaseJoker(1, 0, (3, 4)),
        LayMelds(0, (MeldSpec((1, 2, 3)), MeldSpec((104, 5, 6), MeldKind.RUN))),
    ],
)
def test_actions_round_trip_through_plain_values(action: Action) -> None:
    data = json.loads(json.dumps(action_to_dict(action)))
    assert action_from_dict(data) == action


def test_malformed_actions_are_refused() -> None:
    for bad in ({"type": "fly", "seat": 0}, {"type": "discard"}, {"type": "discard", "seat": 0}):
        with pytest.raises(HandMoveError) as caught:
            action_from_dict(bad)
        assert caught.value.reason == "MALFORMED_ACTION"


@pytest.mark.parametrize(
    "action",
    [
        Discard(0, 999),
        Discard(0, -1),
        LayOff(0, 0, 106),
        ReleaseJoker(0, 0, (3, 500)),
        LayMelds(0, (MeldSpec((1, 2, 1000)),)),
    ],
)
def test_unknown_card_ids_are_refused_as_malformed(action: Action) -> None:
    state = position([["QH", *F0], F1], melds=[(1, ["9H", "10H", "JH"])], opened=[0])
    refused(state, action, "MALFORMED_ACTION")


def test_a_joker_laid_off_on_a_full_set_of_three_closes_it() -> None:
    state = position([["J1", *F0], F1], melds=[(1, ["9S", "9H", "9D"])], opened=[0])
    state, _ = apply(state, LayOff(0, 0, parse_card("J1")))
    assert state.melds[0].is_closed_four
    refused(state, LayOff(0, 0, ids(state, 0, "2D")[0]), "INVALID_LAYOFF")


def test_a_joker_is_laid_off_at_the_chosen_end_of_a_run() -> None:
    state = position([["J1", *F0], F1], melds=[(1, ["9H", "10H", "JH"])], opened=[0])
    low, _ = apply(state, LayOff(0, 0, parse_card("J1"), "low"))
    assert str(low.melds[0].stands_for(0)) == "8H"
    high, _ = apply(state, LayOff(0, 0, parse_card("J1")))
    assert str(high.melds[0].stands_for(3)) == "QH"


def test_two_jokers_in_a_set_of_three_are_both_released_by_the_three_missing_suits() -> None:
    state = position([["8H", "8D", "8C", *F0], F1], melds=[(1, ["8S", "J1", "J2"])], opened=[0])
    state, events = apply(state, ReleaseJoker(0, 0, ids(state, 0, "8H", "8D", "8C")))
    assert sorted(events[0].data["jokers"]) == [104, 105]
    assert {104, 105} <= set(state.hands[0])
    assert not state.melds[0].jokers


def test_an_ace_on_a_two_to_king_run_goes_high_unless_told_low() -> None:
    run = ["2C", "3C", "4C", "5C", "6C", "7C", "8C", "9C", "10C", "JC", "QC", "KC"]
    state = position([["AC", *F0[:2]], F1], melds=[(1, run)], opened=[0])
    high, _ = apply(state, LayOff(0, 0, ids(state, 0, "AC")[0]))
    assert (high.melds[0].rank, high.melds[0].high) == (2, 14)
    low, _ = apply(state, LayOff(0, 0, ids(state, 0, "AC")[0], "low"))
    assert (low.melds[0].rank, low.melds[0].high) == (1, 13)


def test_events_map_onto_the_table_stream_shape() -> None:
    state, events = new_deal(SEED, [], 2, 0)
    started = events[0].stream_parts()
    assert started["type"] == "deal_started"
    assert started["private_seat"] is None
    dealt = events[1].stream_parts()
    assert dealt["type"] == "private"
    assert dealt["data"] == {}
    assert dealt["private_seat"] == 0
    assert dealt["private_data"]["type"] == "dealt"
    assert dealt["private_data"]["data"]["cards"] == state.hands[0]
    assert Event.from_dict(json.loads(json.dumps(events[1].to_dict()))) == events[1]
    assert events[1].visible_to(0)
    assert not events[1].visible_to(1)


def test_only_the_seat_whose_turn_it_is_acts() -> None:
    state, _ = new_deal(SEED, [], 3, 2)
    assert seats_to_act(state) == [2]
    ended = position([["QH", "5S"], F1], melds=[(1, ["9H", "10H", "JH"])], opened=[0])
    ended, _ = apply(ended, LayOff(0, 0, ids(ended, 0, "QH")[0]))
    ended, _ = apply(ended, Discard(0, ids(ended, 0, "5S")[0]))
    assert seats_to_act(ended) == []


def test_a_table_may_let_the_deal_go_on_until_someone_must_draw_from_the_empty_stock() -> None:
    rules = RuleSet(stock_out_ends_at_discard=False)
    table = [(1, ["9H", "10H", "JH"])]
    state = position(
        [["KS", "3H", "QH"], ["J1", "AH"]],
        phase=Phase.DRAW,
        stock_top=["5D"],
        melds=table,
        opened=[1],
        rules=rules,
    )
    state.discard_pile = state.stock[1:]
    state.stock = state.stock[:1]
    state, _ = apply(state, DrawStock(0))
    state, _ = apply(state, Discard(0, ids(state, 0, "KS")[0]))
    assert (state.phase, state.turn, state.stock) == (Phase.DRAW, 1, [])
    # Seat 1 may still take the top discard when he uses it...
    taken, _ = apply(state, DrawDiscard(1))
    assert taken.must_use is not None
    # ...but drawing from the empty stock (or timing out) ends the deal with no winner.
    for action in (DrawStock(1), TimeOut(1)):
        ended, events = apply(state, action)
        assert (ended.phase, ended.winner, ended.end_reason) == (
            Phase.ENDED,
            None,
            EndReason.STOCK_EXHAUSTED,
        )
        assert ended.scores == [-(3 + 10 + 5), -(25 + 11)]
        assert events[-1].kind == "deal_ended"


def test_melding_cards_not_in_hand_or_twice_is_refused() -> None:
    state = opening_position(["6C", "7C", "8C"])
    others = tuple(state.hands[1][:3])
    refused(state, LayMelds(0, (MeldSpec(others),)), "CARD_NOT_IN_HAND")
    kings = ids(state, 0, "KS", "KH", "KD")
    stranger = parse_card("KC")
    refused(state, LayMelds(0, (MeldSpec((*kings[:2], stranger)),)), "CARD_NOT_IN_HAND")
    twice = LayMelds(0, (MeldSpec(kings), MeldSpec((kings[0], *ids(state, 0, "6C", "7C")))))
    refused(state, twice, "DUPLICATE_CARD")
    clubs = ids(state, 0, "6C", "7C", "8C")
    refused(state, LayMelds(0, (MeldSpec(kings), MeldSpec(kings))), "DUPLICATE_CARD")
    refused(state, LayMelds(0, (MeldSpec((*clubs[:2], clubs[0])),)), "DUPLICATE_CARD")
    refused(state, LayMelds(0, ()), "INVALID_MELD")
