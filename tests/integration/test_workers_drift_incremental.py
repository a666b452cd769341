"""The drift check's incremental half (workers/drift_archive.py) on a real wallet and archive.

A real ``kishpa serve wallet`` (SQLite and PostgreSQL) applies each round's batches under the
settlement's keys through the workers' own wallet client, and the round archive (the same
database, as by default) records each phase with the batch and the postings the wallet
answered, as the settlement worker does. Then:

- a clean run reads every round once and moves its watermark; a second run reads only the
  rounds settled after it: the rows it reads are the new rounds' own, counted here from what
  this test posted (not from the check);
- a posting deleted, doubled or changed in the ledger for an archived round, and a phase
  settled again by hand under another key, are each reported, naming the phase; the
  watermark stays where it was, so the next run reports them again;
- the Celery task travels on its own queue: a settlement worker leaves it there, and only
  ``kishpa worker --drift`` runs it (and records the run with the wallet).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis
import sqlalchemy as sa

from archive.database import create_archive_engine
from archive.migrate import upgrade as archive_upgrade
from archive.store import ArchiveStore, PhaseRow
from devkit.postgres import temporary_postgres_database
from games.ledger import Posting
from services.common.settings import Settings
from services.wallet.migrate import upgrade as wallet_upgrade
from tests.conftest import TEST_DATABASE_URL
from tests.integration.workers_support import (
    Backend,
    RedisServer,
    Wallet,
    Worker,
    free_port,
    wait_for,
)
from workers import drift_archive
from workers.drift import GrpcSources
from workers.wallet_client import WalletClient

pytestmark = pytest.mark.integration

PLAYERS = ("ann", "ben")


class UrlWallet(Wallet):
    """``kishpa serve wallet`` on the test's database URL."""

    database_url: str = ""

    @property
    def url(self) -> str:
        return self.database_url


@dataclass
class Stack:
    url: str
    wallet: UrlWallet
    backend: Backend
    store: ArchiveStore
    sources: GrpcSources
    client: WalletClient


@pytest.fixture(params=["sqlite", "postgres"])
def stack(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Stack]:
    redis_server = RedisServer(tmp_path / "redis", appendonly=False).start()
    backend = Backend(redis_server.url, redis_server.url)

    def run(url: str) -> Iterator[Stack]:
        wallet_upgrade(url)
        archive_upgrade(url)
        wallet = UrlWallet(free_port(), tmp_path / "unused.sqlite3", backend)
        wallet.database_url = url
        wallet.start(tmp_path / "wallet.log")
        monkeypatch.setenv("KISHPA_SERVICE_SECRET", backend.secret)
        monkeypatch.setenv("KISHPA_WALLET_ADDR", wallet.addr)
        monkeypatch.setenv("KISHPA_TABLE_ADDR", "127.0.0.1:1")  # no live table to ask about
        settings = Settings(service="worker")
        engine = create_archive_engine(url)
        sources = GrpcSources(settings)
        client = wallet.client()
        try:
            yield Stack(url, wallet, backend, ArchiveStore(engine), sources, client)
        finally:
            sources.close()
            client.close()
            engine.dispose()
            if wallet.process is not None:
                wallet.process.stop()

    try:
        if request.param == "sqlite":
            yield from run(f"sqlite:///{tmp_path / 'ledger.sqlite3'}")
        else:
            with temporary_postgres_database(TEST_DATABASE_URL) as url:
                yield from run(url)
    finally:
        redis_server.stop()


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def settle_round(stack: Stack, table: str, round_no: int) -> int:
    """Settle a round's two phases as the worker does (batch, then archive); the number of
    postings the ledger holds for it."""
    stack.client.open_wallets(PLAYERS)
    bowl = f"bowl:{table}"
    phases = {
        "start": [
            Posting(f"player:{p}", bowl, 2, "bowl_contribution", table, round_no, "start")
            for p in PLAYERS
        ],
        "end": [
            Posting("player:ben", "player:ann", 3, "win", table, round_no, "end"),
            Posting(bowl, "player:ann", 4, "bowl_win", table, round_no, "end"),
        ],
    }
    posted = 0
    for offset, (phase, postings) in enumerate(phases.items()):
        result = stack.client.apply_batch(f"kishpa:{table}:{round_no}:{phase}", postings)
        applied = [
            {"from": p.from_account, "to": p.to_account, "amount": p.amount, "reason": p.reason}
            for p in result.applied
        ]
        stack.store.write_phase(
            PhaseRow(
                table, round_no, phase, now_ms() + offset, "kishpa", result.batch_id, tuple(applied)
            ),
            now_ms=now_ms(),
        )
        posted += len(result.applied)
    return posted


def run_check(stack: Stack) -> drift_archive.ArchiveCheck:
    """One run over everything settled until now (no settle lag: the test waits for nothing)."""
    time.sleep(0.002)  # the window ends after the last write's millisecond
    check = drift_archive.check_new_rounds(stack.store, stack.sources, now_ms=now_ms(), lag_ms=0)
    drift_archive.advance(stack.store, check, now_ms=now_ms())
    return check


def test_a_second_run_reads_only_the_rounds_settled_since_the_first(stack: Stack) -> None:
    first_posted = sum(settle_round(stack, "t-old", r) for r in range(1, 7))
    first = run_check(stack)
    assert first.differences == []
    assert first.rounds == 6
    assert stack.store.drift_mark(drift_archive.MARK) == first.until_ms

    new_posted = settle_round(stack, "t-old", 7) + settle_round(stack, "t-new", 1)
    second = run_check(stack)
    assert second.differences == []
    assert second.since_ms == first.until_ms
    assert second.rounds == 2
    # Each new phase row is read twice (the window, then its round), each new posting twice
    # (the export of the window, then its round's batches): nothing of the six old rounds.
    assert second.archive_rows == 2 * 4
    assert second.ledger_rows == 2 * new_posted
    assert first.ledger_rows >= 2 * first_posted  # plus the players' opening grants

    third = run_check(stack)
    assert (third.rounds, third.archive_rows, third.ledger_rows) == (0, 0, 0)


def _phase(detail: str) -> str:
    """The phase a difference's detail names first ("phase 6:end batch ...")."""
    return detail.split(" ")[1].rstrip(":,")


def _doctor(url: str, statement: str) -> None:
    """Change the ledger behind the wallet's back."""
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.execute(sa.text(statement))
    engine.dispose()


def test_a_missing_doubled_or_wrong_posting_of_an_archived_round_is_reported(
    stack: Stack,
) -> None:
    for r in range(1, 6):
        settle_round(stack, "t-d", r)
    assert run_check(stack).differences == []
    mark = stack.store.drift_mark(drift_archive.MARK)
    for r in range(6, 11):
        settle_round(stack, "t-d", r)

    # Round 6: its win posting missing; 7: doubled; 8: of another amount.
    _doctor(
        stack.url,
        "DELETE FROM postings WHERE id = (SELECT min(id) FROM postings "
        "WHERE table_id = 't-d' AND round = 6 AND reason = 'win')",
    )
    _doctor(
        stack.url,
        "INSERT INTO postings (batch_id, seq, from_account, to_account, amount, reason, "
        "table_id, round, phase, created_ms, effective_ms) SELECT batch_id, seq + 100, "
        "from_account, to_account, amount, reason, table_id, round, phase, created_ms, "
        "effective_ms FROM postings WHERE table_id = 't-d' AND round = 7 AND reason = 'win'",
    )
    _doctor(
        stack.url,
        "UPDATE postings SET amount = 9 WHERE table_id = 't-d' AND round = 8 AND reason = 'win'",
    )
    # Round 9: its start settled again by hand, under a key of its own.
    stack.client.apply_batch(
        "by-hand:t-d:9:start",
        [Posting("player:ann", "bowl:t-d", 2, "bowl_contribution", "t-d", 9, "start")],
    )

    found = run_check(stack)
    seen = {(d.check, _phase(d.detail)) for d in found.differences}
    assert seen == {
        ("postings_differ", "6:end"),
        ("postings_differ", "7:end"),
        ("postings_differ", "8:end"),
        ("phase_settled_twice", "9:start"),
    }, found.differences
    details = {_phase(d.detail): d.detail for d in found.differences}
    assert "the archive gives, the ledger lacks: player:ben->player:ann 3 win" in details["6:end"]
    assert (
        "the ledger holds, the archive does not give: player:ben->player:ann 3 win"
        in (details["7:end"])
    )
    assert (
        "player:ben->player:ann win: amount 3 by the archive, 9 in the ledger" in (details["8:end"])
    )
    assert "by-hand:t-d:9:start" in details["9:start"]
    assert all(d.action for d in found.differences)
    # Not clean: the watermark stays, and the next run reads (and reports) them again.
    assert stack.store.drift_mark(drift_archive.MARK) == mark
    again = run_check(stack)
    assert {(d.check, d.detail) for d in again.differences} == {
        (d.check, d.detail) for d in found.differences
    }


def test_a_batch_the_archive_never_recorded_is_reported(stack: Stack) -> None:
    settle_round(stack, "t-b", 1)
    stack.client.apply_batch(
        "by-hand:t-b:2:end",
        [Posting("player:ben", "player:ann", 3, "win", "t-b", 2, "end")],
    )
    found = run_check(stack)
    assert [(d.check, d.table_id) for d in found.differences] == [("batch_without_phase", "t-b")]
    assert "posts phase '2:end', which the round archive does not hold" in (
        found.differences[0].detail
    )


def test_the_drift_task_travels_on_its_own_queue(stack: Stack, tmp_path: Path) -> None:
    """A settlement worker leaves the drift check on its queue; ``--drift`` runs it."""
    if not stack.url.startswith("sqlite"):
        pytest.skip("the queues do not depend on the database: checked once, on SQLite")
    queue = f"drift-{uuid.uuid4().hex[:10]}"
    env = {"ARCHIVE_DATABASE_URL": stack.url, "KISHPA_DRIFT_INTERVAL": "0"}
    settlement = Worker(
        stack.wallet.addr, tmp_path / "w.log", stack.backend, queue=queue, extra_env=env
    ).start(concurrency=2)
    drift = Worker(
        stack.wallet.addr,
        tmp_path / "d.log",
        stack.backend,
        queue=queue,
        extra_env=env,
        extra_args=["--drift"],
    )
    broker = redis.Redis.from_url(stack.backend.broker_url)
    try:
        settle_round(stack, "t-q", 1)
        settlement.sender().send_task("kishpa.check_drift")
        wait_for(lambda: broker.llen(f"{queue}.drift") == 1, 10, "the task on the drift queue")
        assert broker.llen(queue) == 0
        # The settlement worker, consuming its own queue, leaves it there.
        with pytest.raises(AssertionError, match="timed out"):
            wait_for(lambda: broker.llen(f"{queue}.drift") == 0, 3, "a worker to take it")
        drift.start(concurrency=1)
        wait_for(lambda: broker.llen(f"{queue}.drift") == 0, 30, "the drift worker to take it")
        wait_for(
            lambda: stack.store.drift_mark(drift_archive.MARK) is not None,
            60,
            "the drift run to end clean and move the watermark",
        )
        # The run is counted after the watermark moves (and the run is recorded).
        clean = 'kishpa_wallet_drift_checks_total{result="clean"} 1.0'
        wait_for(lambda: clean in drift.metrics(), 30, "the drift worker to count the run")
        assert 'kishpa_wallet_drift_checks_total{result="clean"}' not in settlement.metrics()
    finally:
        drift.stop()
        settlement.stop()
        broker.delete(f"{queue}.drift")
        broker.close()
