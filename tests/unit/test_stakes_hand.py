"""Hand at stake levels (issue 17): the stake is each player's buy-in, so pots reach the
sizes where the split's weights, rounding and ties matter.

Every expected split below is worked out by hand in its comment (docs/rules/hand.md: the winner
gets at least 75%; 25%, rounded down, is shared by weight ``50 - (best - total)`` among the
others within 50, each share rounded down; what is left goes to the winner; tied winners
split the winner's part, the remainder one each from the earlier seat).
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from games.hand.ledger import POT, POT_BUY_IN, POT_PAYOUT, Posting, net_movements
from games.hand.pot import split_pot
from games.hand.record import postings_for_phase

pytestmark = pytest.mark.unit

LEVELS = (1, 5, 10, 50, 100)

CASES = [
    pytest.param(
        # Best 320; 150 is 170 behind, 270 exactly 50 behind (weight 0), -40 far behind.
        [320, 150, 270, -40],
        400,
        [400, 0, 0, 0],
        id="stake 100, nobody within 50 (50 behind is out)",
    ),
    pytest.param(
        [610, 200, 555, 90],  # behind by 410, 55, 520
        10_000,
        [10_000, 0, 0, 0],
        id="stake 2500, pot 10000, nobody within 50",
    ),
    pytest.param(
        # Behind by 10, 25, 48 -> weights 40, 25, 2 (sum 67); 25% of 10000 = 2500.
        # 2500*40/67 = 1492.5 -> 1492; 2500*25/67 = 932.8 -> 932; 2500*2/67 = 74.6 -> 74.
        # Shared 2498; the winner 10000 - 2498 = 7502.
        [400, 390, 375, 352],
        10_000,
        [7502, 1492, 932, 74],
        id="stake 2500, pot 10000, three within 50",
    ),
    pytest.param(
        # Best 180 (seat 1); behind by 10 and 30 -> weights 40, 20 (sum 60); 25% of 300 = 75.
        # 75*40/60 = 50; 75*20/60 = 25; the winner 300 - 75 = 225.
        [170, 180, 150],
        300,
        [50, 225, 25],
        id="stake 100, three seats, two within 50",
    ),
    pytest.param(
        # 25% of 150 = 37.5 -> 37. Behind by 13, 40 -> weights 37, 10 (sum 47).
        # 37*37/47 = 29.1 -> 29; 37*10/47 = 7.9 -> 7. Shared 36; the winner 150 - 36 = 114.
        [200, 187, 160],
        150,
        [114, 29, 7],
        id="stake 50, remainders of the 25% and of both shares go to the winner",
    ),
    pytest.param(
        # 25% of 9999 = 2499.75 -> 2499. Best 250 (seat 1); behind by 40, 21 -> weights 10,
        # 29 (sum 39). 2499*10/39 = 640.8 -> 640; 2499*29/39 = 1858.2 -> 1858.
        # Shared 2498; the winner 9999 - 2498 = 7501.
        [210, 250, 229],
        9999,
        [640, 7501, 1858],
        id="stake 3333, pot 9999, remainders",
    ),
    pytest.param(
        # Tied 300 at seats 0 and 1; seat 2 behind by 30 (weight 20, alone: all of 2500);
        # seat 3 far behind. Winners' part 7500 -> 3750 each.
        [300, 300, 270, 100],
        10_000,
        [3750, 3750, 2500, 0],
        id="stake 2500, two tied for first, one within 50",
    ),
    pytest.param(
        # Tied 250 at seats 0 and 2; behind by 1 and 2 -> weights 49, 48 (sum 97); 25% = 100.
        # 100*49/97 = 50.5 -> 50; 100*48/97 = 49.5 -> 49. Winners' part 400 - 99 = 301:
        # 150 each, the odd token to seat 0 (the earlier seat).
        [250, 249, 250, 248],
        400,
        [151, 50, 150, 49],
        id="stake 100, two tied for first, odd token to the earlier seat",
    ),
    pytest.param(
        # Three tied at 500, nobody else within 50: 10000 / 3 = 3333 r 1 -> seat 0 gets 3334.
        [500, 500, 500, 100],
        10_000,
        [3334, 3333, 3333, 0],
        id="stake 2500, three tied for first, remainder to the earliest seat",
    ),
    pytest.param(
        # Three tied at 77 (seats 1-3); seat 0 behind by 17 (weight 33, alone: all of 2500).
        # Winners' part 7500 -> 2500 each.
        [60, 77, 77, 77],
        10_000,
        [2500, 2500, 2500, 2500],
        id="stake 2500, three tied for first, one within 50",
    ),
    pytest.param(
        # Seats 0-2 tied at -12; seat 3 behind by 49 (weight 1, alone: all of 25% of 20 = 5).
        # Winners' part 15 -> 5 each.
        [-12, -12, -12, -61],
        20,
        [5, 5, 5, 5],
        id="stake 5, three tied for first, one just inside the window",
    ),
    pytest.param(
        [-30, -30],  # two tied, nobody else: 200 -> 100 each
        200,
        [100, 100],
        id="stake 100, two seats tied",
    ),
]


@pytest.mark.parametrize(("totals", "pot", "expected"), CASES)
def test_pot_splits_against_hand_computed_shares(
    totals: list[int], pot: int, expected: list[int]
) -> None:
    assert sum(expected) == pot  # the hand computation itself adds up
    assert split_pot(totals, pot) == expected


def test_a_stake_100_game_buys_in_and_pays_out_by_the_hand_computed_split() -> None:
    players = ["ann", "ben", "cat", "dan"]
    buy_in = postings_for_phase("buy_in", {"players": players, "stake": 100})
    assert buy_in == [Posting(p, POT, 100, POT_BUY_IN) for p in players]
    record = {
        "players": players,
        "stake": 100,
        "pot": 400,
        "totals": {"ann": 250, "ben": 249, "cat": 250, "dan": 248},
    }
    payout = postings_for_phase("payout", record)
    assert payout == [
        Posting(POT, "ann", 151, POT_PAYOUT),
        Posting(POT, "ben", 50, POT_PAYOUT),
        Posting(POT, "cat", 150, POT_PAYOUT),
        Posting(POT, "dan", 49, POT_PAYOUT),
    ]
    net = net_movements(buy_in + payout)
    assert net == {"ann": 51, "ben": -50, "cat": 50, "dan": -51, POT: 0}


@given(
    stake=st.sampled_from(LEVELS) | st.integers(1, 2500),
    totals=st.lists(st.integers(-700, 500), min_size=2, max_size=4),
)
def test_every_split_at_every_stake_sums_to_the_pot(stake: int, totals: list[int]) -> None:
    players = [f"p{k}" for k in range(len(totals))]
    pot = stake * len(players)
    assert pot <= 10_000
    shares = split_pot(totals, pot)
    assert sum(shares) == pot
    assert min(shares) >= 0
    record = {
        "players": players,
        "stake": stake,
        "pot": pot,
        "totals": dict(zip(players, totals, strict=True)),
    }
    buy_in = postings_for_phase("buy_in", record)
    payout = postings_for_phase("payout", record)
    assert net_movements(buy_in + payout).get(POT, 0) == 0
