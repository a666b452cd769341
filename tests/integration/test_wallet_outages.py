"""Settlement waits out the wallet's database and the wallet service going away.

Real processes: ``kishpa serve wallet`` on a PostgreSQL database of the test's own, reached
through a TCP proxy the test cuts (the machine's PostgreSQL is shared: stopping it would
harm the others; cutting every connection of the wallet to it is the same fault as seen
from the wallet), ``kishpa worker --beat`` with the shipped timeouts, a redis-server of the
test's own. Phases are written as the table service writes them (outbox record + unsettled
index) and enqueued, while the database is away.

- Database cut for ``OUTAGE_S`` (5 s in ``make test``; ``KISHPA_FULL_OUTAGES=1``: the
  issue's 30 s): no phase is dead-lettered, every phase is settled within 10 s of the
  database's return, exactly once (balances from the rules, one ``settled`` event each,
  the ledger reconciles).
- Tables keep playing through the same outage: real ``kishpa serve table`` and
  ``kishpa serve matchmaking`` processes and ``kishpa bots``; while the database is away
  rounds end and new rounds are dealt, settlement waits (their phases stay unsettled, none
  dead-lettered), and every phase written before the database's return is settled within
  10 s of it; every table finishes, each phase settled exactly once.
- A slow worker → wallet link (0.5 s each way): the phase is settled once, and the
  worker's ``kishpa_settlement_latency_seconds`` histogram shows the added latency.
- The wallet SIGKILLed mid-batch (its answer in flight: the worker's link to it is slow)
  and started again: the batch is applied once, the phase settled once.
"""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import redis
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from devkit.phase_samples import phase_entry, round_record
from services.wallet.database import temporary_postgres_database
from services.wallet.migrate import upgrade
from shared import keys, stream
from shared.phase_record import PhaseRef, parse_phase_record
from tests.conftest import TEST_DATABASE_URL
from tests.integration.fault_proxy import FaultProxy
from tests.integration.workers_support import (
    KISHPA,
    STARTING_TOKENS,
    Backend,
    Process,
    RedisServer,
    TableHistory,
    Worker,
    free_port,
    now_ms,
    port_open,
    wait_for,
)
from tests.reference_settlement import add_movements, kishpa_movements
from workers.deadletter import list_dead_letters
from workers.outbox import index_unsettled

pytestmark = [pytest.mark.integration, pytest.mark.slow]

OUTAGE_S = 30.0 if os.environ.get("KISHPA_FULL_OUTAGES") == "1" else 5.0
CAUGHT_UP_S = 10.0
BOT_ROUNDS = 30 if OUTAGE_S >= 30 else 6
"""Enough rounds that the bots still play after the cut (a round took 1-2 s here)."""
PHASES = [(1, "start"), (1, "end"), (2, "start"), (2, "end")]


@dataclass
class Table:
    table_id: str
    players: list[str]
    records: dict[int, dict[str, Any]] = field(default_factory=dict)
    written: list[tuple[int, str]] = field(default_factory=list)


@dataclass
class Rig:
    tmp: Path
    redis: RedisServer
    db_url: str
    db_link: FaultProxy
    wallet_port: int
    wallet_link: FaultProxy
    wallet: Process
    worker: Worker

    def start_wallet(self) -> None:
        self.wallet.start()
        wait_for(lambda: port_open(self.wallet_port), 60, "the wallet to listen")


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    tmp = tmp_path_factory.mktemp("wallet-outages")
    with temporary_postgres_database(TEST_DATABASE_URL) as db_url:
        upgrade(db_url)
        url = make_url(db_url)
        db_link = FaultProxy(int(url.port or 5432), target_host=str(url.host)).start()
        proxied = url.set(host="127.0.0.1", port=db_link.port)
        server = RedisServer(tmp / "redis").start()
        backend = Backend(server.url, server.url)
        wallet_port = free_port()
        wallet_link = FaultProxy(wallet_port).start()
        env = backend.env(
            DATABASE_URL=proxied.render_as_string(hide_password=False),
            KISHPA_GRPC_PORT=str(wallet_port),
            KISHPA_GRPC_HOST="127.0.0.1",
            KISHPA_METRICS_PORT=str(free_port()),
        )
        wallet = Process("wallet", [KISHPA, "serve", "wallet"], env, tmp / "wallet.log")
        worker = Worker(
            wallet_link.addr,
            tmp / "worker.log",
            backend,
            extra_env={"KISHPA_LOG_LEVEL": "INFO"},
            extra_args=["--beat"],
        )
        rig = Rig(tmp, server, db_url, db_link, wallet_port, wallet_link, wallet, worker)
        try:
            rig.start_wallet()
            worker.start()
            yield rig
        finally:
            worker.stop()
            wallet.stop()
            wallet_link.stop()
            db_link.stop()
            server.stop()


def _write_and_send(rig: Rig, client: redis.Redis, table: Table) -> PhaseRef:
    round_no, phase = PHASES[len(table.written)]
    record = table.records.setdefault(round_no, round_record(table.players))
    created = now_ms()
    entry = phase_entry(table.table_id, round_no, phase, record, created)
    client.hset(keys.outbox(table.table_id), keys.phase_field(round_no, phase), entry)
    index_unsettled(client, table.table_id, created)
    table.written.append((round_no, phase))
    rig.worker.sender().send_task(
        "kishpa.settle_phase",
        kwargs={"table_id": table.table_id, "round_no": round_no, "phase": phase},
        queue=rig.worker.queue,
    )
    return PhaseRef(table.table_id, round_no, phase)


def _unsettled(client: redis.Redis, tables: list[Table]) -> int:
    count = 0
    for table in tables:
        settled = {f.decode() for f in client.hkeys(keys.settled(table.table_id))}
        count += sum(keys.phase_field(r, p) not in settled for r, p in table.written)
    return count


def _check_exactly_once(rig: Rig, client: redis.Redis, tables: list[Table]) -> None:
    engine = create_engine(rig.db_url)
    try:
        with engine.connect() as db:
            for table in tables:
                expected = dict.fromkeys(table.players, STARTING_TOKENS)
                for round_no, phase in table.written:
                    record = table.records[round_no]
                    moves = kishpa_movements(phase, record)  # the reference, not the rules engine
                    for account, change in moves.items():
                        if account in expected:
                            expected[account] += change
                for player in table.players:
                    balance = db.execute(
                        text("SELECT balance FROM accounts WHERE id = :id"),
                        {"id": f"player:{player}"},
                    ).scalar_one()
                    assert balance == expected[player], (table.table_id, player)
                events = [stream.decode(f) for _, f in client.xrange(keys.events(table.table_id))]
                assert sum(e.type == "settled" for e in events) == len(table.written)
    finally:
        engine.dispose()
    from services.wallet.reconcile import reconcile_url

    assert list(reconcile_url(rig.db_url).discrepancies) == []


def _tables(n: int) -> list[Table]:
    ids = [f"wo-{uuid.uuid4().hex[:10]}" for _ in range(n)]
    return [Table(t, [f"{t}-p{i}" for i in (1, 2)]) for t in ids]


def test_a_database_outage_dead_letters_nothing_and_settlement_catches_up(rig: Rig) -> None:
    client = rig.redis.client()
    tables = _tables(2)
    for table in tables:  # wallets opened, first phases settled with the database up
        _write_and_send(rig, client, table)
    wait_for(lambda: _unsettled(client, tables) == 0, 60, "the first phases to settle")

    rig.db_link.cut()
    cut_at = time.monotonic()
    for _ in range(2):  # tables go on playing: two more phases each, while it is away
        for table in tables:
            _write_and_send(rig, client, table)
    while time.monotonic() - cut_at < OUTAGE_S:
        assert list_dead_letters(client, limit=10) == []
        time.sleep(0.5)
    assert _unsettled(client, tables) == 4  # nothing could settle without the database
    rig.db_link.restore()
    back = time.monotonic()
    wait_for(lambda: _unsettled(client, tables) == 0, 60, "settlement to catch up")
    caught_up = time.monotonic() - back
    print(f"\ndatabase away {OUTAGE_S:.0f}s; settled {caught_up:.1f}s after its return")
    assert caught_up <= CAUGHT_UP_S
    assert list_dead_letters(client, limit=10) == []
    _check_exactly_once(rig, client, tables)
    assert rig.worker.process is not None
    assert rig.worker.process.alive()


@pytest.fixture(scope="module")
def play(rig: Rig) -> Iterator[dict[str, str]]:
    """The table and matchmaking services on the rig's Redis and worker queue; yields the
    environment ``kishpa bots`` needs to reach them."""
    ports = {"table": free_port(), "matchmaking": free_port()}
    env = rig.worker.backend.env(
        KISHPA_WORKER_QUEUE=rig.worker.queue,
        KISHPA_WALLET_ADDR=f"127.0.0.1:{rig.wallet_port}",
        KISHPA_TABLE_ADDR=f"127.0.0.1:{ports['table']}",
        KISHPA_MATCHMAKING_ADDR=f"127.0.0.1:{ports['matchmaking']}",
        KISHPA_LOG_LEVEL="WARNING",
    )
    processes: list[Process] = []
    try:
        for name, port in ports.items():  # both start at once: half the wait
            child = dict(
                env,
                KISHPA_GRPC_PORT=str(port),
                KISHPA_GRPC_HOST="127.0.0.1",
                KISHPA_METRICS_PORT=str(free_port()),
            )
            log = rig.tmp / f"{name}.log"
            processes.append(Process(name, [KISHPA, "serve", name], child, log).start())
        for name, port in ports.items():
            wait_for(lambda p=port: port_open(p), 60, f"{name} to listen")  # type: ignore[misc]
        yield env
    finally:
        for process in reversed(processes):
            process.stop()


def _phases(history: TableHistory, tables: list[str]) -> dict[tuple[str, str], int]:
    """Every phase the tables wrote: (table, field) -> when it was written (ms). From the
    history: a settled round's records leave Redis as the tables play on."""
    return {k: parse_phase_record(raw).created_ms for k, raw in history.records(tables).items()}


def _settled(history: TableHistory, tables: list[str]) -> set[tuple[str, str]]:
    """The phases whose ``settled`` event was published (with the mark, in one script)."""
    return set(history.settled(tables))


def _events_since(client: redis.Redis, tables: list[str], since_ms: int) -> list[str]:
    """The round events of every table after ``since_ms``, oldest first per table."""
    return [
        fields[b"type"].decode()
        for table in tables
        for _, fields in client.xrange(keys.events(table), min=f"{since_ms}-0")
        if fields.get(b"type") in (b"round_started", b"round_ended")
    ]


def test_tables_keep_playing_through_a_database_outage(rig: Rig, play: dict[str, str]) -> None:
    client = rig.redis.client()
    earlier = set(client.scan_iter(match=keys.outbox_pattern()))
    history = TableHistory(client).start()
    bots = subprocess.Popen(
        [
            KISHPA, "bots", "--tables", "2", "--rounds", str(BOT_ROUNDS), "--turn-seconds",
            "10", "--reveal-seconds", "1", "--pause-ms", "500", "--timeout", "300",
        ],
        env=play,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )  # fmt: skip
    try:
        tables: list[str] = []

        def playing() -> bool:
            found = set(client.scan_iter(match=keys.outbox_pattern())) - earlier
            tables[:] = sorted(k.decode().split("{", 1)[1].rsplit("}", 1)[0] for k in found)
            return len(tables) == 2 and bool(_settled(history, tables))

        # Logins opened the wallets and settlement runs: now take the database away.
        wait_for(playing, 60, "both tables to play and a first phase to settle")
        rig.db_link.cut()
        cut_ms, cut_at = now_ms(), time.monotonic()
        while time.monotonic() - cut_at < OUTAGE_S:
            assert bots.poll() is None, bots.communicate()[0][-3000:]
            assert list_dead_letters(client, limit=10) == []
            time.sleep(0.5)
        during = _events_since(client, tables, cut_ms)
        waiting = {p for p, at in _phases(history, tables).items() if at >= cut_ms}
        waiting -= _settled(history, tables)
        rig.db_link.restore()
        back_ms, back = now_ms(), time.monotonic()
        # The tables played on: a round ended and a next one was dealt while it was away.
        assert "round_ended" in during, during
        assert "round_started" in during[during.index("round_ended") :], during
        assert waiting, "no phase waited for the database"
        written_before = {p for p, at in _phases(history, tables).items() if at < back_ms}
        wait_for(lambda: written_before <= _settled(history, tables), 60, "settlement to catch up")
        caught_up = time.monotonic() - back
        out, _ = bots.communicate(timeout=300)
    finally:
        if bots.poll() is None:
            bots.kill()
            bots.communicate()
    print(
        f"\ndatabase away {OUTAGE_S:.0f}s while 2 tables played: {during.count('round_ended')} "
        f"rounds ended, {during.count('round_started')} dealt, {len(waiting)} phases waited; "
        f"settled {caught_up:.1f}s after its return"
    )
    assert caught_up <= CAUGHT_UP_S
    assert bots.returncode == 0, out[-3000:]
    assert "2 / 2" in out
    wait_for(lambda: set(_phases(history, tables)) <= _settled(history, tables), 60, "all settled")
    history.stop()
    assert list_dead_letters(client, limit=10) == []
    _check_played_exactly_once(rig, history, tables)


def _check_played_exactly_once(rig: Rig, history: TableHistory, tables: list[str]) -> None:
    """Balances are what the reference says each phase moves, applied once; one `settled`
    event per phase; the ledger reconciles."""
    engine = create_engine(rig.db_url)
    try:
        with engine.connect() as db:
            for table in tables:
                outbox = {f: raw for (_, f), raw in history.records([table]).items()}
                expected: dict[str, int] = {}
                for raw in outbox.values():
                    record = parse_phase_record(raw)
                    add_movements(expected, kishpa_movements(record.phase, record.record))
                players = parse_phase_record(next(iter(outbox.values()))).record["players"]
                for player in players:
                    balance = db.execute(
                        text("SELECT balance FROM accounts WHERE id = :id"),
                        {"id": f"player:{player}"},
                    ).scalar_one()
                    assert balance == STARTING_TOKENS + expected.get(player, 0), (table, player)
                settled = [f for _, f in history.settled([table])]
                assert sorted(settled) == sorted(outbox)  # one `settled` event per phase
    finally:
        engine.dispose()
    from services.wallet.reconcile import reconcile_url

    assert list(reconcile_url(rig.db_url).discrepancies) == []


def test_the_wallet_killed_mid_batch_applies_it_once(rig: Rig) -> None:
    client = rig.redis.client()
    tables = _tables(1)
    _write_and_send(rig, client, tables[0])
    wait_for(lambda: _unsettled(client, tables) == 0, 60, "the first phase to settle")
    engine = create_engine(rig.db_url)
    rig.wallet_link.latency_s = 0.5  # the batch's answer is on its way for a while
    try:

        def batches() -> int:
            with engine.connect() as db:
                return int(db.execute(text("SELECT count(*) FROM batches")).scalar_one())

        before = batches()
        _write_and_send(rig, client, tables[0])
        wait_for(lambda: batches() > before, 30, "the batch to be committed")
        assert _unsettled(client, tables) == 1  # applied, not yet marked settled
        rig.wallet.kill9()
        rig.wallet_link.latency_s = 0.0
        time.sleep(1.0)  # a pod's restart is not instantaneous either
        rig.start_wallet()
        wait_for(lambda: _unsettled(client, tables) == 0, 60, "the phase to settle")
        assert batches() == before + 1  # the retry was answered from the first batch
    finally:
        rig.wallet_link.latency_s = 0.0
        engine.dispose()
    assert list_dead_letters(client, limit=10) == []
    _check_exactly_once(rig, client, tables)


def _settlement_latency(metrics: str, le: str) -> float:
    """Phases the worker settled within ``le`` seconds (``+Inf``: all), from its /metrics."""
    name = f'kishpa_settlement_latency_seconds_bucket{{le="{le}"}} '
    lines = [line for line in metrics.splitlines() if line.startswith(name)]
    return float(lines[0].split()[-1]) if lines else 0.0


def test_a_slow_wallet_link_shows_in_the_settlement_latency(rig: Rig) -> None:
    client = rig.redis.client()
    tables = _tables(1)
    _write_and_send(rig, client, tables[0])  # wallets opened, connections up
    wait_for(lambda: _unsettled(client, tables) == 0, 60, "the first phase to settle")
    before = rig.worker.metrics()
    settled, fast = _settlement_latency(before, "+Inf"), _settlement_latency(before, "1.0")
    rig.wallet_link.latency_s = 0.5  # each way: every wallet call takes at least 1 s
    try:
        _write_and_send(rig, client, tables[0])
        wait_for(lambda: _unsettled(client, tables) == 0, 60, "the phase to settle")
    finally:
        rig.wallet_link.latency_s = 0.0
    after = rig.worker.metrics()
    assert _settlement_latency(after, "+Inf") == settled + 1
    assert _settlement_latency(after, "1.0") == fast  # observed above 1 s
    assert list_dead_letters(client, limit=10) == []
    _check_exactly_once(rig, client, tables)
