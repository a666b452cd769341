"""Hand scoring of a deal, the pot split and the pot's postings."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from games.hand.cards import parse_cards
from games.hand.ledger import (
    POT,
    Posting,
    buy_in_postings,
    net_movements,
    payout_postings,
)
from games.hand.pot import share_weights, split_pot
from games.hand.ruleset import DEFAULT_RULES, RuleSet
from games.hand.scoring import deal_scores

pytestmark = pytest.mark.unit


def test_deal_scores_winner_plus_50_losers_minus_their_hands() -> None:
    hands = [[], parse_cards(["AS", "KD", "2C"]), parse_cards(["J1"])]
    assert deal_scores(hands, 0, False, DEFAULT_RULES) == [50, -23, -25]


def test_a_hand_pays_100_and_doubles_every_penalty() -> None:
    hands = [parse_cards(["9S"]), [], parse_cards(["J1", "QH"])]
    assert deal_scores(hands, 1, True, DEFAULT_RULES) == [-18, 100, -70]


def test_no_winner_every_hand_is_a_penalty_and_nothing_doubles() -> None:
    hands = [parse_cards(["9S"]), parse_cards(["J2"])]
    assert deal_scores(hands, None, True, DEFAULT_RULES) == [-9, -25]


def test_scores_follow_the_table_settings() -> None:
    rules = RuleSet(win_score=30, hand_win_score=60, hand_penalty_multiplier=3, joker_penalty=20)
    hands = [[], parse_cards(["J1"])]
    assert deal_scores(hands, 0, True, rules) == [60, -60]
    assert deal_scores(hands, 0, False, rules) == [30, -20]


def test_nobody_within_50_everything_goes_to_the_winner() -> None:
    assert split_pot([200, 100, 150, 0], 400) == [400, 0, 0, 0]
    assert share_weights([200, 100, 150, 0]) == [0, 0, 0, 0]


def test_several_within_50_share_25_percent_by_weight() -> None:
    # Weights: 50 - 20 = 30 and 50 - 40 = 10; 25% of 400 = 100 split 75/25.
    assert share_weights([300, 280, 260, 100]) == [0, 30, 10, 0]
    assert split_pot([300, 280, 260, 100], 400) == [300, 75, 25, 0]


def test_one_point_inside_the_window_takes_the_whole_25_percent() -> None:
    assert split_pot([100, 51], 100) == [75, 25]
    assert split_pot([100, 50], 100) == [100, 0]


def test_shares_round_down_and_the_remainder_goes_to_the_winner() -> None:
    # 25% of 40 = 10; weights 40 and 30 give 5.71 -> 5 and 4.28 -> 4; the 1 left is the winner's.
    assert split_pot([100, 90, 80], 40) == [31, 5, 4]
    # 25% of 30 rounds down to 7.
    assert split_pot([100, 90, 80], 30) == [23, 4, 3]


def test_ties_for_first_split_the_winners_part_with_the_remainder_to_the_earlier_seat() -> None:
    assert split_pot([150, 150, 100, 149], 102) == [39, 38, 0, 25]
    assert split_pot([0, 150, 147, 150], 101) == [0, 38, 25, 38]
    assert split_pot([0, 150, 147, 150], 102) == [0, 39, 25, 38]
    assert split_pot([10, 10, 10], 5) == [2, 2, 1]
    assert split_pot([-40, -40], 9) == [5, 4]


def test_the_winners_least_part_follows_the_table_setting() -> None:
    rules = RuleSet(winner_min_percent=60, share_window=100)
    assert split_pot([100, 40], 100, rules) == [60, 40]
    assert split_pot([100, 40], 100) == [100, 0]


@given(
    totals=st.lists(st.integers(-600, 400), min_size=2, max_size=4),
    pot=st.integers(0, 100_000),
)
def test_payouts_always_sum_to_the_pot_and_the_winners_get_75_percent(
    totals: list[int], pot: int
) -> None:
    shares = split_pot(totals, pot)
    assert sum(shares) == pot
    assert all(s >= 0 for s in shares)
    best = max(totals)
    winners = [s for s, t in enumerate(totals) if t == best]
    assert sum(shares[s] for s in winners) * 100 >= pot * 75
    assert max(shares[s] for s in winners) - min(shares[s] for s in winners) <= 1
    for seat, total in enumerate(totals):
        if best - total >= 50:
            assert shares[seat] == 0
    others = sorted((t, shares[s]) for s, t in enumerate(totals) if t != best)
    assert [share for _, share in others] == sorted(share for _, share in others)


def test_buy_in_postings_move_the_stake_of_every_player_into_the_pot() -> None:
    postings = buy_in_postings(["p1", "p2", "p3"], 20)
    assert postings == [
        Posting("p1", POT, 20, "pot_buy_in"),
        Posting("p2", POT, 20, "pot_buy_in"),
        Posting("p3", POT, 20, "pot_buy_in"),
    ]
    assert net_movements(postings) == {"p1": -20, "p2": -20, "p3": -20, POT: 60}
    assert postings[0].to_dict() == {
        "from": "p1",
        "to": "pot",
        "amount": 20,
        "reason": "pot_buy_in",
    }
    assert buy_in_postings(["p1", "p2"], 0) == []


def test_payout_postings_pay_the_pot_out_by_the_totals() -> None:
    players = ["ann", "ben", "cat", "dan"]
    postings = payout_postings(players, {"ann": 260, "ben": 300, "cat": 280, "dan": 100}, 400)
    assert postings == [
        Posting(POT, "ann", 25, "pot_payout"),
        Posting(POT, "ben", 300, "pot_payout"),
        Posting(POT, "cat", 75, "pot_payout"),
    ]
    net = net_movements(postings)
    assert net[POT] == -400
    assert sum(net.values()) == 0
    assert payout_postings(players, [260, 300, 280, 100], 400) == postings


@pytest.mark.parametrize(
    ("players", "stake"),
    [(["a", "a"], 5), (["a", "pot"], 5), ([], 5), (["a", "b"], -1)],
)
def test_bad_buy_ins_are_refused(players: list[str], stake: int) -> None:
    with pytest.raises(ValueError, match=r"."):
        buy_in_postings(players, stake)


def test_bad_payouts_are_refused() -> None:
    with pytest.raises(ValueError, match="exactly the players"):
        payout_postings(["a", "b"], {"a": 1, "c": 2}, 10)
    with pytest.raises(ValueError, match="one total per player"):
        payout_postings(["a", "b"], [1], 10)
    with pytest.raises(ValueError, match="never negative"):
        split_pot([1, 2], -1)
