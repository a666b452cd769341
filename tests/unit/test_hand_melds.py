"""Hand melds: sets, runs, the ace, jokers, values, laying off and releasing jokers."""

import pytest

from games.hand.cards import parse_card, parse_cards
from games.hand.errors import HandMoveError
from games.hand.melds import (
    Meld,
    MeldKind,
    card_penalty,
    hand_penalty,
    lay_off,
    make_meld,
    meld_value,
    release_joker,
)
from games.hand.ruleset import DEFAULT_RULES, RuleSet

pytestmark = pytest.mark.unit
R = DEFAULT_RULES


def meld(*texts: str, kind: MeldKind | None = None) -> Meld:
    return make_meld(parse_cards(texts), 0, R, kind)


def refused(reason: str, *texts: str) -> None:
    with pytest.raises(HandMoveError) as caught:
        meld(*texts)
    assert caught.value.reason == reason


def test_sets_are_three_or_four_of_a_rank_in_different_suits() -> None:
    assert meld("7S", "7H", "7D").kind is MeldKind.SET
    assert meld("7S", "7H", "7D", "7C").kind is MeldKind.SET
    refused("INVALID_MELD", "7S", "7H")
    refused("INVALID_MELD", "7S", "7S", "7H")  # two copies of one suit
    refused("INVALID_MELD", "7S", "7H", "8D")


def test_runs_are_three_or_more_of_one_suit_in_sequence() -> None:
    run = meld("5H", "6H", "7H", "8H")
    assert (run.kind, run.rank, run.high) == (MeldKind.RUN, 5, 8)
    assert meld("8H", "6H", "7H").rank == 6  # without jokers any order is read
    refused("INVALID_MELD", "5H", "6H", "8H")
    refused("INVALID_MELD", "5H", "6H", "7S")


def test_the_ace_is_low_or_high_but_never_in_the_middle() -> None:
    low = meld("AS", "2S", "3S")
    high = meld("QS", "KS", "AS")
    assert (low.rank, meld_value(low, R)) == (1, 1 + 2 + 3)
    assert (high.rank, high.high, meld_value(high, R)) == (12, 14, 10 + 10 + 11)
    refused("INVALID_MELD", "KS", "AS", "2S")
    refused("INVALID_MELD", "QS", "KS", "AS", "2S")
    with pytest.raises(HandMoveError):
        make_meld(parse_cards(["KS", "AS", "2S"]), 0, R, MeldKind.RUN)


def test_a_run_never_holds_the_ace_at_both_ends() -> None:
    thirteen = ["AS", *[f"{r}S" for r in (2, 3, 4, 5, 6, 7, 8, 9, 10)], "JS", "QS", "KS"]
    assert len(meld(*thirteen).cards) == 13
    with pytest.raises(HandMoveError):
        make_meld([*parse_cards(thirteen), parse_card("AS", copy=1)], 0, R)


def test_jokers_stand_for_any_card_and_take_its_value() -> None:
    run = meld("5H", "J1", "7H")
    assert meld_value(run, R) == 5 + 6 + 7
    assert str(run.stands_for(1)) == "6H"
    low_joker = meld("J1", "2H", "3H")
    assert (low_joker.rank, meld_value(low_joker, R)) == (1, 1 + 2 + 3)
    a_set = meld("KS", "KH", "J2")
    assert (a_set.kind, meld_value(a_set, R)) == (MeldKind.SET, 30)
    aces = meld("AS", "AH", "J2")
    assert meld_value(aces, R) == 33  # an ace in a set is 11, and so is its joker


def test_one_real_card_and_two_jokers_is_a_set_unless_told_run() -> None:
    both = parse_cards(["J1", "J2", "5H"])
    assert make_meld(both, 0, R).kind is MeldKind.SET
    run = make_meld(both, 0, R, MeldKind.RUN)
    assert (run.rank, meld_value(run, R)) == (3, 3 + 4 + 5)
    one_joker_rule = RuleSet(max_jokers_per_meld=1)
    with pytest.raises(HandMoveError):
        make_meld(both, 0, one_joker_rule)


def test_values_for_penalties() -> None:
    assert card_penalty(parse_card("AS"), R) == 11
    assert card_penalty(parse_card("KD"), R) == 10
    assert card_penalty(parse_card("JD"), R) == 10
    assert card_penalty(parse_card("7C"), R) == 7
    assert card_penalty(parse_card("J1"), R) == 25
    assert hand_penalty(parse_cards(["J1", "AS", "2H"]), R) == 38


def layoff_reason(target: Meld, text: str, end: str | None = None) -> str:
    with pytest.raises(HandMoveError) as caught:
        lay_off(target, parse_card(text, copy=1), R, end)
    return caught.value.reason


def test_a_fourth_suit_joins_a_three_card_set() -> None:
    grown = lay_off(meld("9S", "9H", "9D"), parse_card("9C"), R)
    assert len(grown.cards) == 4
    assert layoff_reason(meld("9S", "9H", "9D"), "9H") == "INVALID_LAYOFF"
    assert layoff_reason(grown, "9S") == "INVALID_LAYOFF"  # four is full


def test_a_set_with_a_joker_takes_only_a_suit_not_already_in_it() -> None:
    with_joker = meld("10S", "10H", "J1")
    assert layoff_reason(with_joker, "10S") == "INVALID_LAYOFF"
    closed = lay_off(with_joker, parse_card("10D"), R)
    assert closed.is_closed_four
    assert lay_off(with_joker, parse_card("10C"), R).is_closed_four


def test_runs_grow_at_either_end_and_a_joker_is_laid_off_as_any_card() -> None:
    run = meld("5H", "6H", "7H")
    assert lay_off(run, parse_card("4H"), R).rank == 4
    assert lay_off(run, parse_card("8H"), R).high == 8
    assert layoff_reason(run, "9H") == "INVALID_LAYOFF"
    assert layoff_reason(run, "8S") == "INVALID_LAYOFF"
    high_joker = lay_off(run, parse_card("J1"), R)
    assert str(high_joker.stands_for(3)) == "8H"
    low_joker = lay_off(run, parse_card("J1"), R, end="low")
    assert (low_joker.rank, str(low_joker.stands_for(0))) == (4, "4H")
    assert layoff_reason(run, "J2", end="middle") == "INVALID_LAYOFF"


def test_an_ace_extends_a_run_at_an_end_only() -> None:
    assert lay_off(meld("2C", "3C", "4C"), parse_card("AC"), R).rank == 1
    assert lay_off(meld("JC", "QC", "KC"), parse_card("AC"), R).high == 14
    assert layoff_reason(meld("QC", "KC", "AC"), "2C") == "INVALID_LAYOFF"


def test_release_a_runs_joker_with_the_real_card() -> None:
    run = meld("5H", "J1", "7H")
    new, freed = release_joker(run, [parse_card("6H")], R)
    assert freed == (parse_card("J1"),)
    assert str(new) == "5H 6H 7H"
    with pytest.raises(HandMoveError) as caught:
        release_joker(run, [parse_card("8H")], R)
    assert caught.value.reason == "INVALID_RELEASE"


def test_release_a_three_card_sets_joker_with_both_missing_suits() -> None:
    three = meld("10S", "10H", "J1")
    new, freed = release_joker(three, parse_cards(["10D", "10C"]), R)
    assert freed == (parse_card("J1"),)
    assert sorted(str(new).split()) == ["10C", "10D", "10H", "10S"]
    assert not new.jokers
    for partial in (["10D"], ["10D", "10S"], ["10D", "9C"]):
        with pytest.raises(HandMoveError) as caught:
            release_joker(three, parse_cards(partial), R)
        assert caught.value.reason == "INVALID_RELEASE"


def test_a_closed_four_never_releases_its_joker() -> None:
    closed = lay_off(meld("10S", "10H", "J1"), parse_card("10D"), R)
    with pytest.raises(HandMoveError) as caught:
        release_joker(closed, [parse_card("10C")], R)
    assert caught.value.reason == "CLOSED_FOUR"


def test_release_from_a_meld_without_joker_is_refused() -> None:
    with pytest.raises(HandMoveError) as caught:
        release_joker(meld("5H", "6H", "7H"), [parse_card("6H", copy=1)], R)
    assert caught.value.reason == "INVALID_RELEASE"


def test_melds_round_trip_through_plain_values() -> None:
    for m in (meld("5H", "J1", "7H"), meld("10S", "10H", "J2")):
        assert Meld.from_dict(m.to_dict()) == m
