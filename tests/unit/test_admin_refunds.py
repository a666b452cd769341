"""Who a closed table's bowl or pot goes back to: the pure walk over its postings."""

from __future__ import annotations

import pytest

from services.wallet.admin import RefundAmbiguous, refunds_owed

pytestmark = pytest.mark.unit

BOWL = "bowl:t1"
POT = "pot:t2"


def test_contributions_since_the_bowl_was_last_emptied_go_back_to_their_payers() -> None:
    history = [
        ("player:a", BOWL, 1),
        ("player:b", BOWL, 1),
        ("player:c", BOWL, 1),
        (BOWL, "player:b", 3),  # round 2: b took the bowl (two wins in a row)
        ("player:a", BOWL, 2),  # round 3 (kishpa a 1: two each)
        ("player:b", BOWL, 2),
        ("player:c", BOWL, 2),
        ("player:a", BOWL, 1),  # round 4 started, then the table got stuck
        ("player:b", BOWL, 1),
        ("player:c", BOWL, 1),
    ]
    assert refunds_owed(history, BOWL) == {"player:a": 3, "player:b": 3, "player:c": 3}


def test_a_hand_pot_paid_out_owes_nothing_and_a_new_buy_in_is_returned() -> None:
    history = [("player:a", POT, 10), ("player:b", POT, 10), (POT, "player:a", 20)]
    assert refunds_owed(history, POT) == {}
    history += [("player:a", POT, 10), ("player:b", POT, 10)]
    assert refunds_owed(history, POT) == {"player:a": 10, "player:b": 10}


def test_an_empty_account_owes_nothing() -> None:
    assert refunds_owed([], BOWL) == {}


def test_a_partial_payout_cannot_be_attributed_and_is_refused() -> None:
    history = [("player:a", BOWL, 2), ("player:b", BOWL, 2), (BOWL, "player:a", 1)]
    with pytest.raises(RefundAmbiguous):
        refunds_owed(history, BOWL)
