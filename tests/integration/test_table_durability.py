"""Durable phase outcomes, exactly as docs/workers.md states them, on redis-server processes
of the test's own (free ports, AOF in temp dirs), SIGKILLed and restarted from their files.

- A commit that writes a phase record is answered only once it is durable: after SIGKILL
  and a restart from the AOF the record, the state and the events are there. The same test
  on a server without AOF loses them: the check can fail.
- With ``KISHPA_REDIS_DURABLE_REPLICAS=1`` a replica holds the commit when it is answered, so
  a failover to it keeps the phase; a barrier that cannot be met answers NOT_DURABLE (the
  commit stands) and so does a replay of it, until it can be met.
- The probe picks the barrier a server supports; ``required`` refuses a server without one.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import subprocess
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from redis.asyncio import Redis

from services.table import durability
from services.table.durability import FSYNC_ALWAYS, NONE, WAITAOF, Durability, NotDurableError
from services.table.store import Snapshot, TableStore, Transition, request_field
from shared import keys
from shared.phase_record import PhaseRecord, parse_phase_record
from shared.stream import TableEvent
from tests.integration.workers_support import KISHPA, RedisServer, base_env, free_port

pytestmark = pytest.mark.integration


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RedisServer]:
    running = RedisServer(tmp_path / "redis", appendfsync="always").start()
    yield running
    running.stop()


@pytest.fixture
async def redis(server: RedisServer) -> AsyncIterator[Redis]:
    client = Redis.from_url(server.url)
    yield client
    await client.aclose()


def _round_end(table_id: str) -> Transition:
    """What the commit that ends round 1 writes: state, a round_ended event, the end record."""
    record = PhaseRecord(table_id, "kishpa", 1, "end", {"players": ["p1", "p2"]}, 7)
    return Transition(
        state={"round": 1, "status": "between_rounds"},
        events=[TableEvent("round_ended", 1, -1, {"winner": "p1"})],
        phases=[record],
        answer=json.dumps({"result": {"won": True}}),
    )


def _create(snapshot: Snapshot) -> Transition:
    return Transition(state={"round": 1, "status": "playing"})


async def _survives_kill9(server: RedisServer, store: TableStore, table_id: str) -> bool:
    """Commit a round end, SIGKILL Redis the moment the commit is answered, restart it from
    its own files: is the end record (and the state and event with it) still there?"""
    await store.transact(table_id, _create, create=True)
    committed = await store.transact(table_id, lambda s: _round_end(table_id), request="p1:r1")
    assert committed.version == 2
    server.kill9()
    server.start()
    after = Redis.from_url(server.url)
    try:
        raw = await after.hget(keys.outbox(table_id), "1:end")
        version = await after.hget(keys.state(table_id), "version")
        events = await after.xrange(keys.events(table_id))
    finally:
        await after.aclose()
    if raw is None:
        assert version in (None, b"1")  # lost together: never half a commit
        return False
    assert parse_phase_record(raw).ref.field == "1:end"
    assert version == b"2"
    assert any(fields.get(b"type") == b"round_ended" for _id, fields in events)
    return True


async def test_a_phase_ending_commit_survives_redis_sigkill_and_restart_from_its_aof(
    server: RedisServer, redis: Redis
) -> None:
    store = TableStore(redis)
    store.durability = await durability.probe(redis)
    assert store.durability.barrier == FSYNC_ALWAYS  # the machine's 7.0 with appendfsync always
    assert await _survives_kill9(server, store, f"t-dur-{uuid.uuid4().hex[:8]}")


async def test_without_an_append_only_file_the_same_kill_loses_the_round_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The control: proves the test above can fail. No AOF, no snapshots: Redis has nothing
    # to restart from, the probe says so, and `required` would refuse to serve.
    server = RedisServer(tmp_path / "bare", appendonly=False).start()
    client = Redis.from_url(server.url)
    try:
        store = TableStore(client)
        store.durability = await durability.probe(client)
        assert store.durability.barrier == NONE
        monkeypatch.setenv(durability.MODE_ENV, "required")
        with pytest.raises(durability.DurabilityRequiredError, match="appendonly no"):
            durability.check_required(store.durability)
        monkeypatch.setenv(durability.MODE_ENV, "auto")  # (`required` refuses the commit)
        assert not await _survives_kill9(server, store, f"t-dur-{uuid.uuid4().hex[:8]}")
    finally:
        await client.aclose()
        server.stop()


def test_the_probe_picks_the_barrier_each_server_supports() -> None:
    assert (
        durability.choose("7.4.1", "yes", "everysec", replicas=0, timeout_ms=1).barrier == WAITAOF
    )
    assert durability.choose("7.2.0", "yes", "always", replicas=1, timeout_ms=1).barrier == WAITAOF
    assert durability.choose("7.0.15", "yes", "always", replicas=0, timeout_ms=1).barrier == (
        FSYNC_ALWAYS
    )
    assert durability.choose("6.2.6", "yes", "everysec", replicas=0, timeout_ms=1).barrier == NONE
    assert durability.choose("7.4.1", "no", "always", replicas=0, timeout_ms=1).barrier == NONE
    assert Durability(WAITAOF, 1, 50).commands() == [("WAITAOF", 1, 1, 50)]
    assert Durability(FSYNC_ALWAYS, 0, 50).commands() == []
    assert Durability(FSYNC_ALWAYS, 2, 50).commands() == [("WAIT", 2, 50)]


async def test_a_replica_holds_the_commit_when_it_is_answered_and_a_failover_keeps_it(
    server: RedisServer, redis: Redis, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    replica = RedisServer(tmp_path / "replica", appendfsync="always").start()
    replica_client = Redis.from_url(replica.url)
    try:
        await replica_client.execute_command("REPLICAOF", "127.0.0.1", str(server.port))
        for _ in range(600):  # the initial sync (a diskless one waits 5 s for more replicas)
            if (await replica_client.info("replication")).get("master_link_status") == "up":
                break
            await asyncio.sleep(0.05)
        store = TableStore(redis)
        monkeypatch.setenv(durability.REPLICAS_ENV, "1")
        store.durability = await durability.probe(redis)
        assert store.durability.commands() == [("WAIT", 1, 2000)]
        table_id = f"t-dur-{uuid.uuid4().hex[:8]}"
        # Every phase-ending commit is on the replica when it is answered.
        await store.transact(table_id, _create, create=True)
        await store.transact(table_id, lambda s: _round_end(table_id), request="p1:r1")
        assert await replica_client.hget(keys.outbox(table_id), "1:end") is not None
        # Failover: the primary dies, the replica is promoted and has the round end.
        server.kill9()
        await replica_client.execute_command("REPLICAOF", "NO", "ONE")
        assert await replica_client.hget(keys.state(table_id), "version") == b"2"
    finally:
        await replica_client.aclose()
        replica.stop()


async def test_a_barrier_that_cannot_be_met_answers_not_durable_and_so_does_its_replay(
    redis: Redis,
) -> None:
    store = TableStore(redis)
    store.durability = Durability(FSYNC_ALWAYS, replicas=1, timeout_ms=100)  # no replica
    table_id = f"t-dur-{uuid.uuid4().hex[:8]}"
    await store.transact(table_id, _create, create=True)  # no phase record: no barrier
    request = request_field("p1", "r-end")
    with pytest.raises(NotDurableError) as refused:
        await store.transact(table_id, lambda s: _round_end(table_id), request=request)
    assert refused.value.reason == "NOT_DURABLE"
    # The commit stands (it cannot be undone), and is not answered OK until durable.
    assert await redis.hget(keys.state(table_id), "version") == b"2"
    with pytest.raises(NotDurableError):
        await store.transact(table_id, lambda s: _round_end(table_id), request=request)
    store.durability = Durability(FSYNC_ALWAYS, replicas=0, timeout_ms=100)
    replay = await store.transact(table_id, lambda s: _round_end(table_id), request=request)
    assert replay.replayed
    assert await redis.hget(keys.state(table_id), "version") == b"2"


def test_a_table_service_that_requires_durability_refuses_a_server_without_it(
    tmp_path: Path,
) -> None:
    server = RedisServer(tmp_path / "everysec", appendfsync="everysec").start()
    try:
        env = base_env(
            server.url,
            secrets.token_urlsafe(48),
            KISHPA_PHASE_DURABILITY="required",
            KISHPA_GRPC_PORT=str(free_port()),
            KISHPA_METRICS_PORT=str(free_port()),
            KISHPA_TABLE_ENQUEUE="0",
        )
        done = subprocess.run(
            [KISHPA, "serve", "table"], env=env, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 2
        output = done.stdout + done.stderr
        assert "Traceback" not in output
        assert "KISHPA_PHASE_DURABILITY=required" in output
        assert "appendfsync everysec" in output
    finally:
        server.stop()


async def _reachable(client: object) -> None:
    """Wait (with a deadline) until ``client`` answers again after a restart."""
    from redis.exceptions import ConnectionError as RedisConnectionError

    deadline = asyncio.get_running_loop().time() + 20
    while True:
        try:
            await client.ping()  # type: ignore[attr-defined]
            return
        except RedisConnectionError:
            assert asyncio.get_running_loop().time() < deadline, "Redis did not come back"
            await asyncio.sleep(0.05)


def _durable_gauge() -> float | None:
    from prometheus_client import REGISTRY

    return REGISTRY.get_sample_value("kishpa_table_phase_durable")


async def test_a_redis_restarted_with_a_weaker_fsync_gets_no_round_end_acknowledged(
    server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from services.common.redis_client import async_client

    monkeypatch.setenv(durability.MODE_ENV, "required")
    client = async_client(server.url)  # the table service's own kind of client and pool
    try:
        store = TableStore(client)
        store.durability = await durability.probe(client)
        durability.check_required(store.durability)  # appendfsync always: it may start
        assert durability.DurabilityWatch(store).install(client)
        table_id = f"t-dur-{uuid.uuid4().hex[:8]}"
        await store.transact(table_id, _create, create=True)

        # Redis crashes and an operator brings it back with `appendfsync everysec`.
        server.kill9()
        server.appendfsync = "everysec"
        server.start()
        await _reachable(client)
        assert store.durability.barrier == NONE  # learnt on the new connection
        assert _durable_gauge() == 0
        with pytest.raises(NotDurableError) as refused:
            await store.transact(table_id, lambda s: _round_end(table_id), request="p1:r1")
        assert refused.value.reason == "NOT_DURABLE"
        # Refused before anything was written: no round end exists to be lost.
        assert await client.hget(keys.state(table_id), "version") == b"1"
        assert await client.hget(keys.outbox(table_id), "1:end") is None
        # Actions that end no round go on.
        other = f"t-dur-{uuid.uuid4().hex[:8]}"
        assert (await store.transact(other, _create, create=True)).version == 1

        # Fixed (restarted with `appendfsync always`): round ends are answered again.
        server.kill9()
        server.appendfsync = "always"
        server.start()
        await _reachable(client)
        assert store.durability.barrier == FSYNC_ALWAYS
        assert _durable_gauge() == 1
        committed = await store.transact(table_id, lambda s: _round_end(table_id), request="p1:r1")
        assert committed.version == 2
        assert await client.hget(keys.outbox(table_id), "1:end") is not None
    finally:
        await client.aclose()


async def _connections_received(admin: Redis) -> int:
    """Connections the server has accepted so far (INFO stats)."""
    return int((await admin.info("stats"))["total_connections_received"])


async def test_a_live_weakening_is_noticed_within_seconds_without_a_new_connection(
    server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`CONFIG SET appendfsync everysec` on the running server: the scheduled probe sees it
    on a connection the service already has, and round ends are refused (not acknowledged
    without durability) from then on."""
    from services.common.redis_client import async_client

    monkeypatch.setenv(durability.MODE_ENV, "required")
    monkeypatch.setenv(durability.PROBE_INTERVAL_ENV, "1")
    client = async_client(server.url)
    admin = Redis.from_url(server.url)
    store = TableStore(client)
    try:
        store.watch = await durability.watch(store, client)
        assert store.durability.barrier == FSYNC_ALWAYS
        table_id = f"t-dur-{uuid.uuid4().hex[:8]}"
        await store.transact(table_id, _create, create=True)
        accepted = await _connections_received(admin)

        await admin.config_set("appendfsync", "everysec")
        weakened = asyncio.get_running_loop().time()
        while store.durability.barrier != NONE:
            assert asyncio.get_running_loop().time() - weakened < 5, "weakening not noticed"
            await asyncio.sleep(0.05)
        assert _durable_gauge() == 0
        with pytest.raises(NotDurableError):
            await store.transact(table_id, lambda s: _round_end(table_id), request="p1:r1")
        assert await client.hget(keys.outbox(table_id), "1:end") is None
        # Learnt on the connections it had: the service opened none meanwhile.
        assert await _connections_received(admin) == accepted
    finally:
        if store.watch is not None:
            await store.watch.stop()
        await admin.aclose()
        await client.aclose()


async def test_under_required_a_fixed_redis_is_used_again_at_once_without_reconnecting(
    server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The operator's sequence from issue 31: Redis weakened (`appendfsync everysec`) and the
    service's connections dropped, so every new connection learns "not durable"; then fixed
    with `CONFIG SET appendfsync always`, which opens no connection. The very next round end
    is answered: the refusal asks the server again. (No scheduled probe here, so only that
    can have noticed the fix.)"""
    from services.common.redis_client import async_client

    monkeypatch.setenv(durability.MODE_ENV, "required")
    monkeypatch.setenv(durability.PROBE_INTERVAL_ENV, "0")
    client = async_client(server.url)
    admin = Redis.from_url(server.url)
    store = TableStore(client)
    try:
        store.watch = await durability.watch(store, client)
        table_id = f"t-dur-{uuid.uuid4().hex[:8]}"
        await store.transact(table_id, _create, create=True)

        await admin.config_set("appendfsync", "everysec")
        await admin.client_kill_filter(_type="normal", skipme=True)
        await _reachable(client)  # reconnects, and the new connection probes
        assert store.durability.barrier == NONE
        with pytest.raises(NotDurableError):
            await store.transact(table_id, lambda s: _round_end(table_id), request="p1:r1")
        assert await client.hget(keys.outbox(table_id), "1:end") is None

        accepted = await _connections_received(admin)
        await admin.config_set("appendfsync", "always")
        # (A client retries after a backoff; refusals ask at most every 0.1 s.)
        spacing = asyncio.get_running_loop().time() + 5
        while not store.watch.may_recheck():
            assert asyncio.get_running_loop().time() < spacing
            await asyncio.sleep(0.01)
        committed = await store.transact(table_id, lambda s: _round_end(table_id), request="p1:r1")
        assert committed.version == 2
        assert not committed.replayed
        assert await client.hget(keys.outbox(table_id), "1:end") is not None
        assert store.durability.barrier == FSYNC_ALWAYS
        assert _durable_gauge() == 1
        assert await _connections_received(admin) == accepted  # no reconnection was needed
    finally:
        if store.watch is not None:
            await store.watch.stop()
        await admin.aclose()
        await client.aclose()
