"""Settlement under worker kills: bot tables play through the real services while the only
settlement worker is SIGKILLed every few seconds and started again, as Kubernetes restarts
a pod. Every phase must be settled exactly once, and soon after a worker is back up.

Real processes throughout: a redis-server of the test's own (free port, AOF in a temp dir),
``kishpa serve wallet`` (SQLite), ``kishpa serve table`` and ``kishpa serve matchmaking``,
``kishpa beat`` (the sweeper's schedule), ``kishpa worker`` (killed and restarted) and
``kishpa bots``. The workers run with the shipped defaults (visibility timeout, deadline,
sweep interval). Expected balances come from the tests' settlement reference
(``tests/reference_settlement.py``) applied to the outbox records, not from the workers nor
the production posting functions.

Under ``pytest --redis-cluster`` the stack runs on a 3-master Redis Cluster of the module's
own (it kills a master), with the Celery broker on a redis-server of its own beside it.
"""

from __future__ import annotations

import random
import secrets
import statistics
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from archive.database import create_archive_engine
from archive.schema import rounds
from archive.store import ArchiveStore
from shared import keys
from tests.integration.workers_support import (
    KISHPA,
    Backend,
    ClusterServer,
    Process,
    RedisServer,
    TableHistory,
    Wallet,
    Worker,
    free_port,
    now_ms,
    port_open,
    wait_for,
)
from tests.reference_settlement import add_movements, kishpa_movements
from workers.outbox import parse_phase_record

pytestmark = [pytest.mark.integration, pytest.mark.slow]

STARTING_TOKENS = 2000
LAG_AFTER_UP_LIMIT_S = 10.0
"""Every phase settles within this much worker-up time after it was written (the issue's
figure; the test reports the measured distribution)."""
SHIPPED_DEFAULTS = {
    "KISHPA_VISIBILITY_TIMEOUT": "10",
    "KISHPA_SETTLE_DEADLINE": "5",
    "KISHPA_SWEEP_INTERVAL": "2",
}


@dataclass
class Stack:
    """The services and the queue the bots' tables are settled through."""

    redis: RedisServer | ClusterServer
    backend: Backend
    wallet: Wallet
    queue: str
    env: dict[str, str]
    tmp: Path


@pytest.fixture(scope="module")
def stack(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[Stack]:
    tmp = tmp_path_factory.mktemp("chaos")
    servers: list[RedisServer | ClusterServer] = []
    processes: list[Process] = []
    wallet: Wallet | None = None
    try:
        if request.config.getoption("--redis-cluster"):
            # Celery's Redis transport does not speak Cluster: the broker is a node beside it.
            broker = RedisServer(tmp / "broker", appendonly=False).start()
            servers += [broker, ClusterServer().start()]
            backend = Backend(servers[-1].url, broker.url)
        else:
            servers.append(RedisServer(tmp / "redis").start())
            backend = Backend(servers[-1].url, servers[-1].url)
        wallet = Wallet(free_port(), tmp / "wallet.sqlite3", backend)
        queue = f"chaos-{uuid.uuid4().hex[:8]}"
        wallet.start(tmp / "wallet.log")
        ports = {"table": free_port(), "matchmaking": free_port()}
        env = backend.env(
            KISHPA_TOKEN_SECRET=secrets.token_urlsafe(48),
            KISHPA_WORKER_QUEUE=queue,
            KISHPA_WALLET_ADDR=wallet.addr,
            KISHPA_TABLE_ADDR=f"127.0.0.1:{ports['table']}",
            KISHPA_MATCHMAKING_ADDR=f"127.0.0.1:{ports['matchmaking']}",
            KISHPA_LOG_LEVEL="WARNING",
            **SHIPPED_DEFAULTS,
        )
        for name, port in ports.items():
            child = dict(
                env,
                KISHPA_GRPC_PORT=str(port),
                KISHPA_GRPC_HOST="127.0.0.1",
                KISHPA_METRICS_PORT=str(free_port()),
            )
            process = Process(name, [KISHPA, "serve", name], child, tmp / f"{name}.log").start()
            processes.append(process)
            wait_for(lambda p=port: port_open(p), 30, f"{name} to listen")  # type: ignore[misc]
        beat = dict(env, KISHPA_LOG_LEVEL="INFO")
        processes.append(Process("beat", [KISHPA, "beat"], beat, tmp / "beat.log").start())
        yield Stack(servers[-1], backend, wallet, queue, env, tmp)
    finally:
        for process in reversed(processes):
            process.stop()
        if wallet is not None and wallet.process is not None:
            wallet.process.stop()
        for server in servers:
            server.stop()


def _worker(stack: Stack, log: str = "worker.log") -> Worker:
    return Worker(
        stack.wallet.addr,
        stack.tmp / log,
        stack.backend,
        queue=stack.queue,
        extra_env={**SHIPPED_DEFAULTS, "DATABASE_URL": stack.wallet.url},
    )


@dataclass
class PhaseOutcome:
    table_id: str
    field: str
    created_ms: int
    settled_ms: int


def _up_time_ms(start: int, end: int, up: list[tuple[int, int]]) -> int:
    """How long a worker was ready between ``start`` and ``end`` (ms)."""
    return sum(max(0, min(end, b) - max(start, a)) for a, b in up)


def _distribution(values: list[float]) -> str:
    ordered = sorted(values)
    p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
    return (
        f"n={len(ordered)} p50={statistics.median(ordered):.2f}s p99={p99:.2f}s "
        f"max={ordered[-1]:.2f}s"
    )


def _assert_archived_once(
    url: str, table: str, outbox: dict[str, bytes], settled: dict[str, Any]
) -> None:
    """The round archive (the worker's default: the wallet's own database) holds each ended
    round of the table exactly once, with the batches Redis says settled it and the nets
    the settlement reference computes, however the kills fell."""
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(
                sa.select(rounds.c.round_no, sa.func.count())
                .where(rounds.c.table_id == table)
                .group_by(rounds.c.round_no)
            ).all()
    finally:
        engine.dispose()
    ended = sorted(int(f.split(":")[0]) for f in outbox if f.endswith(":end"))
    assert sorted((r, n) for r, n in rows) == [(r, 1) for r in ended], table
    store = ArchiveStore(create_archive_engine(url))
    try:
        for round_no in ended:
            row = store.round(table, round_no)
            assert row is not None
            fields = [f"{round_no}:start", f"{round_no}:end"]
            assert row.batch_ids == tuple(
                settled[f]["batch_id"] for f in fields if settled[f]["batch_id"]
            )
            net: dict[str, int] = {}
            for field_name in fields:
                record = parse_phase_record(outbox[field_name])
                add_movements(net, kishpa_movements(record.phase, record.record))
            assert row.results == {p: net.get(p, 0) for p in row.players}, (table, round_no)
    finally:
        store.engine.dispose()


def test_bot_tables_settle_every_phase_exactly_once_soon_after_each_worker_restart(
    stack: Stack,
) -> None:
    client = stack.redis.client()
    history = TableHistory(client).start()  # the whole games: settled rounds leave Redis
    rng = random.Random(12)
    bots = subprocess.Popen(
        [
            KISHPA, "bots", "--tables", "6", "--rounds", "4", "--turn-seconds", "10",
            "--reveal-seconds", "1", "--pause-ms", "300", "--timeout", "240",
        ],
        env=stack.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )  # fmt: skip
    worker = _worker(stack).start()
    up: list[tuple[int, int]] = []  # (ready, killed) intervals of a ready worker
    kills = kills_in_play = 0
    try:
        # Kill the worker every 1.5-4 s of its life while the bots play, then once more
        # right after the last table closed (its final phases are in flight then); at least
        # twice, however fast the tables played.
        while True:
            deadline = time.monotonic() + rng.uniform(1.5, 4.0)
            while time.monotonic() < deadline and bots.poll() is None:
                time.sleep(0.05)
            assert worker.process is not None
            kills_in_play += bots.poll() is None
            worker.process.kill9()
            killed = now_ms()
            up.append((worker.ready_ms, killed))
            kills += 1
            time.sleep(0.5)  # a pod's restart is not instantaneous either
            worker.start()
            if bots.poll() is not None and kills >= 2:
                break
        out, _ = bots.communicate(timeout=60)
        assert bots.returncode == 0, out[-3000:]
        assert "6 / 6" in out

        tables = sorted({t for t, _ in history.records()})
        assert len(tables) == 6

        def unsettled() -> int:
            return len(set(history.records(tables)) - set(history.settled(tables)))

        wait_for(lambda: unsettled() == 0, 60, "every phase to be settled")
        up.append((worker.ready_ms, now_ms()))
    finally:
        if bots.poll() is None:
            bots.kill()
            bots.wait()
        worker.stop()

    history.stop()
    outcomes: list[PhaseOutcome] = []
    wallet = stack.wallet.client()
    settled_at = history.settled_ms()
    for table in tables:
        # The whole game, as it was written (a settled round's records leave Redis).
        outbox = {f: raw for (_, f), raw in history.records([table]).items()}
        settled_events = [f for _, f in history.settled([table])]
        # Exactly once: one `settled` event per phase, and the wallet's balances are what
        # the rules say each phase moves, applied once.
        assert sorted(settled_events) == sorted(outbox), table
        expected: dict[str, int] = {}
        for field_name, raw in outbox.items():
            record = parse_phase_record(raw)
            add_movements(expected, kishpa_movements(record.phase, record.record))
            outcomes.append(
                PhaseOutcome(table, field_name, record.created_ms, settled_at[(table, field_name)])
            )
        players = parse_phase_record(next(iter(outbox.values()))).record["players"]
        for player in players:
            balance = wallet.balance(f"player:{player}")
            assert balance == STARTING_TOKENS + expected.get(player, 0), (table, player)
        assert wallet.balance(f"bowl:{table}") == expected.get("bowl", 0)
        _assert_archived_once(stack.wallet.url, table, outbox, history.settled_data(table))
    from services.wallet.reconcile import reconcile_url

    assert list(reconcile_url(stack.wallet.url).discrepancies) == []

    lags = [(o.settled_ms - o.created_ms) / 1000 for o in outcomes]
    up_lags = [_up_time_ms(o.created_ms, o.settled_ms, up) / 1000 for o in outcomes]
    print(f"\nworker kills: {kills}; phases: {len(outcomes)}")
    print(f"lag (written -> settled):            {_distribution(lags)}")
    print(f"lag counting worker-up time only:    {_distribution(up_lags)}")
    # At least one kill while the tables played (a quiet machine plays 6 tables x 4 rounds
    # in a few seconds: the CI once saw the bots done before the second kill).
    assert kills_in_play >= 1
    assert max(up_lags) <= LAG_AFTER_UP_LIMIT_S, sorted(up_lags)[-5:]
    log = (stack.tmp / "worker.log").read_text()
    assert "EarlierPhaseUnsettled" not in log
    assert "Traceback" not in log
    assert not [line for line in log.splitlines() if '"level": "error"' in line]


def test_a_round_end_seen_by_players_survives_a_redis_sigkill_and_is_settled(
    stack: Stack,
) -> None:
    # The Redis of this stack runs as shipped for the embedded server: AOF, appendfsync
    # always (its 7.0 has no WAITAOF). A player is told a round ended by the reply to the
    # action that ended it, or by the `round_ended` event: the test SIGKILLs Redis the moment
    # it reads that event (the same instant the acting player's reply leaves Redis). The
    # worker runs throughout, as in production: it rides out the kill and the restart.
    client = stack.redis.client()
    worker = _worker(stack, "worker-redis-kill.log").start()
    # The tables of the test before are settled already: follow only the new one's events.
    earlier = set(client.scan_iter(match=keys.events("*"), _type="stream"))
    bots = subprocess.Popen(
        [
            KISHPA, "bots", "--tables", "1", "--rounds", "2", "--turn-seconds", "10",
            "--reveal-seconds", "1", "--pause-ms", "300", "--timeout", "120",
        ],
        env=stack.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )  # fmt: skip
    seen: tuple[str, int] | None = None
    try:
        events: bytes | None = None
        cursor = b"0-0"
        deadline = time.monotonic() + 120
        while seen is None:
            assert time.monotonic() < deadline, "no round ended"
            assert bots.poll() is None, bots.communicate()[0][-2000:]
            if events is None:
                found = set(client.scan_iter(match=keys.events("*"), _type="stream")) - earlier
                if not found:
                    time.sleep(0.05)
                    continue
                (events,) = found
            replies: Any = client.xread({events: cursor}, block=100)
            for _key, entries in replies or []:
                for entry_id, fields in entries:
                    cursor = entry_id
                    if fields.get(b"type") == b"round_ended" and seen is None:
                        # At once: nothing else runs before the kill. On a cluster, the
                        # master of the table's slot; the others go on.
                        stack.redis.kill_holder(events.decode())
                        table = events.decode().split("{", 1)[1].rsplit("}", 1)[0]
                        seen = (table, int(fields[b"round"]))
        table_id, round_no = seen
        stack.redis.start()  # from its own files, same port: every service reconnects
        field = keys.phase_field(round_no, "end")
        wait_for(
            lambda: client.hget(keys.settled(table_id), field) is not None,
            60,
            f"round {round_no}'s end to be settled after the restart",
        )
        assert client.hget(keys.outbox(table_id), field) is not None
    finally:
        if bots.poll() is None:
            bots.kill()
        bots.communicate()
        worker.stop()
    # Redis going away is a transient failure a task retries, never one that fails (on a
    # cluster: CLUSTERDOWN while the restarted master rejoins). Celery's consumer may say at
    # error level that it cannot reach the broker (on one node, the killed server).
    assert worker.process is not None
    failed = [
        line
        for line in worker.process.output().splitlines()
        if '"logger": "celery.app.trace"' in line or '"event": "settlement_failed"' in line
    ]
    assert not [line for line in failed if '"level": "error"' in line], failed
