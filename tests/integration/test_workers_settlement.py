"""Settlement through real processes: ``kishpa worker`` (Celery) subprocesses, a real wallet
(``kishpa serve wallet`` on SQLite in a temp dir), Redis as broker (RabbitMQ in one test).

No eager mode: tasks travel through the broker to worker processes. Isolation: the settlement
suites' own Redis (``workers_support.SHARED``: db 13 of the test Redis, so the sweeper never
touches other people's tables; under ``pytest --redis-cluster`` the run's 3-master cluster,
the broker staying on db 13 of the node), a unique queue per worker, unique table and player
ids, free ports for every server and metrics endpoint.
"""

from __future__ import annotations

import os
import sqlite3
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import redis
from celery import Celery

from archive.database import create_archive_engine
from archive.store import ArchiveStore, PhaseRow
from devkit.phase_samples import phase_entry, poisoned_end_record, round_record
from shared import keys, stream
from shared.phase_record import PhaseRef, parse_phase_record
from tests.integration.workers_support import (
    SHARED,
    STARTING_TOKENS,
    Wallet,
    Worker,
    free_port,
    now_ms,
    wait_for,
    with_db,
)
from workers.deadletter import list_dead_letters, release_dead_letter
from workers.outbox import claim_enqueue, index_unsettled, read_settlement
from workers.wallet_client import WalletClient

pytestmark = [pytest.mark.integration, pytest.mark.slow]

RABBITMQ_URL = os.environ.get("TEST_RABBITMQ_URL", "amqp://guest:guest@127.0.0.1:5672//")


class Tables:
    """Tables created by one test, with their Redis keys removed afterwards."""

    def __init__(self, client: redis.Redis) -> None:
        self.client = client
        self.ids: list[str] = []

    def new(self, players: int = 4) -> tuple[str, list[str]]:
        table = f"gtest-{uuid.uuid4().hex[:12]}"
        self.ids.append(table)
        return table, [f"{table}-p{i}" for i in range(1, players + 1)]

    def write_phase(
        self, table: str, round_no: int, phase: str, record: dict[str, Any], age_ms: int = 0
    ) -> PhaseRef:
        created = now_ms() - age_ms
        entry = phase_entry(table, round_no, phase, record, created)
        self.client.hset(keys.outbox(table), keys.phase_field(round_no, phase), entry)
        index_unsettled(self.client, table, created)  # as the table service's commit does
        return PhaseRef(table, round_no, phase)

    def settled(self, ref: PhaseRef) -> dict[str, Any] | None:
        return read_settlement(self.client, ref)

    def settled_events(self, table: str) -> list[stream.TableEvent]:
        decoded = [stream.decode(f) for _, f in self.client.xrange(keys.events(table))]
        return [e for e in decoded if e.type == "settled"]

    def cleanup(self) -> None:
        for table in self.ids:
            for key in (keys.outbox, keys.settled, keys.balances, keys.events):
                self.client.delete(key(table))
            self.client.zrem(keys.unsettled(table), table)
            for round_no in range(4):
                for phase in ("start", "end"):
                    ref = PhaseRef(table, round_no, phase)
                    release_dead_letter(self.client, ref)
                    self.client.delete(f"kishpa:sweeper:{{{table}}}:{round_no}:{phase}")


def _send(sender: Celery, ref: PhaseRef) -> Any:
    return sender.send_task(
        "kishpa.settle_phase",
        kwargs={"table_id": ref.table_id, "round_no": ref.round_no, "phase": ref.phase},
    )


# What ``round_record(players)`` (devkit.phase_samples) moves, per seat, hand-computed from
# the rules (docs/rules): the kishpa is R5, so the joker is R6 and the 1s of its colour are
# R1. Start: everyone pays 1 into the bowl; the starter (seat 1) holds R6 and R1 and is paid
# 1 + 1 by every other player; with four players seat 4 was dealt the second R1 and R6 and
# is paid the same (the R5 he holds pays nothing unrevealed). End: seat 2 wins plainly (no
# joker, no kishpa in his 14, Y2 discarded last): 2 from every loser; nobody is paid again
# for jokers or 1s held at the end, as each was paid at the start.
START = {2: (+1, -3), 3: (+3, -3, -3), 4: (+3, -5, -5, +3)}
END = {2: (-2, +2), 3: (-2, +4, -2), 4: (-2, +6, -2, -2)}


def _expected_balances(players: Sequence[str], *moves: Sequence[int]) -> dict[str, int]:
    """Each player's balance after ``moves`` (per-seat net changes, in seat order)."""
    return {p: STARTING_TOKENS + sum(m[i] for m in moves) for i, p in enumerate(players)}


def _wallet_balances(wallet: WalletClient, players: Sequence[str]) -> dict[str, int]:
    return {p: wallet.balance(f"player:{p}") for p in players}


def _reconcile(url: str) -> list[Any]:
    from services.wallet.reconcile import reconcile_url

    return list(reconcile_url(url).discrepancies)


# -- fixtures -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tmp_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("workers")


@pytest.fixture(scope="module")
def client() -> Iterator[redis.Redis]:
    connection = SHARED.client()
    yield connection
    connection.close()


@pytest.fixture
def tables(client: redis.Redis) -> Iterator[Tables]:
    created = Tables(client)
    yield created
    created.cleanup()


@pytest.fixture(scope="module")
def wallet(tmp_dir: Path) -> Iterator[Wallet]:
    server = Wallet(free_port(), tmp_dir / "wallet.sqlite3", SHARED).start(tmp_dir / "wallet.log")
    yield server
    assert server.process is not None
    server.process.stop()


@pytest.fixture(scope="module")
def worker(wallet: Wallet, tmp_dir: Path) -> Iterator[Worker]:
    running = Worker(wallet.addr, tmp_dir / "worker.log", SHARED).start()
    yield running
    running.stop()


# -- tests --------------------------------------------------------------------------------


def test_the_same_task_delivered_three_times_settles_once(
    worker: Worker, wallet: Wallet, tables: Tables
) -> None:
    table, players = tables.new()
    record = round_record(players)
    sender = worker.sender()
    for phase in ("start", "end"):
        ref = tables.write_phase(table, 1, phase, record)
        results = [_send(sender, ref) for _ in range(3)]
        outcomes = sorted(r.get(timeout=30)["outcome"] for r in results)
        assert outcomes == ["already_settled", "already_settled", "settled"]
        # Delivered again much later, still nothing happens.
        assert _send(sender, ref).get(timeout=30)["outcome"] == "already_settled"

    expected = _expected_balances(players, START[len(players)], END[len(players)])
    assert _wallet_balances(wallet.client(), players) == expected
    published = tables.settled_events(table)
    assert [e.data["phase"] for e in published] == ["start", "end"]
    assert published[-1].data["balances"] == expected
    stored = tables.client.hgetall(keys.balances(table))
    assert {k.decode(): int(v) for k, v in stored.items()} == expected


def test_a_poisoned_record_is_dead_lettered_without_blocking_the_others(
    worker: Worker, wallet: Wallet, tables: Tables
) -> None:
    sender = worker.sender()
    poisoned_table, poisoned_players = tables.new()
    poisoned = tables.write_phase(poisoned_table, 1, "end", poisoned_end_record(poisoned_players))
    missing_table, _ = tables.new()
    missing = PhaseRef(missing_table, 2, "start")  # no outbox record was ever written

    good: list[tuple[PhaseRef, list[str], dict[str, Any]]] = []
    for _ in range(6):
        table, players = tables.new(3)
        record = round_record(players)
        good.append((tables.write_phase(table, 1, "start", record), players, record))

    bad_results = [_send(sender, poisoned), _send(sender, missing)]
    good_results = [_send(sender, ref) for ref, _, _ in good]
    assert [r.get(timeout=30)["outcome"] for r in good_results] == ["settled"] * len(good)
    assert [r.get(timeout=30)["outcome"] for r in bad_results] == ["dead_letter"] * 2

    letters = {
        d.table_id: d
        for d in list_dead_letters(tables.client, limit=10_000)
        if d.table_id in (poisoned_table, missing_table)
    }
    assert letters[poisoned_table].reason.startswith("INVALID_RECORD")
    assert "winning hand" in letters[poisoned_table].reason
    assert (letters[poisoned_table].round_no, letters[poisoned_table].phase) == (1, "end")
    assert letters[missing_table].reason.startswith("PHASE_RECORD_MISSING")
    # Delivered again, a dead letter is neither retried nor listed twice.
    assert _send(sender, poisoned).get(timeout=30)["outcome"] == "dead_letter"
    again = [
        d for d in list_dead_letters(tables.client, limit=10_000) if d.table_id == poisoned_table
    ]
    assert len(again) == 1
    assert tables.settled(poisoned) is None
    assert tables.settled_events(poisoned_table) == []
    metrics = worker.metrics()
    assert 'kishpa_settlement_dead_letters_total{reason="INVALID_RECORD"}' in metrics
    assert 'kishpa_settlement_dead_letters_total{reason="PHASE_RECORD_MISSING"}' in metrics
    assert 'kishpa_settlements_total{outcome="dead_letter",phase="end"}' in metrics

    client = wallet.client()
    for _ref, players, _record in good:
        assert _wallet_balances(client, players) == _expected_balances(players, START[len(players)])


def test_an_end_delivered_before_its_start_settles_the_start_first_and_both_in_order(
    worker: Worker, wallet: Wallet, tables: Tables
) -> None:
    # The last round pays the whole bowl out at its end: settled before the start's
    # contributions reached the bowl, it would find the bowl short. The start's own message
    # is never sent (as if lost with a killed worker): the end's task settles the start
    # first, then itself; no sweeper runs here.
    sender = worker.sender()
    table, players = tables.new(3)
    record = round_record(players, bowl=0, last_round=True)
    start = tables.write_phase(table, 1, "start", record)
    end = tables.write_phase(table, 1, "end", record)
    answer = _send(sender, end).get(timeout=30)
    assert answer["outcome"] == "settled"
    # Both were settled by that one task: no hand-back, nothing left to wait for.
    assert tables.settled(start) is not None
    assert tables.settled(end) is not None
    assert [e.data["phase"] for e in tables.settled_events(table)] == ["start", "end"]
    assert wallet.client().balance(f"bowl:{table}") == 0
    # The last round: seat 2's plain win (2 from each loser) and, no two in a row, the bowl
    # of 3 split 1 each: (-1, +5, -1).
    assert tables.client.hgetall(keys.balances(table)) == {
        p.encode(): str(b).encode()
        for p, b in _expected_balances(players, START[3], (-1, +5, -1)).items()
    }
    # The start's own message, arriving late, changes nothing.
    assert _send(sender, start).get(timeout=30)["outcome"] == "already_settled"
    assert len(tables.settled_events(table)) == 2
    # Settling an earlier phase first is not an error: an info line, no traceback.
    assert worker.process is not None
    mine = [line for line in worker.process.output().splitlines() if table in line]
    assert any('"event": "earlier_phase_settled_first"' in line for line in mine)
    assert not [line for line in mine if '"level": "error"' in line or "Traceback" in line]


def test_a_later_phase_settles_the_earlier_ones_whose_enqueue_the_sweeper_holds(
    worker: Worker, wallet: Wallet, tables: Tables
) -> None:
    # After a Redis outage: round 1 was handed to the sweeper, which holds its phases'
    # enqueue markers; round 2's start is redelivered first. It must not wait for the
    # sweeper's re-enqueue (queued behind it): it settles round 1's start and end itself,
    # in order, then its own phase, each exactly once.
    sender = worker.sender()
    table, players = tables.new(3)
    record = round_record(players)
    start1 = tables.write_phase(table, 1, "start", record, age_ms=20_000)
    end1 = tables.write_phase(table, 1, "end", record, age_ms=10_000)
    start2 = tables.write_phase(table, 2, "start", record)
    for ref in (start1, end1):
        assert claim_enqueue(tables.client, ref, now_ms=now_ms(), deadline_s=60)
    answer = _send(sender, start2).get(timeout=30)
    assert answer["outcome"] == "settled"
    for ref in (start1, end1, start2):
        assert tables.settled(ref) is not None, ref
    published = tables.settled_events(table)
    assert [(e.round, e.data["phase"]) for e in published] == [
        (1, "start"),
        (1, "end"),
        (2, "start"),
    ]
    # The markers were never needed: nobody could (or had to) enqueue round 1 again.
    for ref in (start1, end1):
        assert not claim_enqueue(tables.client, ref, now_ms=now_ms(), deadline_s=60)
    # The sweeper's late messages (and a duplicate of round 2's) change nothing.
    late = [_send(sender, ref) for ref in (start1, end1, start2)]
    assert [r.get(timeout=30)["outcome"] for r in late] == ["already_settled"] * 3
    assert len(tables.settled_events(table)) == 3
    expected = _expected_balances(players, START[3], END[3], START[3])
    assert _wallet_balances(wallet.client(), players) == expected
    assert {k.decode(): int(v) for k, v in tables.client.hgetall(keys.balances(table)).items()} == (
        expected
    )
    # Each phase is one wallet batch under its own key: applied once.
    settlements = [tables.settled(ref) or {} for ref in (start1, end1, start2)]
    batches = {s.get("batch_id") for s in settlements}
    assert len(batches) == 3
    assert "" not in batches
    assert None not in batches


def test_a_last_round_leaves_the_bowl_account_at_zero(
    worker: Worker, wallet: Wallet, tables: Tables
) -> None:
    sender = worker.sender()
    client = wallet.client()
    table, players = tables.new(3)
    first = round_record(players, bowl=0, winner=players[1])
    for phase in ("start", "end"):
        ref = tables.write_phase(table, 1, phase, first)
        assert _send(sender, ref).get(timeout=30)["outcome"] == "settled"
    bowl_before = client.balance(f"bowl:{table}")
    assert bowl_before == 3  # three contributions, nobody took it

    # The final round: someone else wins, so the bowl is split among everyone seated.
    final = round_record(
        players, bowl=bowl_before, winner=players[2], previous_winner=players[1], last_round=True
    )
    for phase in ("start", "end"):
        ref = tables.write_phase(table, 2, phase, final)
        assert _send(sender, ref).get(timeout=30)["outcome"] == "settled"

    assert client.balance(f"bowl:{table}") == 0
    balances = _wallet_balances(client, players)
    assert sum(balances.values()) == STARTING_TOKENS * len(players)
    # Round 2 starts as round 1 (+3, -3, -3; the bowl holds 6); seat 3 wins plainly (2 from
    # each loser) and, not two in a row, the bowl of 6 is split 2 each: (0, 0, +6).
    assert balances == _expected_balances(players, START[3], END[3], START[3], (0, 0, +6))


def test_a_settlement_waits_out_a_wallet_that_is_down_at_first(
    tmp_dir: Path, tables: Tables, request: pytest.FixtureRequest
) -> None:
    # kombu keeps the unacked messages of every queue of a database in one hash, and any
    # worker hands them out again after its own visibility timeout: the other workers of
    # db 13 (3 s) would redeliver this task while it waits for the wallet. Its broker is a
    # database of its own.
    backend = SHARED.with_broker(with_db(SHARED.broker_url, 15))
    late_wallet = Wallet(free_port(), tmp_dir / "late-wallet.sqlite3", backend)
    # A task retries a transient failure inside its budget (half the visibility timeout,
    # 60 s here), so this one outlasts the wallet's late start without the sweeper.
    worker = Worker(
        late_wallet.addr,
        tmp_dir / "late-worker.log",
        backend,
        extra_env={"KISHPA_VISIBILITY_TIMEOUT": "120"},
    ).start(concurrency=2)
    try:
        table, players = tables.new()
        record = round_record(players)
        ref = tables.write_phase(table, 1, "start", record)
        result = _send(worker.sender(), ref)
        assert worker.process is not None
        process = worker.process
        # The worker has tried, and met the missing wallet, before the wallet starts.
        wait_for(lambda: '"transient": true' in process.output(), 60, "a transient failure")
        assert tables.settled(ref) is None  # the wallet is down: nothing settled yet
        late_wallet.start(tmp_dir / "late-wallet.log")
        assert result.get(timeout=90)["outcome"] == "settled"
        expected = _expected_balances(players, START[len(players)])
        assert _wallet_balances(late_wallet.client(), players) == expected
        assert worker.process is not None
        assert '"transient": true' in worker.process.output()
        assert 'kishpa_settlements_total{outcome="retry",phase="start"}' in worker.metrics()
    finally:
        worker.stop()
        if late_wallet.process is not None:
            late_wallet.process.stop()


def test_a_worker_killed_mid_run_loses_nothing_and_doubles_nothing(
    wallet: Wallet, tmp_dir: Path, tables: Tables
) -> None:
    log = tmp_dir / "killed-worker.log"
    first = Worker(wallet.addr, log, SHARED).start(concurrency=2)
    rounds: list[tuple[PhaseRef, list[str], dict[str, Any]]] = []
    for _ in range(120):
        table, players = tables.new(2)
        record = round_record(players)
        rounds.append((tables.write_phase(table, 1, "start", record), players, record))
    sender = first.sender()
    for ref, _, _ in rounds:
        _send(sender, ref)

    def settled_count() -> int:
        return sum(1 for ref, _, _ in rounds if tables.settled(ref) is not None)

    wait_for(lambda: settled_count() >= 5, 60, "the first settlements")
    assert first.process is not None
    first.process.kill9()
    at_kill = settled_count()
    assert at_kill < len(rounds), "the worker finished before it was killed; kill earlier"

    # A new worker on the same queue: unacked messages come back after the visibility timeout
    # (3 s here). A message the killed worker had popped but not yet recorded as unacked is
    # gone from the broker (kombu's Redis transport has that window): the sweeper, running
    # here as in production, finds its phase unsettled after the deadline.
    second = Worker(
        wallet.addr,
        log,
        SHARED,
        queue=first.queue,
        extra_env={
            "DATABASE_URL": wallet.url,
            "KISHPA_SWEEP_INTERVAL": "1",
            "KISHPA_SETTLE_DEADLINE": "20",
        },
        extra_args=["--beat"],
    ).start(concurrency=2)
    try:
        wait_for(lambda: settled_count() == len(rounds), 90, "every phase to be settled")
    except AssertionError:
        # What the broker holds (not the state Redis: a cluster under --redis-cluster), to
        # tell a lost message from a slow one.
        c = redis.Redis.from_url(SHARED.broker_url)
        print(f"settled at kill {at_kill}, now {settled_count()}; queue {c.llen(first.queue)}")
        print(f"unacked {c.hlen('unacked')}, mutex ttl {c.ttl('unacked_mutex')}")
        c.close()
        raise
    finally:
        second.stop()

    client = wallet.client()
    for ref, players, _record in rounds:
        assert _wallet_balances(client, players) == _expected_balances(players, START[len(players)])
        assert len(tables.settled_events(ref.table_id)) == 1
    assert _reconcile(wallet.url) == []


def test_the_sweeper_settles_a_phase_whose_task_was_lost_and_reconciliation_alerts(
    tmp_dir: Path, tables: Tables
) -> None:
    own_wallet = Wallet(free_port(), tmp_dir / "sweep-wallet.sqlite3", SHARED).start(
        tmp_dir / "sweep-wallet.log"
    )
    worker = Worker(
        own_wallet.addr,
        tmp_dir / "sweep-worker.log",
        SHARED,
        extra_env={
            "DATABASE_URL": own_wallet.url,
            "KISHPA_SWEEP_INTERVAL": "1",
            "KISHPA_SETTLE_DEADLINE": "2",
            "KISHPA_RECONCILE_INTERVAL": "1",
        },
        extra_args=["--beat"],
    )
    try:
        table, players = tables.new()
        record = round_record(players)
        # Written to the outbox, never enqueued: as if the table service died right after.
        ref = tables.write_phase(table, 1, "start", record, age_ms=3000)
        worker.start(concurrency=2)
        wait_for(lambda: tables.settled(ref) is not None, 30, "the sweeper to settle the phase")
        expected = _expected_balances(players, START[len(players)])
        assert _wallet_balances(own_wallet.client(), players) == expected
        wait_for(
            lambda: 'kishpa_wallet_reconciliations_total{result="clean"}' in worker.metrics(),
            20,
            "a clean reconciliation",
        )
        assert "kishpa_sweeper_reenqueued_total 1.0" in worker.metrics()
        # Each sweep measures the lag (db 13 is shared with other runs: values not asserted).
        metrics = worker.metrics()
        for gauge in ("oldest_unsettled_seconds", "unsettled_phases", "stalled_tables"):
            assert f"\nkishpa_settlement_{gauge} " in metrics
        assert "kishpa_settlement_last_sweep_timestamp_seconds 1." in metrics

        # Break the ledger behind the wallet's back: the next reconciliation must alert.
        with sqlite3.connect(own_wallet.database) as db:
            db.execute(
                "UPDATE accounts SET balance = balance + 7 WHERE id = ?", (f"player:{players[0]}",)
            )
        wait_for(
            lambda: "kishpa_wallet_reconciliation_discrepancies 0.0" not in worker.metrics(),
            20,
            "the reconciliation to find the discrepancy",
        )
        assert worker.process is not None
        assert '"event": "wallet_reconciliation_failed"' in worker.process.output()
    finally:
        worker.stop()
        assert own_wallet.process is not None
        own_wallet.process.stop()


def test_rabbitmq_works_as_the_broker(wallet: Wallet, tmp_dir: Path, tables: Tables) -> None:
    worker = Worker(wallet.addr, tmp_dir / "rabbit-worker.log", SHARED.with_broker(RABBITMQ_URL))
    worker.start(concurrency=2)
    sender = worker.sender()
    try:
        table, players = tables.new()
        record = round_record(players)
        for phase in ("start", "end"):
            ref = tables.write_phase(table, 1, phase, record)
            outcomes = sorted(_send(sender, ref).get(timeout=30)["outcome"] for _ in range(2))
            assert outcomes == ["already_settled", "settled"]
        expected = _expected_balances(players, START[len(players)], END[len(players)])
        assert _wallet_balances(wallet.client(), players) == expected
    finally:
        worker.stop()
        with sender.connection_for_write() as connection:
            connection.default_channel.queue_delete(worker.queue)
            connection.default_channel.exchange_delete(worker.queue)


def test_an_archive_holding_other_facts_for_the_phase_dead_letters_it_unsettled(
    worker: Worker, tmp_dir: Path, tables: Tables
) -> None:
    """Two different truths about one phase are a bug to look at: the phase is not marked
    settled (so Redis keeps it) and goes to the dead-letter list as ARCHIVE_CONFLICT."""
    table, players = tables.new()
    ref = tables.write_phase(table, 1, "start", round_record(players))
    record = parse_phase_record(tables.client.hget(keys.outbox(table), ref.field) or b"")
    # The worker's archive: its default, the embedded SQLite file it created at start.
    store = ArchiveStore(
        create_archive_engine(f"sqlite:///{tmp_dir / 'var' / 'kishpa-wallet.sqlite3'}")
    )
    try:
        store.write_phase(
            PhaseRow(table, 1, "start", record.created_ms, "kishpa", "not-the-batch", ()), now_ms=1
        )
        outcome = _send(worker.sender(), ref).get(timeout=30)
    finally:
        store.engine.dispose()
    assert outcome["outcome"] == "dead_letter"
    assert "ARCHIVE_CONFLICT" in outcome["reason"]
    assert tables.settled(ref) is None
    (dead,) = [d for d in list_dead_letters(tables.client, limit=10_000) if d.table_id == table]
    assert "ARCHIVE_CONFLICT" in dead.reason
