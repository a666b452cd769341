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
- The wallet SIGKILLed mid-batch (its answer in flight: the worker's link to it is slow)
  and started again: the batch is applied once, the phase settled once.
"""

from __future__ import annotations

import os
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
from shared.phase_record import PhaseRef
from tests.conftest import TEST_DATABASE_URL
from tests.integration.fault_proxy import FaultProxy
from tests.integration.workers_support import (
    KISHPA,
    STARTING_TOKENS,
    Backend,
    Process,
    RedisServer,
    Worker,
    free_port,
    now_ms,
    port_open,
    wait_for,
)
from tests.reference_settlement import kishpa_movements
from workers.deadletter import list_dead_letters
from workers.outbox import index_unsettled

pytestmark = [pytest.mark.integration, pytest.mark.slow]

OUTAGE_S = 30.0 if os.environ.get("KISHPA_FULL_OUTAGES") == "1" else 5.0
CAUGHT_UP_S = 10.0
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
