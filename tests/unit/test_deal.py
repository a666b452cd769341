"""Round setup: the deal, the kishpa (dolls go back into the pile), the replacement."""

from __future__ import annotations

import hashlib
from dataclasses import replace

import pytest

from games.fair import shuffled_deck
from games.kishpa.deal import Deal, deal_round
from games.kishpa.ruleset import DEFAULT_RULES
from games.kishpa.tiles import TILE_COUNT, face_of, joker_of

pytestmark = pytest.mark.unit


def seed_of(k: int) -> bytes:
    return hashlib.sha512(f"deal-{k}".encode()).digest() + bytes(16)


def placed(deal: Deal) -> list[int]:
    tiles = [t for hand in deal.hands for t in hand] + list(deal.pile) + [deal.kishpa.tile]
    if deal.replacement is not None:
        tiles.append(deal.replacement.tile)
    return sorted(tiles)


@pytest.mark.parametrize(("seats", "starter"), [(2, 0), (3, 2), (4, 1)])
def test_starter_gets_15_others_14_dealt_clockwise_from_the_top(seats: int, starter: int) -> None:
    seed = seed_of(seats)
    deal = deal_round(seed, ["c"], seats, starter)
    deck = shuffled_deck(seed, ["c"])
    assert list(deal.deck) == deck
    assert [len(h) for h in deal.hands] == [15 if s == starter else 14 for s in range(seats)]
    assert list(deal.hands[starter]) == deck[:15]
    assert list(deal.hands[(starter + 1) % seats]) == deck[15:29]
    assert placed(deal) == list(range(TILE_COUNT))


def test_the_deal_is_reproducible_from_the_seed() -> None:
    assert deal_round(seed_of(1), [None], 4, 0) == deal_round(seed_of(1), [None], 4, 0)
    assert deal_round(seed_of(1), [None], 4, 0) != deal_round(seed_of(2), [None], 4, 0)


def test_a_doll_turned_as_kishpa_goes_back_into_the_pile_below_the_top() -> None:
    found = 0
    for k in range(400):
        deal = deal_round(seed_of(k), [], 4, 0)
        first_turned = deal.deck[57]
        if not face_of(first_turned).is_doll:
            continue
        found += 1
        assert deal.kishpa.dolls_returned[0] == first_turned
        assert not face_of(deal.kishpa.tile).is_doll
        assert first_turned in deal.pile
        assert placed(deal) == list(range(TILE_COUNT))
    assert found >= 3


def test_replacement_is_turned_exactly_when_nobody_holds_a_joker() -> None:
    replaced = kept = 0
    for k in range(120):
        deal = deal_round(seed_of(k), [], 4, k % 4)
        joker = joker_of(face_of(deal.kishpa.tile))
        held = any(face_of(t) == joker for hand in deal.hands for t in hand)
        assert (deal.replacement is None) == held
        if deal.replacement is None:
            kept += 1
        else:
            replaced += 1
            assert not face_of(deal.replacement.tile).is_doll
            # It is the next tile of the pile (after any doll put back).
            assert deal.replacement.tile != deal.kishpa.tile
    assert replaced > 0
    assert kept > 0


def test_a_table_may_turn_replacement_off() -> None:
    rules = replace(DEFAULT_RULES, max_kishpa_replacements=0)
    assert all(deal_round(seed_of(k), [], 4, 0, rules).replacement is None for k in range(60))


@pytest.mark.parametrize(("seats", "starter"), [(1, 0), (5, 0), (4, 4)])
def test_bad_seats_are_refused(seats: int, starter: int) -> None:
    with pytest.raises(ValueError, match="seat"):
        deal_round(seed_of(0), [], seats, starter)
