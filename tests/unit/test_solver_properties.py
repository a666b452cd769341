"""Property tests: the fast solver agrees with the brute-force reference on generated hands.

Hands are dealt from what the turned kishpa leaves (so jokers and dolls appear as in play):
winning hands built from valid groups, near misses (one tile swapped), and random deals.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from devkit.kishpa_reference import (
    is_valid_group,
    perturb,
    reference_best_cover,
    reference_winning_arrangement,
    sample_kishpa,
    sample_random_hand,
    sample_winning_hand,
)
from games.kishpa.ruleset import DEFAULT_RULES, RuleSet
from games.kishpa.solver import (
    Group,
    best_arrangement,
    find_winning_arrangement,
    winning_discards,
)
from games.kishpa.tiles import Face, check_available, joker_of

pytestmark = pytest.mark.unit

WRAP = RuleSet(allow_run_12_13_1=True)
# A seed per example: the hands are built by a seeded generator, so a failure names its seed.
SEEDS = st.integers(0, 2**64 - 1)
FAST = settings(suppress_health_check=[HealthCheck.too_slow], deadline=None)


def valid_groups_only(
    hand: Sequence[Face], groups: list[Group], joker: Face, rules: RuleSet
) -> None:
    """Groups are disjoint and each is valid, checked by the reference's own validator."""
    used = [p for g in groups for p in g.positions]
    assert len(used) == len(set(used))
    assert all(0 <= p < len(hand) for p in used)
    for g in groups:
        assert is_valid_group(g.kind, [hand[p] for p in g.positions], joker, rules), (g, hand)


def agree(hand: list[Face], kishpa: Face, rules: RuleSet) -> bool:
    """Assert the solver and the reference agree; return whether the hand wins."""
    check_available(hand, [kishpa])
    joker = joker_of(kishpa)
    fast = find_winning_arrangement(hand, joker, rules)
    slow = reference_winning_arrangement(hand, joker, rules)
    assert (fast is None) == (slow is None), (kishpa, [str(f) for f in hand], fast, slow)
    if fast is not None:
        valid_groups_only(hand, fast, joker, rules)
        assert sorted(p for g in fast for p in g.positions) == list(range(len(hand)))
        assert any(g.kind == "run" and len(g.positions) >= rules.min_long_run for g in fast)
    return fast is not None


def winning(rng: random.Random, rules: RuleSet) -> tuple[Face, list[Face]]:
    while True:
        kishpa = sample_kishpa(rng)
        rate = (0.0, 0.1, 0.3)[rng.randrange(0, 3)]
        hand = sample_winning_hand(rng, kishpa, joker_rate=rate, rules=rules)
        if hand is not None:
            return kishpa, hand


@settings(FAST, max_examples=1500)
@given(seed=SEEDS)
def test_built_winning_hands_win_and_agree(seed: int) -> None:
    rng = random.Random(seed)
    kishpa, hand = winning(rng, DEFAULT_RULES)
    assert agree(hand, kishpa, DEFAULT_RULES)


@settings(FAST, max_examples=1500)
@given(seed=SEEDS)
def test_near_misses_agree(seed: int) -> None:
    rng = random.Random(seed)
    kishpa, hand = winning(rng, DEFAULT_RULES)
    agree(perturb(rng, kishpa, hand), kishpa, DEFAULT_RULES)


@settings(FAST, max_examples=2000)
@given(seed=SEEDS)
def test_random_deals_agree(seed: int) -> None:
    rng = random.Random(seed)
    kishpa = sample_kishpa(rng)
    agree(sample_random_hand(rng, kishpa), kishpa, DEFAULT_RULES)


@settings(FAST, max_examples=750)
@given(seed=SEEDS, near_miss=st.booleans())
def test_the_12_13_1_setting_agrees(seed: int, near_miss: bool) -> None:
    rng = random.Random(seed)
    kishpa, hand = winning(rng, WRAP)
    if near_miss:
        hand = perturb(rng, kishpa, hand)
    agree(hand, kishpa, WRAP)


@settings(FAST, max_examples=300)
@given(seed=SEEDS)
def test_the_added_tile_is_a_winning_discard(seed: int) -> None:
    rng = random.Random(seed)
    kishpa, hand = winning(rng, DEFAULT_RULES)
    extra = sample_random_hand(rng, kishpa, size=106 - 1)
    for face in hand:
        extra.remove(face)
    at = rng.randrange(0, 15)
    fifteen = [*hand[:at], extra[0], *hand[at:]]
    found = winning_discards(fifteen, kishpa)
    assert extra[0] in {fifteen[d.position] for d in found}
    for d in found:
        joker = joker_of(kishpa)
        valid_groups_only(fifteen, d.arrangement, joker, DEFAULT_RULES)
        used = sorted(p for g in d.arrangement for p in g.positions)
        assert used == [p for p in range(15) if p != d.position]


@settings(FAST, max_examples=400)
@given(seed=SEEDS, size=st.integers(3, 15), win=st.booleans())
def test_best_arrangement_is_valid_and_covers_a_winning_hand(
    seed: int, size: int, win: bool
) -> None:
    rng = random.Random(seed)
    if win:
        kishpa, hand = winning(rng, DEFAULT_RULES)
    else:
        kishpa = sample_kishpa(rng)
        hand = sample_random_hand(rng, kishpa, size)
    joker = joker_of(kishpa)
    groups = best_arrangement(hand, joker)
    valid_groups_only(hand, groups, joker, DEFAULT_RULES)
    if win:
        assert sum(len(g.positions) for g in groups) == len(hand)
        assert any(g.kind == "run" and len(g.positions) >= 4 for g in groups)


@settings(FAST, max_examples=400)
@given(seed=SEEDS, size=st.integers(3, 11), dense=st.booleans())
def test_best_arrangement_covers_as_many_tiles_as_the_reference(
    seed: int, size: int, dense: bool
) -> None:
    rng = random.Random(seed)
    kishpa, hand = winning(rng, DEFAULT_RULES)
    # Part of a built winning hand (most tiles fit somewhere), or a random deal.
    hand = hand[:size] if dense else sample_random_hand(rng, kishpa, size)
    joker = joker_of(kishpa)
    groups = best_arrangement(hand, joker)
    valid_groups_only(hand, groups, joker, DEFAULT_RULES)
    assert sum(len(g.positions) for g in groups) == reference_best_cover(hand, joker)
