"""Group commit (services/wallet/group_commit.py, Ledger.apply_group) on real databases:
batches sharing one transaction stay atomic and idempotent each, a refused batch does not
poison the others, a failed shared transaction falls back to one batch at a time."""

from __future__ import annotations

import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import text

from services.wallet.accounts import BANK
from services.wallet.batch import Posting
from services.wallet.database import create_wallet_engine, temporary_postgres_database
from services.wallet.errors import (
    AccountNotFound,
    IdempotencyKeyReused,
    InsufficientFunds,
    InvalidRequest,
)
from services.wallet.group_commit import GroupCommitter
from services.wallet.ledger import BatchResult, Ledger
from services.wallet.migrate import upgrade
from services.wallet.reconcile import reconcile
from tests.conftest import TEST_DATABASE_URL

pytestmark = pytest.mark.integration

START = 2000  # a new wallet's grant (docs/rules/kishpa.md section 5)


def _players(ledger: Ledger, run: str, n: int) -> list[str]:
    for i in range(n):
        ledger.open_wallet(f"{run}{i}")
    return [f"player:{run}{i}" for i in range(n)]


def _bowl(ledger: Ledger, run: str, payer: str, tokens: int) -> str:
    """A bowl that exists (so batches using it may share a transaction) holding ``tokens``."""
    bowl = f"bowl:{run}"
    ledger.apply_batch(f"seed:{run}", [Posting(payer, bowl, tokens, "bowl_contribution", run)])
    return bowl


def test_a_refused_batch_leaves_the_others_of_its_group_applied(ledger: Ledger) -> None:
    run = uuid.uuid4().hex[:10]
    a, b, c = _players(ledger, run, 3)
    bowl = _bowl(ledger, run, c, 3)  # c: 1997, bowl: 3
    done = ledger.apply_batch(f"done:{run}", [Posting(a, b, 1, "win", run, 1, "end")])
    outcomes = ledger.apply_group(
        [
            (f"g1:{run}", [Posting(a, b, 10, "win", run, 2, "end")]),
            (f"g2:{run}", [Posting(bowl, a, 5, "bowl_win", run, 2, "end")]),  # bowl holds 3
            (f"g3:{run}", [Posting(b, c, 7, "win", run, 2, "end")]),
            (f"g4:{run}", [Posting(f"player:{run}nobody", a, 1, "win", run, 2, "end")]),
            (f"g5:{run}", [Posting(a, b, 1, "admin_credit", run, 2, "end")]),
            (f"g6:{run}", [Posting(bowl, c, 3, "bowl_win", run, 2, "end")]),
            (f"done:{run}", [Posting(a, b, 1, "win", run, 1, "end")]),  # a replay
            (f"done:{run}", [Posting(a, c, 1, "win", run, 1, "end")]),  # key reused
        ]
    )
    g1, g2, g3, g4, g5, g6, replay, reused = outcomes
    assert isinstance(g1, BatchResult)
    assert g1.balances == {a: 1989, b: 2011}
    assert isinstance(g2, InsufficientFunds)
    assert isinstance(g3, BatchResult)
    assert g3.balances == {b: 2004, c: 2004}
    assert isinstance(g4, AccountNotFound)
    assert isinstance(g5, InvalidRequest)
    assert isinstance(g6, BatchResult)
    assert g6.balances == {bowl: 0, c: 2007}
    assert isinstance(replay, BatchResult)
    assert replay.replayed
    assert replay.batch_id == done.batch_id
    assert replay.balances == done.balances
    assert isinstance(reused, IdempotencyKeyReused)
    assert [ledger.balance(x) for x in (a, b, c, bowl)] == [1989, 2004, 2007, 0]
    # Each applied batch replays to its first result, alone or in a group.
    assert ledger.apply_batch(f"g1:{run}", [Posting(a, b, 10, "win", run, 2, "end")]) == (
        BatchResult(g1.batch_id, g1.applied, g1.balances, replayed=True)
    )
    again = ledger.apply_group([(f"g3:{run}", [Posting(b, c, 7, "win", run, 2, "end")])])[0]
    assert isinstance(again, BatchResult)
    assert again.replayed
    assert again.balances == g3.balances
    assert reconcile(ledger.engine).ok


def test_a_key_twice_in_one_group_applies_once(ledger: Ledger) -> None:
    run = uuid.uuid4().hex[:10]
    a, b = _players(ledger, run, 2)
    twice = [Posting(a, b, 4, "win", run, 1, "end")]
    first, second = ledger.apply_group([(f"t:{run}", twice), (f"t:{run}", twice)])
    assert isinstance(first, BatchResult)
    assert not first.replayed
    assert isinstance(second, BatchResult)
    assert second.replayed
    assert second.batch_id == first.batch_id
    assert [ledger.balance(a), ledger.balance(b)] == [1996, 2004]


def test_later_batches_see_the_balances_earlier_ones_left_and_loads_follow(
    ledger: Ledger,
) -> None:
    """a pays 1,990 then 30 in one group: the second needs one 50-token bank load."""
    run = uuid.uuid4().hex[:10]
    a, b = _players(ledger, run, 2)
    bank_before = ledger.balance(BANK)
    first, second = ledger.apply_group(
        [
            (f"l1:{run}", [Posting(a, b, 1990, "win", run, 1, "end")]),
            (f"l2:{run}", [Posting(a, b, 30, "win", run, 2, "end")]),
        ]
    )
    assert isinstance(first, BatchResult)
    assert first.balances == {a: 10, b: 3990}
    assert isinstance(second, BatchResult)
    assert [p.reason for p in second.applied] == ["bank_load", "win"]
    # 10 + 50 - 30 = 30; the bank paid 50 (others may move it too on a shared database,
    # but not during this test: the bank's balance after is exactly 50 less).
    assert second.balances[a] == 30
    assert second.balances[b] == 4020
    assert second.balances[BANK] == bank_before - 50
    assert ledger.balance(a) == 30
    assert reconcile(ledger.engine).ok


def test_bank_balances_in_a_group_are_each_batchs_own(ledger: Ledger) -> None:
    """Three batches through the bank in one transaction: each result (and its replay) shows
    the bank as it was right after that batch."""
    run = uuid.uuid4().hex[:10]
    a, b, c = _players(ledger, run, 3)
    bank = ledger.balance(BANK)
    sent = [
        (f"b{i}:{run}", [Posting(BANK, x, 1, "bank_load", run, i + 1, "end")])
        for i, x in enumerate((a, b, c))
    ]
    sent.insert(1, (f"nb:{run}", [Posting(a, b, 1, "win", run, 9, "end")]))  # bank untouched
    results = ledger.apply_group(sent)
    assert all(isinstance(r, BatchResult) for r in results)
    banks = [r.balances.get(BANK) for r in results if isinstance(r, BatchResult)]
    assert banks == [bank - 1, None, bank - 2, bank - 3]
    for (key, postings), result in zip(sent, results, strict=True):
        replay = ledger.apply_batch(key, postings)
        assert replay.replayed
        assert isinstance(result, BatchResult)
        assert replay.balances == result.balances


def test_a_shared_transaction_that_fails_whole_is_retried_batch_by_batch() -> None:
    """A concurrent writer takes one group's key with other postings between the replay check
    and the write: the group's statement fails, every batch is retried alone, only the one
    with the stolen key is refused (PostgreSQL: SQLite has one writer at a time)."""
    with temporary_postgres_database(TEST_DATABASE_URL) as url:
        upgrade(url)
        engine = create_wallet_engine(url)
        ledger = Ledger(engine)
        run = uuid.uuid4().hex[:10]
        a, b, c = _players(ledger, run, 3)
        thief = engine.connect()
        thief_tx = thief.begin()
        thief.execute(
            text(
                "INSERT INTO batches (idempotency_key, body_hash, result, created_ms) "
                "VALUES (:k, 'other', '{\"applied\": [], \"balances\": {}}', 0)"
            ),
            {"k": f"s2:{run}"},
        )
        outcomes: list[BatchResult | Exception] = []
        group = threading.Thread(
            target=lambda: outcomes.extend(
                ledger.apply_group(
                    [
                        (f"s1:{run}", [Posting(a, b, 1, "win", run, 1, "end")]),
                        (f"s2:{run}", [Posting(b, c, 2, "win", run, 1, "end")]),
                        (f"s3:{run}", [Posting(c, a, 3, "win", run, 1, "end")]),
                    ]
                )
            )
        )
        group.start()
        deadline = time.monotonic() + 20
        with engine.connect() as watch:
            while True:  # until the group's write waits on the thief's key (deadline)
                waiting = watch.execute(
                    # The only lock anything in this private database can wait on is the
                    # thief's key (the query text shown for it varies with the driver's
                    # prepared statements, so it is not matched).
                    text(
                        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                        "AND datname = current_database()"
                    )
                ).scalar_one()
                # End the read's transaction: PostgreSQL caches pg_stat_activity for the
                # rest of a transaction, so a poll that came too early saw 0 forever.
                watch.rollback()
                if waiting:
                    break
                assert time.monotonic() < deadline, "the group never waited on the thief's key"
                time.sleep(0.02)
        thief_tx.commit()
        thief.close()
        group.join(timeout=30)
        assert not group.is_alive()
        s1, s2, s3 = outcomes
        assert isinstance(s1, BatchResult)
        assert not s1.replayed
        assert isinstance(s2, IdempotencyKeyReused)
        assert isinstance(s3, BatchResult)
        assert not s3.replayed
        assert [ledger.balance(x) for x in (a, b, c)] == [2002, 2001, 1997]
        engine.dispose()


def test_committer_threads_share_transactions_under_concurrent_callers(ledger: Ledger) -> None:
    """64 callers on 8 threads, twins included, through two committer threads."""
    run = uuid.uuid4().hex[:10]
    players = _players(ledger, run, 4)
    committer = GroupCommitter(ledger, threads=2, max_group=16)

    def send(i: int) -> BatchResult:
        key = f"c:{run}:{i % 48}"  # 16 twins of earlier keys, same postings
        src, dst = players[(i % 48) % 4], players[((i % 48) + 1) % 4]
        return committer.apply_batch(key, [Posting(src, dst, 1, "win", run, i % 48, "end")])

    try:
        with ThreadPoolExecutor(8) as pool:
            results = list(pool.map(send, range(64)))
    finally:
        committer.close()
    fresh = [r for r in results if not r.replayed]
    assert len(fresh) == 48  # every key applied once
    assert len({r.batch_id for r in results}) == 48
    # Each player paid 12 and received 12.
    assert [ledger.balance(p) for p in players] == [START] * 4
    assert reconcile(ledger.engine).ok


def test_a_closed_committer_finishes_what_was_queued(ledger: Ledger) -> None:
    run = uuid.uuid4().hex[:10]
    a, b = _players(ledger, run, 2)
    committer = GroupCommitter(ledger, threads=1, max_group=4)
    futures = [
        committer.submit(f"q:{run}:{i}", [Posting(a, b, 1, "win", run, i, "end")])
        for i in range(10)
    ]
    committer.close()
    assert all(f.done() for f in futures)
    assert [ledger.balance(a), ledger.balance(b)] == [1990, 2010]


ROWS = st.lists(
    st.tuples(st.integers(0, 2), st.integers(0, 2), st.integers(1, 1500)).filter(
        lambda r: r[0] != r[1]
    ),
    min_size=1,
    max_size=3,
)


@settings(max_examples=25, deadline=None)
@given(batches=st.lists(ROWS, min_size=1, max_size=8), repeat=st.lists(st.integers(0, 7)))
def test_a_group_ends_where_the_same_batches_one_by_one_end(
    ledger: Ledger, batches: list[list[tuple[int, int, int]]], repeat: list[int]
) -> None:
    """Differential: the same batches (some keys repeated) applied as one group and one by
    one on twin wallets give the same balances and the same outcome kinds."""
    run = uuid.uuid4().hex[:10]
    grouped = _players(ledger, f"{run}g", 3)
    alone = _players(ledger, f"{run}a", 3)
    sent = [[(s, d, n) for s, d, n in rows] for rows in batches]
    order = list(range(len(sent))) + [i for i in repeat if i < len(sent)]

    def batch(who: list[str], i: int) -> tuple[str, list[Posting]]:
        return f"{who[0]}:{i}", [
            Posting(who[s], who[d], n, "win", run, i + 1) for s, d, n in sent[i]
        ]

    outcomes = ledger.apply_group([batch(grouped, i) for i in order])
    expected: list[object] = []
    for i in order:
        try:
            expected.append(ledger.apply_batch(*batch(alone, i)))
        except Exception as exc:  # the outcome compared
            expected.append(exc)
    assert [type(o) for o in outcomes] == [type(e) for e in expected]
    for o, e in zip(outcomes, expected, strict=True):
        if isinstance(o, BatchResult) and isinstance(e, BatchResult):
            assert o.replayed == e.replayed
            assert [p.amount for p in o.applied] == [p.amount for p in e.applied]
    assert [ledger.balance(p) for p in grouped] == [ledger.balance(p) for p in alone]
    total = sum(ledger.balance(p) for p in grouped)
    loads = sum(
        p.amount
        for o in outcomes
        if isinstance(o, BatchResult) and not o.replayed
        for p in o.applied
        if p.from_account == BANK
    )
    assert total == 3 * START + loads  # money moves between them, only loads come in


def test_a_caller_that_goes_away_neither_stops_the_committer_nor_applies_its_batch(
    ledger: Ledger,
) -> None:
    """A batch whose caller cancelled (its RPC went away) while it waited in the queue is
    dropped unapplied, and one cancelled while its group commits still gets its outcome: the
    committer thread keeps serving. (Before, setting the outcome of a cancelled future raised
    in the committer thread, which ended it: every later ApplyBatch then waited forever.)"""
    run = uuid.uuid4().hex[:10]
    a, b = _players(ledger, run, 2)
    entered, release = threading.Event(), threading.Event()
    apply_group = ledger.apply_group

    def held_group(batches: Any) -> Any:
        entered.set()
        release.wait(30)
        return apply_group(batches)

    committer = GroupCommitter(ledger, threads=1, max_group=4)
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(ledger, "apply_group", held_group)
            running = committer.submit(f"x:{run}:0", [Posting(a, b, 1, "win", run, 0, "end")])
            assert entered.wait(30)
            waiting = committer.submit(f"x:{run}:1", [Posting(a, b, 2, "win", run, 1, "end")])
            assert waiting.cancel()  # still queued: its caller may give up on it
            assert not running.cancel()  # being applied: its outcome will come
            release.set()
            assert running.result(30).batch_id
        later = committer.apply_batch(f"x:{run}:2", [Posting(a, b, 4, "win", run, 2, "end")])
        assert later.batch_id
    finally:
        release.set()
        committer.close()
    # 1 and 4 moved; the cancelled 2 did not.
    assert [ledger.balance(a), ledger.balance(b)] == [START - 5, START + 5]
    assert reconcile(ledger.engine).ok
