"""The win payout, row by row of docs/rules/kishpa.md section 8 (kishpa R5, so the joker is R6)."""

from __future__ import annotations

import pytest

from games.kishpa.payouts import win_payout
from games.kishpa.ruleset import DEFAULT_RULES, RuleSet
from games.kishpa.solver import find_winning_arrangement
from games.kishpa.tiles import parse_face, parse_faces

pytestmark = pytest.mark.unit

KISHPA = parse_face("R5")
JOKER = parse_face("R6")
PLAIN = "B1 B2 B3 B4 B5 Y5 K5 Y9 Y10 Y11 K1 K2 K3 K4"


def hand_with(*replacements: tuple[str, str]) -> list[str]:
    tiles = PLAIN.split()
    for old, new in replacements:
        tiles[tiles.index(old)] = new
    return tiles


@pytest.mark.parametrize(
    ("row", "hand", "discard", "expected"),
    [
        ("plain win", hand_with(), "K13", 2),
        ("with a joker in hand", hand_with(("B4", "R6")), "K13", 3),
        ("with 2 jokers in hand", hand_with(("B4", "R6"), ("Y11", "R6")), "K13", 4),
        ("discarding a joker as the last tile", hand_with(), "R6", 4),
        ("2 jokers, one of them discarded last", hand_with(("B4", "R6")), "R6", 5),
        ("with the kishpa in hand", hand_with(("B5", "R5")), "K13", 3),
        ("kishpa + a joker", hand_with(("B5", "R5"), ("K4", "R6")), "K13", 4),
        ("kishpa + 2 jokers", hand_with(("B5", "R5"), ("K4", "R6"), ("Y9", "R6")), "K13", 5),
        ("kishpa + discarding a joker", hand_with(("B5", "R5")), "R6", 5),
        ("kishpa + 2 jokers, one discarded last", hand_with(("B5", "R5"), ("K4", "R6")), "R6", 6),
    ],
)
def test_every_row_of_the_win_table(row: str, hand: list[str], discard: str, expected: int) -> None:
    faces = parse_faces(hand)
    assert find_winning_arrangement(faces, JOKER) is not None, f"{row}: the hand must win"
    assert win_payout(faces, parse_face(discard), KISHPA) == expected, row


def test_a_doll_is_never_a_joker_for_the_payout() -> None:
    faces = parse_faces(hand_with(("B4", "DR"), ("Y11", "DK")))
    assert win_payout(faces, parse_face("DR"), KISHPA) == 2


def test_discarding_the_kishpa_pays_nothing_extra() -> None:
    assert win_payout(parse_faces(hand_with()), KISHPA, KISHPA) == 2


def test_kishpa_thirteen_makes_the_one_the_joker() -> None:
    kishpa = parse_face("Y13")
    hand = parse_faces(hand_with(("B4", "Y1"), ("B5", "Y13")))
    # Y1 is the joker (+1), Y13 is the kishpa (+1), discarding the other Y1 (+2).
    assert win_payout(hand, parse_face("Y1"), kishpa) == 2 + 1 + 1 + 2


def test_amounts_come_from_the_rule_set() -> None:
    rules = RuleSet(win_base=10, win_per_joker=3, win_kishpa=5, win_joker_discard=7)
    hand = parse_faces(hand_with(("B5", "R5"), ("K4", "R6")))
    assert win_payout(hand, JOKER, KISHPA, rules) == 10 + 3 + 5 + 7


def test_a_hand_of_the_wrong_size_is_refused() -> None:
    with pytest.raises(ValueError, match="14 tiles"):
        win_payout(parse_faces(PLAIN.split())[:13], JOKER, KISHPA, DEFAULT_RULES)
