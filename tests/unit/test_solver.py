"""The hand solver against the cases of docs/rules/kishpa.md sections 2 and 3."""

from __future__ import annotations

import pytest

from devkit.kishpa_reference import is_valid_group, reference_winning_arrangement
from games.kishpa.ruleset import DEFAULT_RULES, RuleSet
from games.kishpa.solver import (
    Group,
    best_arrangement,
    find_winning_arrangement,
    winning_discards,
)
from games.kishpa.tiles import Face, joker_of, parse_face, parse_faces

pytestmark = pytest.mark.unit

WRAP = RuleSet(allow_run_12_13_1=True)


def faces(text: str) -> list[Face]:
    return parse_faces(text.split())


def check(hand: list[Face], groups: list[Group], joker: Face, rules: RuleSet) -> None:
    """Every tile in exactly one valid group, with a long run."""
    used = sorted(p for g in groups for p in g.positions)
    assert used == list(range(len(hand)))
    for g in groups:
        assert is_valid_group(g.kind, [hand[p] for p in g.positions], joker, rules), g
    assert any(g.kind == "run" and len(g.positions) >= rules.min_long_run for g in groups), groups


def wins(text: str, kishpa: str = "R5", rules: RuleSet = DEFAULT_RULES) -> bool:
    hand = faces(text)
    joker = joker_of(parse_face(kishpa))
    groups = find_winning_arrangement(hand, joker, rules)
    expected = reference_winning_arrangement(hand, joker, rules) is not None
    assert (groups is not None) == expected, "solver and reference disagree"
    if groups is not None:
        check(hand, groups, joker, rules)
    return groups is not None


# --- runs, sets and the long run -------------------------------------------------------


def test_a_plain_winning_hand() -> None:
    assert wins("R1 R2 R3 R4 B7 Y7 K7 B9 B10 B11 Y1 Y2 Y3 Y4")


def test_every_group_valid_but_no_run_of_four_does_not_win() -> None:
    # Four sets (4 + 4 + 3 + 3) and no run at all.
    assert not wins("R7 B7 Y7 K7 R8 B8 Y8 K8 R9 B9 Y9 R10 B10 Y10")
    # Runs of three and sets of four.
    assert not wins("R1 R2 R3 B1 B2 B3 K7 R7 B7 Y7 K9 R9 B9 Y9")


def test_a_joker_counts_toward_the_long_run() -> None:
    # Kishpa R5: the joker is R6 and it makes B1 B2 B3 a run of four.
    assert wins("B1 B2 B3 R6 R7 B7 Y7 K9 K10 K11 Y1 Y2 Y3 K7")


def test_one_is_low_only_and_runs_do_not_wrap() -> None:
    hand = "R12 R13 R1 B1 B2 B3 B4 Y7 B7 K7 Y9 Y10 Y11 Y12"
    assert not wins(hand)
    # The same hand with 12-13-1 allowed wins.
    assert wins(hand, rules=WRAP)


def test_thirteen_one_two_is_never_a_run() -> None:
    hand = "R13 R1 R2 B1 B2 B3 B4 Y7 B7 K7 Y9 Y10 Y11 Y12"
    assert not wins(hand)
    assert not wins(hand, rules=WRAP)


def test_the_12_13_1_setting_lets_1_follow_13_in_a_longer_run() -> None:
    hand = "K10 K11 K12 K13 K1 B1 B2 B3 Y7 B7 R7 Y9 Y10 Y11"
    assert not wins(hand)
    assert wins(hand, rules=WRAP)


def test_a_run_has_at_most_thirteen_tiles() -> None:
    # R1..R13 plus a second R1: a 14-tile run does not exist...
    hand = "R1 R2 R3 R4 R5 R6 R7 R8 R9 R10 R11 R12 R13 R1"
    assert not wins(hand, kishpa="B5")
    # ...but with 12-13-1 it splits into R1..R11 and R12 R13 R1.
    assert wins(hand, kishpa="B5", rules=WRAP)


def test_a_run_is_one_colour() -> None:
    assert not wins("R1 R2 B3 R4 B7 Y7 K7 B9 B10 B11 Y1 Y2 Y3 Y4")


def test_a_set_needs_different_colours() -> None:
    assert not wins("R1 R2 R3 R4 B7 B7 K7 B9 B10 B11 Y1 Y2 Y3 Y4")


def test_a_set_has_at_most_four_tiles() -> None:
    joker = parse_face("R6")
    four = faces("R7 B7 Y7 K7")
    assert is_valid_group("set", four, joker)
    # A joker always finds another home in a 14-tile hand, so check the group itself.
    assert not is_valid_group("set", [*four, joker], joker)
    assert not is_valid_group("set", four[:2], joker)


def test_sets_of_four_with_jokers() -> None:
    # Kishpa K8: the joker is K9; both fill a set of four 5s.
    assert wins("R5 B5 K9 K9 R1 R2 R3 R4 B7 Y7 K7 Y10 Y11 Y12", kishpa="K8")
    joker = parse_face("K9")
    assert is_valid_group("set", faces("R5 K9 B5 K9"), joker)
    assert not is_valid_group("set", faces("R5 K9 R5 K9"), joker)


# --- the joker and the dolls -----------------------------------------------------------


def test_kishpa_thirteen_makes_the_one_of_its_colour_the_joker() -> None:
    assert joker_of(parse_face("Y13")) == parse_face("Y1")
    # Y1 is wild: it completes R7 B7 _ and K1 K2 K3 _.
    assert wins("Y1 Y1 R7 B7 K1 K2 K3 B9 B10 B11 R1 R2 R3 R4", kishpa="Y13")
    # With another kishpa the Y1s are plain and the hand does not win.
    assert not wins("Y1 Y1 R7 B7 K1 K2 K3 B9 B10 B11 R1 R2 R3 R4", kishpa="Y12")


def test_with_kishpa_thirteen_a_doll_is_a_plain_one() -> None:
    # Kishpa Y13 -> joker Y1 -> each doll is a plain Y1: low in a run, or after 13 if allowed.
    assert wins("DR Y2 Y3 Y4 R7 B7 K7 B9 B10 B11 R1 R2 R3 R4", kishpa="Y13")
    hand = "Y11 Y12 Y13 DK R5 R6 R7 R8 B9 B10 B11 K2 B2 R2"
    assert not wins(hand, kishpa="Y13")
    assert wins(hand, kishpa="Y13", rules=WRAP)


def test_a_doll_plays_only_as_the_joker_face() -> None:
    # Kishpa R5 -> joker R6 -> a doll is a plain R6: R4 R5 DR R7 is a run.
    assert wins("R4 R5 DR R7 B7 Y7 K7 B9 B10 B11 Y1 Y2 Y3 Y4")
    # The doll is not wild: it cannot be a B8.
    assert not wins("B6 B7 DR B9 R1 R2 R3 K7 Y7 R7 Y9 Y10 Y11 Y12")
    # Nor a 7 in a set.
    assert not wins("R1 R2 R3 R4 B7 Y7 DK B9 B10 B11 Y1 Y2 Y3 Y4")


def test_the_real_joker_tiles_are_wild_and_the_dolls_are_plain() -> None:
    # Kishpa R5: both dolls start a run R6 R7 R8; the two real R6 fill B8 Y8 _ and K4.
    assert wins("DR R7 R8 DK R7 R8 B8 Y8 R6 K1 K2 K3 R6 K5")


def test_two_dolls_cannot_share_a_run() -> None:
    # R5 DR DK R7 would need two R6s in one run, and four tiles make no two groups.
    assert not wins("R5 DR DK R7 B1 B2 B3 B4 Y7 K7 B7 Y9 Y10 Y11")


def test_groups_of_jokers_and_dolls_only() -> None:
    # Kishpa R5: R6 R6 DR is a valid group (the doll is R6; jokers as R7 R8 or a set).
    assert wins("R6 R6 DR B1 B2 B3 B4 Y7 K7 B7 Y9 Y10 Y11 Y12")
    # Two jokers alone are no group; here they must join other groups.
    assert wins("R6 R6 B1 B2 B3 B4 Y7 K7 B7 Y9 Y10 Y11 K2 K3")
    assert not wins("R6 R6 B1 B2 B3 B4 Y7 K7 B7 Y9 Y10 Y11 K2 R12")


def test_jokers_only_hands_beyond_the_real_set_still_answer() -> None:
    # Not a dealable hand (three jokers) but the solver must still be right.
    joker = parse_face("R6")
    hand = faces("R6 R6 R6 R6 B7 Y7 K7 B9 B10 B11 Y1 Y2 Y3 Y4")
    groups = find_winning_arrangement(hand, joker)
    assert groups is not None
    check(hand, groups, joker, DEFAULT_RULES)


def test_a_hand_of_the_wrong_size_never_wins() -> None:
    joker = parse_face("R6")
    hand = faces("R1 R2 R3 R4 B7 Y7 K7 B9 B10 B11 Y1 Y2 Y3")
    assert find_winning_arrangement(hand, joker) is None


def test_positions_refer_to_the_hand_as_given_and_runs_are_in_play_order() -> None:
    hand = faces("Y3 R4 B7 R2 Y1 K7 R1 Y2 B9 Y7 R3 B11 B10 Y4")
    groups = find_winning_arrangement(hand, parse_face("R6"))
    assert groups is not None
    runs = {tuple(str(hand[p]) for p in g.positions) for g in groups if g.kind == "run"}
    assert ("R1", "R2", "R3", "R4") in runs
    assert ("B9", "B10", "B11") in runs


def test_a_joker_is_placed_where_it_fits_in_play_order() -> None:
    # K12 K13 + joker: the joker can only be K11.
    hand = faces("K12 K13 R6 B1 B2 B3 B4 Y7 R7 B7 Y9 Y10 Y11 Y12")
    groups = find_winning_arrangement(hand, parse_face("R6"))
    assert groups is not None
    run = next(g for g in groups if 0 in g.positions)
    assert [str(hand[p]) for p in run.positions] == ["R6", "K12", "K13"]


# --- the starter's 15 tiles ------------------------------------------------------------


def discards(text: str, kishpa: str) -> dict[str, int]:
    """Each winning discard (as written) and its payout, checking each arrangement."""
    hand = faces(text)
    joker = joker_of(parse_face(kishpa))
    result: dict[str, int] = {}
    for d in winning_discards(hand, parse_face(kishpa)):
        kept = [p for p in range(len(hand)) if p != d.position]
        rest = [hand[p] for p in kept]
        groups = [Group(g.kind, tuple(kept.index(p) for p in g.positions)) for g in d.arrangement]
        check(rest, groups, joker, DEFAULT_RULES)
        result[str(hand[d.position])] = d.payout_per_loser
    return result


def test_the_starter_may_win_at_once_by_discarding_one() -> None:
    assert discards("R1 R2 R3 R4 B7 Y7 K7 B9 B10 B11 Y1 Y2 Y3 Y4 K13", "R5") == {"K13": 2}


def test_winning_discards_pays_per_discard() -> None:
    # Kishpa R5, joker R6: every discard wins; the payout depends on what stays.
    found = discards("R1 R2 R3 R4 B7 Y7 K7 B9 B10 B11 Y1 Y2 Y3 R5 R6", "R5")
    assert found.pop("R5") == 2 + 1  # joker kept, kishpa gone
    assert found.pop("R6") == 2 + 1 + 2  # kishpa kept, joker discarded last
    assert set(found.values()) == {2 + 1 + 1}  # joker and kishpa kept
    assert len(found) == 13


def test_winning_discards_lists_each_face_once_in_hand_order() -> None:
    assert discards("R1 R2 R3 R4 B7 Y7 K7 B9 B10 B11 Y1 Y2 Y3 K13 K12", "R5") == {}
    hand = faces("R1 R2 R3 R4 B7 Y7 K7 B9 B10 B11 Y1 Y2 Y3 Y4 Y4")
    assert [d.position for d in winning_discards(hand, parse_face("R5"))] == [13]
    hand = faces("R1 R2 R3 R4 R5 B7 Y7 K7 B9 B10 B11 Y1 Y2 Y3 Y4")
    assert [d.position for d in winning_discards(hand, parse_face("K5"))] == [0, 4, 11, 14]


def test_winning_discards_needs_fifteen_tiles() -> None:
    with pytest.raises(ValueError, match="15 tiles"):
        winning_discards(parse_faces(["R1"] * 14), parse_face("R5"))


# --- best effort -----------------------------------------------------------------------


def test_best_arrangement_covers_as_many_tiles_as_possible() -> None:
    hand = faces("R1 R2 R3 R4 B7 Y7 K7 B9 B10 Y1 Y2 Y3 K13 B1")
    joker = parse_face("R6")
    groups = best_arrangement(hand, joker)
    covered = sorted(p for g in groups for p in g.positions)
    assert len(covered) == len(set(covered)) == 10
    for g in groups:
        assert is_valid_group(g.kind, [hand[p] for p in g.positions], joker)


def test_best_arrangement_of_a_winning_hand_uses_every_tile() -> None:
    hand = faces("R6 R6 B1 B2 B3 B4 Y7 K7 B7 Y9 Y10 Y11 K2 K3")
    joker = parse_face("R6")
    groups = best_arrangement(hand, joker)
    check(hand, groups, joker, DEFAULT_RULES)


def test_best_arrangement_of_nothing_useful_is_empty() -> None:
    hand = faces("R1 B3 Y5 K7 R9 B11 Y13")
    assert best_arrangement(hand, parse_face("R6")) == []
