"""Stake-sized settlements on the real ledger, SQLite and PostgreSQL (issue 17): a payment
larger than a balance is covered by as many 50-token bank loads as it needs, all in the one
atomic batch of its phase, and the ledger reconciles clean.

The postings are the rules engine's (``games.hand.record``, ``games.kishpa.record``) mapped
to wallet accounts by the settlement worker's own ``wallet_account``.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Sequence

import pytest

from games.hand.ledger import Posting as HandPosting
from games.hand.record import postings_for_phase
from games.kishpa.ledger import Posting as KishpaPosting
from games.kishpa.record import start_postings
from services.wallet.accounts import BANK
from services.wallet.batch import Posting
from services.wallet.ledger import Ledger
from services.wallet.reconcile import reconcile
from tests.support.kishpa_records import record
from workers.settlement import wallet_account

pytestmark = pytest.mark.integration


def _wallet_postings(
    table_id: str, postings: Sequence[HandPosting | KishpaPosting], phase: str
) -> list[Posting]:
    return [
        Posting(
            wallet_account(table_id, p.from_account),
            wallet_account(table_id, p.to_account),
            p.amount,
            str(p.reason),
            table_id,
            0,
            phase,
        )
        for p in postings
    ]


def test_a_buy_in_above_every_balance_loads_each_player_ten_times_in_one_batch(
    ledger: Ledger,
) -> None:
    run = uuid.uuid4().hex[:8]
    players = [f"{run}{name}" for name in ("ann", "ben", "cat", "dan")]
    table_id = f"t{run}"
    for p in players:
        assert ledger.open_wallet(p) == (2000, True)
    # A Hand table at stake 2500: a 10,000-token pot, 500 more than each player holds.
    stake = 2500
    buy_in = postings_for_phase("buy_in", {"players": players, "stake": stake})
    result = ledger.apply_batch(
        f"kishpa:{table_id}:0:buy_in", _wallet_postings(table_id, buy_in, "buy_in")
    )
    loads = Counter(p.to_account for p in result.applied if p.reason == "bank_load")
    assert loads == {f"player:{p}": 10 for p in players}  # 500 / 50, all in this batch
    assert all(p.amount == 50 and p.from_account == BANK for p in result.applied[:10])
    assert {p: ledger.balance(f"player:{p}") for p in players} == dict.fromkeys(players, 0)
    assert ledger.balance(f"pot:{table_id}") == 10_000

    # Paid out by the hand-computed split of test_stakes_hand: 7502, 1492, 932, 74.
    totals = dict(zip(players, [400, 390, 375, 352], strict=True))
    payout = postings_for_phase(
        "payout", {"players": players, "stake": stake, "pot": 10_000, "totals": totals}
    )
    ledger.apply_batch(f"kishpa:{table_id}:7:payout", _wallet_postings(table_id, payout, "payout"))
    assert [ledger.balance(f"player:{p}") for p in players] == [7502, 1492, 932, 74]
    assert ledger.balance(f"pot:{table_id}") == 0
    report = reconcile(ledger.engine)
    assert report.ok, report.discrepancies


def test_a_kishpa_start_at_stake_100_loads_a_short_player_before_each_payment(
    ledger: Ledger,
) -> None:
    run = uuid.uuid4().hex[:8]
    players = [f"{run}p{k}" for k in range(1, 5)]
    table_id = f"t{run}"
    for p in players:
        ledger.open_wallet(p)
    # p2 is down to 30 tokens before the round.
    ledger.apply_batch(
        f"drain-{run}", [Posting(f"player:{players[1]}", f"player:{players[0]}", 1970, "win")]
    )
    # Stake 100: everyone pays 100 into the bowl, then 100 to p1 for his joker.
    postings = start_postings(record(players=players, stake=100))
    assert [(p.amount, str(p.reason)) for p in postings] == [
        *[(100, "bowl_contribution")] * 4,
        *[(100, "bonus_joker")] * 3,
    ]
    result = ledger.apply_batch(
        f"kishpa:{table_id}:1:start", _wallet_postings(table_id, postings, "start")
    )
    short = f"player:{players[1]}"
    # 30 < 100: two loads (130) before the contribution, then 30 < 100 again: two more.
    order = [
        (p.to_account, p.reason) for p in result.applied if short in (p.from_account, p.to_account)
    ]
    assert order == [
        (short, "bank_load"),
        (short, "bank_load"),
        (f"bowl:{table_id}", "bowl_contribution"),
        (short, "bank_load"),
        (short, "bank_load"),
        (f"player:{players[0]}", "bonus_joker"),
    ]
    assert ledger.balance(short) == 30
    assert ledger.balance(f"bowl:{table_id}") == 400
    report = reconcile(ledger.engine)
    assert report.ok, report.discrepancies
