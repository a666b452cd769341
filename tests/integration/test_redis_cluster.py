"""The table service on a real 3-master Redis Cluster that this module starts (and kills).

The whole table, matchmaking and settlement suites also run on a cluster under
``pytest --redis-cluster`` (``make test`` does both); this module owns a cluster of its own so
that it may kill one master's process: tables on the other masters go on, and the killed
master's tables come back with it, their watchers missing nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from redis.asyncio.cluster import RedisCluster
from redis.crc import key_slot

from devkit.phase_samples import phase_entry, round_record
from devkit.redis_servers import RedisClusterProcesses, RedisProcess, start_cluster, stop_cluster
from services.common.redis_client import async_client, is_cluster_url, sync_client
from services.common.settings import load_settings
from services.table.engine import TableSettings
from services.table.server import TableServer, create_table_server
from services.table.service import Tables
from services.table.store import TableStore
from shared import keys
from shared.phase_record import PhaseRef
from shared.stream import StoredEvent, decode
from workers.outbox import enqueued_marker, index_unsettled
from workers.sweeper import sweep_report

pytestmark = [pytest.mark.integration, pytest.mark.slow]

FAST = TableSettings(seats=4, turn_seconds=1, reveal_window_seconds=1, next_round_pause_ms=0)


@pytest.fixture(scope="module")
def cluster() -> Iterator[RedisClusterProcesses]:
    started = start_cluster()
    yield started
    stop_cluster(started)


@pytest.fixture
async def server(cluster: RedisClusterProcesses) -> AsyncIterator[TableServer]:
    settings = load_settings(
        "table",
        redis_url=cluster.url,
        token_secret=secrets.token_urlsafe(48),
        service_secret=secrets.token_urlsafe(48),
        grpc_port=0,
        metrics_port=0,
    )
    srv = create_table_server(settings, address="127.0.0.1:0")
    await srv.start()
    yield srv
    await srv.stop(0)


def master_of(cluster: RedisClusterProcesses, table_id: str) -> RedisProcess:
    return cluster.node_of_slot(key_slot(keys.state(table_id).encode()))


async def open_table(tables: Tables) -> str:
    """A 4-seat table that deals at once and is played by its own turn timers (1 s turns)."""
    players = [(f"p{n}-{secrets.token_hex(3)}", "") for n in range(4)]
    result = await tables.create(players[0][0], FAST, players=players, auto_start=True)
    return str(result.result["table_id"])


class Follower:
    """A watcher that keeps every event it receives (resuming after a failed stream)."""

    def __init__(self, tables: Tables, table_id: str) -> None:
        self.tables = tables
        self.table_id = table_id
        self.seen: list[StoredEvent] = []
        self.errors = 0
        self.grew = asyncio.Event()
        self.task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        while True:
            after = self.seen[-1].id if self.seen else ""
            try:
                async for stored in self.tables.watch("spectator", self.table_id, after):
                    self.seen.append(stored)
                    self.grew.set()
            except asyncio.CancelledError:
                raise
            except Exception:  # the table's master is down: watch again from the last id
                self.errors += 1
                await asyncio.sleep(0.2)

    async def grows_by(self, count: int, within_s: float) -> None:
        target = len(self.seen) + count
        async with asyncio.timeout(within_s):
            while len(self.seen) < target:
                self.grew.clear()
                await self.grew.wait()


def test_a_cluster_url_selects_the_cluster_client(cluster: RedisClusterProcesses) -> None:
    assert is_cluster_url(cluster.url)
    assert not is_cluster_url("redis://127.0.0.1:6379/0")
    assert isinstance(async_client(cluster.url), RedisCluster)
    assert not isinstance(async_client("redis://127.0.0.1:6379/0"), RedisCluster)


async def test_tables_on_other_masters_go_on_while_one_master_is_down_and_restarted(
    cluster: RedisClusterProcesses, server: TableServer
) -> None:
    tables = server.tables
    opened = [await open_table(tables) for _ in range(6)]
    masters = {t: master_of(cluster, t) for t in opened}
    while len(set(map(id, masters.values()))) < 2:  # need tables on two masters at least
        extra = await open_table(tables)
        opened.append(extra)
        masters[extra] = master_of(cluster, extra)
    victim = masters[opened[0]]
    down = [t for t in opened if masters[t] is victim]
    up = [t for t in opened if masters[t] is not victim]
    followers = {t: Follower(tables, t) for t in opened}
    try:
        for follower in followers.values():
            await follower.grows_by(3, 60)  # dealt and played by the timers
        victim.kill()
        # Tables on the other masters keep being played, and their watchers keep receiving.
        for t in up:
            before = (await tables.view("spectator", t)).version
            try:
                await followers[t].grows_by(3, 60)
            except TimeoutError:
                after = (await tables.view("spectator", t)).version
                pytest.fail(
                    f"table {t} on :{masters[t].port} (victim :{victim.port}): versions "
                    f"{before}->{after}, watcher saw {len(followers[t].seen)}, "
                    f"errors {followers[t].errors}, hub {server.hub.stats()}"
                )
        cluster.restart(victim)
        # The killed master's tables are back: they go on, their watchers resume.
        for t in down:
            await followers[t].grows_by(3, 60)
    finally:
        for follower in followers.values():
            follower.task.cancel()
        await asyncio.gather(*(f.task for f in followers.values()), return_exceptions=True)
    # Every watcher got each event of its table once, in order, as the stream holds them.
    client = async_client(cluster.url)
    try:
        for t, follower in followers.items():
            stream = await client.xrange(keys.events(t))
            expected = [
                entry_id.decode()
                for entry_id, fields in stream
                if decode(fields).for_viewer(None) is not None
            ]
            ids = [s.id for s in follower.seen]
            assert ids == expected[: len(ids)], f"table {t}: each event once, in order"
    finally:
        await client.aclose()


async def test_timers_are_claimed_per_shard_and_only_by_replicas_that_read_the_version(
    cluster: RedisClusterProcesses,
) -> None:
    client = async_client(cluster.url)
    old = TableStore(client)  # today's code: writes and reads state version 1
    new = TableStore(client, version=2, readable_versions=(1, 2))  # a newer release
    ids = [f"tv-{secrets.token_hex(6)}" for _ in range(40)]
    try:
        for table_id in ids[:20]:
            await old.set_deadline(table_id, 1_000)
        for table_id in ids[20:]:
            await new.set_deadline(table_id, 1_000)  # rewritten by the newer release
        assert len({keys.shard_of(t) for t in ids}) >= 8, "the tables spread over the shards"
        # An old replica never claims what it cannot read; the new one claims both.
        assert set(await old.claim_due(2_000, lease_ms=10_000, limit=100)) == set(ids[:20])
        assert set(await new.claim_due(20_000, lease_ms=10_000, limit=100)) == set(ids)
        # A table the new release commits leaves the old version's index.
        await new.set_deadline(ids[0], 5_000)
        assert await client.zscore(keys.deadlines(ids[0], 1), ids[0]) is None
        assert await client.zscore(keys.deadlines(ids[0], 2), ids[0]) == 5_000
    finally:
        for table_id in ids:
            for version in (1, 2):
                await client.zrem(keys.deadlines(table_id, version), table_id)
        await client.aclose()


def test_the_sweeper_goes_on_for_the_other_masters_while_one_is_down(
    cluster: RedisClusterProcesses,
) -> None:
    """A lost settlement task is recovered on the masters that answer while one is down;
    the killed master's tables are swept once it is back."""
    client = sync_client(cluster.url)
    created = time.time_ns() // 1_000_000 - 60_000  # a minute ago: overdue
    tables = [f"sweep-{uuid.uuid4().hex[:10]}" for _ in range(24)]
    try:
        for table_id in tables:
            record = round_record(["ann", "ben"])
            entry = phase_entry(table_id, 1, "start", record, created)
            client.hset(keys.outbox(table_id), keys.phase_field(1, "start"), entry)
            index_unsettled(client, table_id, created)
        victim = master_of(cluster, tables[0])

        def on_live_masters(table_id: str) -> bool:
            """Its keys and its index shard are on masters that answer (computed here from
            the slot map, not by the sweeper)."""
            index_tag = keys.shard_tag(keys.shard_of(table_id))
            return victim not in (
                master_of(cluster, table_id),
                cluster.node_of_slot(key_slot(index_tag.encode())),
            )

        up = {t for t in tables if on_live_masters(t)}
        assert up, "the tables landed on one master only"
        assert len(up) < len(tables)
        victim.kill()
        swept: list[str] = []
        ours = set(tables)  # the module's other tests leave tables of their own

        def enqueue(**ids: Any) -> None:
            if ids["table_id"] in ours:
                swept.append(ids["table_id"])

        report = sweep_report(client, deadline_s=5, now_ms=created + 60_000, enqueue=enqueue)
        assert set(swept) == up
        assert report.unreachable
        cluster.restart(victim)
        sweep_report(client, deadline_s=5, now_ms=created + 60_000, enqueue=enqueue)
        assert sorted(swept) == sorted(tables)  # the rest once it is back, nothing twice
    finally:
        for table_id in tables:
            with contextlib.suppress(Exception):
                client.delete(keys.outbox(table_id))
                client.zrem(keys.unsettled(table_id), table_id)
                client.delete(enqueued_marker(PhaseRef(table_id, 1, "start")))
        client.close()


async def test_more_concurrent_transactions_than_connections_wait_for_one(
    cluster: RedisClusterProcesses,
) -> None:
    # redis-py 8.2's cluster transactions take a node's connection directly: without the
    # client's gate, the 9th concurrent one raised MaxConnectionsError on a pool of 8.
    client = async_client(cluster.url, max_connections=8)
    key = f"{{gate}}:{uuid.uuid4().hex}"

    async def one() -> None:
        async with client.pipeline(transaction=True) as pipe:
            pipe.incr(key)
            pipe.expire(key, 60)
            await pipe.execute()

    try:
        await asyncio.gather(*(one() for _ in range(100)))
        assert int(await client.get(key)) == 100
    finally:
        await client.delete(key)
        await client.aclose()
