"""The ledger's PostgreSQL write statement (services/wallet/postgres.py) on a real server:
what it stores is exactly what it answers, postings keep their order, and concurrent batches
through the bank stay whole."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from sqlalchemy import text

from devkit.postgres import temporary_postgres_database
from services.wallet.accounts import BANK
from services.wallet.batch import Posting
from services.wallet.database import create_wallet_engine
from services.wallet.ledger import BatchResult, Ledger
from services.wallet.migrate import upgrade
from services.wallet.reconcile import reconcile_url
from tests.conftest import TEST_DATABASE_URL

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def pg() -> Iterator[tuple[str, Ledger]]:
    with temporary_postgres_database(TEST_DATABASE_URL) as url:
        upgrade(url)
        engine = create_wallet_engine(url, pool_size=8)
        yield url, Ledger(engine)
        engine.dispose()


def _players(ledger: Ledger, n: int) -> list[str]:
    ids = [f"pw{uuid.uuid4().hex[:10]}" for _ in range(n)]
    for p in ids:
        ledger.open_wallet(p)
    return [f"player:{p}" for p in ids]


def _stored(ledger: Ledger, batch_id: int) -> tuple[str, list[tuple[int, int, str, str, int]]]:
    with ledger.engine.connect() as conn:
        result = conn.execute(
            text("SELECT result FROM batches WHERE id = :i"), {"i": batch_id}
        ).scalar_one()
        rows = conn.execute(
            text(
                "SELECT id, seq, reason, coalesce(table_id, '<null>'), coalesce(round, -1) "
                "FROM postings WHERE batch_id = :i ORDER BY id"
            ),
            {"i": batch_id},
        ).all()
    return result, [(int(r[0]), int(r[1]), r[2], r[3], int(r[4])) for r in rows]


def test_a_batch_with_bank_loads_stores_exactly_what_it_answers(pg: tuple[str, Ledger]) -> None:
    _, ledger = pg
    payer, other = _players(ledger, 2)
    bowl = f"bowl:t{uuid.uuid4().hex[:8]}"
    postings = [
        Posting(payer, bowl, 2_120, "bowl_contribution", "t1", 3, "end"),
        Posting(other, payer, 7, "win"),
    ]
    key = f"test:{uuid.uuid4().hex}"
    first = ledger.apply_batch(key, postings)
    # 2,000 + 3 loads of 50 = 2,150 covers 2,120.
    assert [p.reason for p in first.applied] == ["bank_load"] * 3 + ["bowl_contribution", "win"]
    assert first.balances[payer] == 2_000 + 150 - 2_120 + 7
    assert first.balances[bowl] == 2_120
    # Nothing else writes this database meanwhile: the answer's bank figure is the bank's.
    assert first.balances[BANK] == ledger.balance(BANK)
    stored, rows = _stored(ledger, first.batch_id)
    assert stored == first.to_json()
    assert json.loads(stored)["balances"][BANK] == first.balances[BANK]
    assert [r[1] for r in rows] == list(range(5))
    assert rows[0][3:] == ("t1", 3)
    assert rows[4][3:] == ("<null>", -1)
    again = ledger.apply_batch(key, postings)
    assert again == BatchResult(first.batch_id, first.applied, first.balances, replayed=True)


def test_a_batch_without_the_bank_and_one_with_no_net_change(pg: tuple[str, Ledger]) -> None:
    _, ledger = pg
    a, b = _players(ledger, 2)
    plain = ledger.apply_batch(f"test:{uuid.uuid4().hex}", [Posting(a, b, 5, "win")])
    assert plain.balances == {a: 1_995, b: 2_005}
    assert _stored(ledger, plain.batch_id)[0] == plain.to_json()
    # Every account nets to zero: nothing to update, the batch and postings are still recorded.
    there_and_back = [Posting(a, b, 9, "win"), Posting(b, a, 9, "win")]
    flat = ledger.apply_batch(f"test:{uuid.uuid4().hex}", there_and_back)
    assert flat.balances == {a: 1_995, b: 2_005}
    stored, rows = _stored(ledger, flat.batch_id)
    assert stored == flat.to_json()
    assert [r[1] for r in rows] == [0, 1]


def test_concurrent_batches_through_the_bank_keep_the_ledger_whole(pg: tuple[str, Ledger]) -> None:
    url, ledger = pg
    players = _players(ledger, 6)
    bowl = f"bowl:t{uuid.uuid4().hex[:8]}"
    run = uuid.uuid4().hex

    def work(n: int) -> list[BatchResult]:
        out = []
        for i in range(15):
            payer = players[(n + i) % len(players)]
            payee = players[(n + i + 1) % len(players)]
            postings = [
                Posting(payer, bowl, 700, "bowl_contribution"),
                Posting(payer, payee, 3, "win"),
            ]
            out.append(ledger.apply_batch(f"test:{run}:{n}:{i}", postings))
        return out

    with ThreadPoolExecutor(6) as pool:
        results = [r for chunk in pool.map(work, range(6)) for r in chunk]
    assert len({r.batch_id for r in results}) == 90
    loads = sum(p.amount for r in results for p in r.applied if p.reason == "bank_load")
    assert loads > 0
    # The last batch through the bank saw it after every load of this test.
    last = max((r for r in results if BANK in r.balances), key=lambda r: r.batch_id)
    assert ledger.balance(bowl) == 90 * 700
    assert last.balances[BANK] == ledger.balance(BANK)
    report = reconcile_url(url)
    assert report.ok, report.discrepancies
    assert report.total_balance == 0
