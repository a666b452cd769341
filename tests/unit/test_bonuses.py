"""Bonus functions directly: counts, the once-per-round key, and independence of situations."""

from __future__ import annotations

import pytest

from games.kishpa.bonuses import (
    KishpaFacts,
    count_jokers,
    count_ones,
    end_bonus_postings,
    one_bonus,
    start_bonus_postings,
)
from games.kishpa.ledger import Posting, Reason
from games.kishpa.tiles import Face, parse_face, parse_faces

pytestmark = pytest.mark.unit

PLAYERS = ["a", "b", "c"]


def hands(**held: str) -> dict[str, list[Face]]:
    return {p: parse_faces(held.get(p, "Y9").split()) for p in PLAYERS}


def summary(postings: list[Posting]) -> list[tuple[str, str, int, str]]:
    return [(p.from_account, p.to_account, p.amount, p.reason.value) for p in postings]


def test_facts_follow_the_replacement() -> None:
    facts = KishpaFacts(parse_face("R5"), parse_face("Y13"))
    assert str(facts.final) == "Y13"
    assert str(facts.joker) == "Y1"
    assert str(facts.one) == "Y1"
    assert not facts.kishpa_is_one
    assert one_bonus(KishpaFacts(parse_face("B1"))) == 2
    assert one_bonus(KishpaFacts(parse_face("B2"))) == 1


def test_counts_ignore_dolls() -> None:
    facts = KishpaFacts(parse_face("R5"))
    hand = parse_faces(["R6", "DR", "DK", "R1", "R6", "R1", "B1"])
    assert count_jokers(hand, facts) == 2
    assert count_ones(hand, facts) == 2


def test_start_order_is_dolls_jokers_ones_reveal() -> None:
    facts = KishpaFacts(parse_face("K13"), parse_face("R4"))  # replaced: dolls pay nothing
    got = start_bonus_postings(
        PLAYERS, hands(a="DR R5", b="R1 R1", c="K12"), facts, start_reveal="c"
    )
    assert summary(got) == [
        ("b", "a", 1, "bonus_joker"),
        ("c", "a", 1, "bonus_joker"),
        ("a", "b", 2, "bonus_one"),
        ("c", "b", 2, "bonus_one"),
        ("a", "c", 1, "bonus_kishpa"),
        ("b", "c", 1, "bonus_kishpa"),
    ]


def test_once_per_round_is_keyed_by_player_and_situation() -> None:
    facts = KishpaFacts(parse_face("R5"))
    start = hands(a="R6", b="R1")
    # a: paid for a joker at start, holds a 1 at the end -> paid for the 1 (another situation).
    # b: paid for a 1 at start, holds a joker at the end -> paid for the joker.
    end = hands(a="R6 R1", b="R6 R1")
    got = end_bonus_postings(PLAYERS, start, end, facts, None, None, None)
    assert [(p.to_account, p.reason) for p in got] == [
        ("b", Reason.BONUS_JOKER),
        ("b", Reason.BONUS_JOKER),
        ("a", Reason.BONUS_ONE),
        ("a", Reason.BONUS_ONE),
    ]


def test_winner_is_paid_ones_but_not_jokers_or_kishpa_at_the_end() -> None:
    facts = KishpaFacts(parse_face("R5"))
    end = hands(a="R6 R1 R5")
    got = end_bonus_postings(PLAYERS, hands(), end, facts, "a", None, "a")
    assert {p.reason for p in got} == {Reason.BONUS_ONE}
