"""Postings: the wire form, validation, and that every phase of any round nets to zero."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from games.fair import SERVER_SEED_BYTES
from games.kishpa.ledger import Posting, Reason, from_every_other, net_movements, posting
from games.kishpa.record import end_postings, start_postings
from games.kishpa.round import end_record, start_record
from kishpa.wallet.v1 import wallet_pb2
from tests.support.bot_rounds import play_round_with_bots

pytestmark = pytest.mark.unit


def test_wire_form_round_trips() -> None:
    posting = Posting("p1", "bowl", 2, Reason.BOWL_CONTRIBUTION)
    wire = posting.to_dict()
    assert wire == {"from": "p1", "to": "bowl", "amount": 2, "reason": "bowl_contribution"}
    assert Posting.from_dict(dict(wire)) == posting


@pytest.mark.parametrize("amount", [0, -1, True])
def test_a_posting_moves_a_positive_whole_amount(amount: int) -> None:
    with pytest.raises(ValueError, match="positive whole"):
        posting("a", "b", amount, Reason.WIN)


def test_a_posting_cannot_move_to_itself() -> None:
    with pytest.raises(ValueError, match="itself"):
        posting("a", "a", 1, Reason.WIN)


def test_from_every_other_skips_the_receiver_and_zero() -> None:
    got = from_every_other(["a", "b", "c"], "b", 3, Reason.BONUS_JOKER)
    assert [(p.from_account, p.to_account, p.amount) for p in got] == [("a", "b", 3), ("c", "b", 3)]
    assert from_every_other(["a", "b"], "a", 0, Reason.BONUS_JOKER) == []


def test_the_reasons_are_one_closed_set_and_the_wire_enum_names_each() -> None:
    """Rules section 10's reasons, Hand's pot, and the wallet's own: one set for everyone."""
    assert {r.value for r in Reason} == {
        "bowl_contribution",
        "bonus_doll",
        "bonus_joker",
        "bonus_one",
        "bonus_kishpa",
        "win",
        "bowl_win",
        "bowl_split",
        "pot_buy_in",
        "pot_payout",
        "bank_load",
        "opening_grant",
        "player_load",
        "admin_credit",
        "admin_debit",
        "admin_refund",
    }
    wire = [
        name.removeprefix("TRANSFER_REASON_").lower()
        for name, value in sorted(wallet_pb2.TransferReason.items(), key=lambda item: item[1])
        if value != wallet_pb2.TRANSFER_REASON_UNSPECIFIED
    ]
    assert wire == [r.value for r in Reason]  # the same order: reports list them so


@settings(max_examples=20)
@given(
    seed=st.binary(min_size=SERVER_SEED_BYTES, max_size=SERVER_SEED_BYTES),
    seats=st.integers(2, 4),
    bowl=st.integers(0, 50),
    last_round=st.booleans(),
)
def test_postings_of_every_phase_of_a_bot_round_net_to_zero(
    seed: bytes, seats: int, bowl: int, last_round: bool
) -> None:
    state = play_round_with_bots(seed, seats, bowl=bowl, last_round=last_round)
    for postings in (start_postings(start_record(state)), end_postings(end_record(state))):
        assert sum(net_movements(postings).values()) == 0
        assert all(p.amount > 0 for p in postings)
