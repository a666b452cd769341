"""The ledger's functional core: validation and the plan of a batch (bank loads included)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.wallet.accounts import BANK, MAX_AMOUNT, MAX_POSTINGS, AccountKind, account_kind
from services.wallet.batch import Posting, body_hash, plan_batch, touched_accounts, validate_batch
from services.wallet.errors import InsufficientFunds, InvalidRequest

pytestmark = pytest.mark.unit


def post(src: str, dst: str, amount: int, reason: str = "win") -> Posting:
    return Posting(src, dst, amount, reason, "t1", 3, "end")


def test_player_shortfall_is_covered_by_as_many_50_token_loads_as_needed() -> None:
    plan = plan_batch([post("player:a", "player:b", 120)], {"player:a": 15, "player:b": 0})
    loads = [p for p in plan.applied if p.reason == "bank_load"]
    assert [(p.from_account, p.to_account, p.amount) for p in loads] == [(BANK, "player:a", 50)] * 3
    assert plan.applied[-1] == post("player:a", "player:b", 120)
    # 15 + 150 - 120: the loads stop as soon as the payment fits.
    assert plan.balances == {"player:a": 45, "player:b": 120, BANK: -150}


def test_exact_balance_needs_no_load() -> None:
    plan = plan_batch(
        [post("player:a", "bowl:t1", 2, "bowl_contribution")], {"player:a": 2, "bowl:t1": 0}
    )
    assert len(plan.applied) == 1
    assert plan.balances["player:a"] == 0


def test_bowl_shortfall_refuses_the_batch() -> None:
    postings = [post("bowl:t1", "player:a", 5, "bowl_win")]
    with pytest.raises(InsufficientFunds) as info:
        plan_batch(postings, {"bowl:t1": 4, "player:a": 0})
    assert info.value.reason == "INSUFFICIENT_FUNDS"


def test_pot_behaves_like_a_bowl() -> None:
    with pytest.raises(InsufficientFunds):
        plan_batch([post("pot:t1", "player:a", 1, "pot_payout")], {"pot:t1": 0, "player:a": 0})


def test_postings_apply_in_order_so_a_bowl_can_pay_what_it_just_received() -> None:
    postings = [
        post("player:a", "bowl:t1", 1, "bowl_contribution"),
        post("player:b", "bowl:t1", 1, "bowl_contribution"),
        post("bowl:t1", "player:a", 2, "bowl_win"),
    ]
    plan = plan_batch(postings, {"player:a": 1, "player:b": 1, "bowl:t1": 0})
    assert plan.balances == {"player:a": 2, "player:b": 0, "bowl:t1": 0, BANK: 0}


def test_bank_may_go_negative() -> None:
    plan = plan_batch([post(BANK, "player:a", 2000, "opening_grant")], {"player:a": 0})
    assert plan.balances[BANK] == -2000


@pytest.mark.parametrize(
    ("key", "postings", "reason"),
    [
        ("", [post("player:a", "player:b", 1)], "MISSING_REQUEST_ID"),
        ("k", [], "EMPTY_BATCH"),
        ("k", [post("player:a", "player:b", 1)] * (MAX_POSTINGS + 1), "TOO_MANY_POSTINGS"),
        ("k", [post("player:a", "player:b", 0)], "INVALID_AMOUNT"),
        ("k", [post("player:a", "player:b", -3)], "INVALID_AMOUNT"),
        ("k", [post("player:a", "player:b", MAX_AMOUNT + 1)], "INVALID_AMOUNT"),
        ("k", [post("player:a", "player:a", 1)], "INVALID_ARGUMENT"),
        ("k", [post("wallet:a", "player:b", 1)], "UNKNOWN_ACCOUNT"),
        ("k", [post("player:", "player:b", 1)], "UNKNOWN_ACCOUNT"),
        ("k", [post("player:a b", "player:b", 1)], "UNKNOWN_ACCOUNT"),
        ("k", [post("player:a", "player:b", 1, "gift")], "UNKNOWN_REASON"),
    ],
)
def test_malformed_batches_are_refused(key: str, postings: list[Posting], reason: str) -> None:
    with pytest.raises(InvalidRequest) as info:
        validate_batch(key, postings)
    assert info.value.reason == reason


def test_body_hash_tells_bodies_apart_and_is_stable() -> None:
    a = [post("player:a", "player:b", 1)]
    assert body_hash(a) == body_hash(list(a))
    assert body_hash(a) != body_hash([post("player:a", "player:b", 2)])
    assert body_hash(a) != body_hash([Posting("player:a", "player:b", 1, "win", "t1", 3, "start")])


ACCOUNTS = ["player:a", "player:b", "player:c", "bowl:t1", "pot:t2", BANK]
REASONS = ["win", "bowl_contribution", "bonus_joker", "bowl_win"]


@st.composite
def batches(draw: st.DrawFn) -> list[Posting]:
    n = draw(st.integers(1, 8))
    out = []
    for _ in range(n):
        src, dst = draw(st.lists(st.sampled_from(ACCOUNTS), min_size=2, max_size=2, unique=True))
        out.append(Posting(src, dst, draw(st.integers(1, 300)), draw(st.sampled_from(REASONS))))
    return out


@settings(max_examples=300)
@given(
    balances=st.fixed_dictionaries({a: st.integers(0, 200) for a in ACCOUNTS if a != BANK}),
    postings=batches(),
)
def test_plan_keeps_the_ledger_balanced_and_non_bank_accounts_non_negative(
    balances: dict[str, int], postings: list[Posting]
) -> None:
    validate_batch("k", postings)
    start = {**balances, BANK: -sum(balances.values())}
    try:
        plan = plan_batch(postings, start)
    except InsufficientFunds:
        # Only a bowl or pot may refuse; prove one really could not pay in sequence.
        assert any(
            account_kind(p.from_account) in (AccountKind.BOWL, AccountKind.POT) for p in postings
        )
        return
    assert sum(plan.balances.values()) == 0
    assert all(v >= 0 for a, v in plan.balances.items() if a != BANK)
    # The requested postings appear in order; everything else is a 50-token bank load.
    extra = [p for p in plan.applied if p not in postings or p.reason == "bank_load"]
    assert all(p.from_account == BANK and p.amount == 50 for p in extra)
    assert [p for p in plan.applied if p.reason != "bank_load"] == postings
    for account, delta in plan.deltas().items():
        assert start.get(account, 0) + delta == plan.balances[account]
    assert set(touched_accounts(postings)) <= set(plan.balances)
