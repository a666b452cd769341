"""The shared WatchTable fan-out (services/table/fanout.py) against a real redis-server.

A private redis-server (started on a free port) so that what Redis counts (commands
processed, clients connected) is this process's alone. Events are appended through the real
commit script, which wakes the hub; watchers are ``Tables.watch`` generators, the code the
WatchTable RPC runs.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from redis.asyncio import BlockingConnectionPool, Redis

from devkit.redis_servers import RedisProcess
from services.table.engine import Table, TableSettings
from services.table.engines import engines
from services.table.fanout import StreamHub, WatchCutOffError
from services.table.metrics import FANOUT_OFFERS
from services.table.service import Tables
from services.table.store import Committed, TableStore, Transition
from shared import keys
from shared.stream import PRIVATE, StoredEvent, TableEvent, decode, stored_event

pytestmark = pytest.mark.integration

PLAYERS = ["p0", "p1", "p2", "p3"]


POOL = 16


def make_tables(client: Redis, *, limit: int = 2048) -> Tables:
    """Tables over a bounded pool of its own (like the server's) and a hub."""
    url = "redis://{host}:{port}/0".format(**client.connection_pool.connection_kwargs)
    own = Redis(connection_pool=BlockingConnectionPool.from_url(url, max_connections=POOL))
    hub: StreamHub[StoredEvent] = StreamHub(
        own,
        own,
        stream_key=keys.events,
        channel=keys.notify,
        decode=stored_event,
        limit=limit,
    )
    return Tables(TableStore(own), engines(), hub=hub)


async def open_table(store: TableStore) -> tuple[str, dict[str, Any]]:
    table_id = f"t-fan-{uuid.uuid4().hex[:12]}"
    state = Table(
        table_id=table_id,
        game_name="kishpa",
        creator="p0",
        settings=TableSettings(seats=4),
        created_ms=0,
        players=list(PLAYERS),
        status="playing",
    ).to_dict()
    await store.transact(table_id, lambda _: Transition(state=state), create=True)
    return table_id, state


def event_number(n: int) -> list[TableEvent]:
    """The events of the n-th commit: public, private to one seat, or wholly private."""
    seat = n % 4
    if n % 5 == 0:
        return [TableEvent(PRIVATE, 1, seat, {}, seat, {"type": "may_reveal", "seat": seat})]
    return [
        TableEvent("moved", 1, seat, {"n": n}),
        TableEvent("drew", 1, seat, {"n": n}, seat, {"tile": n % 106}),
    ]


async def append(
    store: TableStore,
    table_id: str,
    state: dict[str, Any],
    n: int,
    *,
    events: list[TableEvent] | None = None,
) -> None:
    batch = event_number(n) if events is None else events
    await store.transact(table_id, lambda _: Transition(state=state, events=batch))


async def append_here(tables: Tables, table_id: str, state: dict[str, Any], n: int) -> Committed:
    """A commit as the service makes one: committed, then offered to this process's
    watchers (``Tables._after_commit``, which every mutation of the service runs)."""
    committed = await tables.store.transact(
        table_id, lambda _: Transition(state=state, events=event_number(n))
    )
    await tables._after_commit(table_id, committed)
    return committed


async def xrange_calls(client: Redis) -> int:
    """XRANGE commands the server has run (its own count: INFO commandstats)."""
    stats = await client.info("commandstats")
    return int(stats.get("cmdstat_xrange", {}).get("calls", 0))


async def expected_for(client: Redis, table_id: str, seat: int) -> list[tuple[str, bool]]:
    """(id, carries private data) of every entry seat ``seat`` may see, from Redis itself:
    public entries, and private entries only of his own seat."""
    out = []
    for entry_id, fields in await client.xrange(keys.events(table_id)):
        f = {k.decode(): v.decode() for k, v in fields.items()}
        own = f.get("private_seat") == str(seat)
        if f["type"] == PRIVATE and not own:
            continue
        out.append((entry_id.decode(), own))
    return out


async def test_a_thousand_watchers_on_one_process_receive_every_event_once_in_order(
    client: Redis, private_redis: RedisProcess
) -> None:
    tables = make_tables(client)
    store = tables.store
    opened = [await open_table(store) for _ in range(25)]
    commits = 12
    received: dict[tuple[str, int, int], list[StoredEvent]] = {}
    started = 0
    all_started = asyncio.Event()

    async def watch(table_id: str, seat: int, n: int, after: str) -> None:
        nonlocal started
        key = (table_id, seat, n)
        got = received.setdefault(key, [])
        stream = tables.watch(PLAYERS[seat], table_id, after)
        async for stored in stream:
            if not got:
                started += 1
                if started == len(opened) * 40:
                    all_started.set()
            got.append(stored)
            if stored.event.type == "drew" and stored.event.data.get("n") == commits * 2 - 1:
                break  # the table's last event
        await stream.aclose()

    try:
        # Half of each table's history exists before anyone watches.
        for table_id, state in opened:
            for n in range(commits):
                await append(store, table_id, state, n)
        first_ids = {
            t: (await client.xrange(keys.events(t), count=3))[2][0].decode() for t, _ in opened
        }
        watchers = [
            asyncio.create_task(
                # 40 watchers per table: 10 per seat, every other one resuming mid-stream.
                watch(t, n % 4, n, first_ids[t] if n % 2 else "")
            )
            for t, _ in opened
            for n in range(40)
        ]
        await asyncio.wait_for(all_started.wait(), 60)
        assert tables.hub is not None
        assert tables.hub.stats() == {"tables": 25, "watchers": 1000}
        # Connections: the bounded command pool, one pub/sub connection, this test's client.
        clients = await client.client_list()
        assert len(clients) <= POOL + 2, f"{len(clients)} Redis connections for 1,000 watchers"
        # The other half arrives live, tables interleaved and concurrently.
        for n in range(commits, commits * 2):
            await asyncio.gather(*(append(store, t, s, n) for t, s in opened))
        await asyncio.wait_for(asyncio.gather(*watchers), 60)
        visible = {
            (t, seat): await expected_for(client, t, seat) for t, _ in opened for seat in range(4)
        }
    finally:
        await tables.aclose()
        for table_id, _ in opened:
            await client.delete(keys.state(table_id), keys.events(table_id))

    assert len(received) == 1000
    for (table_id, seat, n), got in received.items():
        expected = visible[table_id, seat]
        if n % 2:
            expected = expected[[e for e, _ in expected].index(first_ids[table_id]) + 1 :]
        ids = [s.id for s in got]
        assert ids == [e for e, _ in expected], f"watcher {n} of {table_id}: once, in order"
        assert [s.event.private_data is not None for s in got] == [p for _, p in expected], (
            "private facts reach only their own seat"
        )


async def test_a_watcher_that_stops_reading_is_cut_off_and_resumes_without_loss(
    client: Redis,
) -> None:
    tables = make_tables(client, limit=30)
    store = tables.store
    table_id, state = await open_table(store)
    try:
        await append(store, table_id, state, 1)
        stream = tables.watch("p1", table_id)
        seen = [await anext(stream)]  # the consumer is alive ...
        # ... then stops reading while 60 commits (up to 120 events) come in.
        for n in range(2, 62):
            await append(store, table_id, state, n)
        hub = tables.hub
        assert hub is not None

        # The hub drops the slow watcher (and its buffer) without waiting for it to read.
        for _ in range(1000):
            if hub.stats()["watchers"] == 0:
                break
            await asyncio.sleep(0.01)
        else:
            pytest.fail("the slow watcher was never cut off")

        async def read_on() -> None:
            async for stored in stream:
                seen.append(stored)

        with pytest.raises(WatchCutOffError) as cut:
            await read_on()
        assert cut.value.reason == "WATCH_TOO_SLOW"
        # It resumes from the last id it received and misses nothing.
        resumed = tables.watch("p1", table_id, seen[-1].id)
        expected = [e for e, _ in await expected_for(client, table_id, 1)]
        async with asyncio.timeout(10):
            async for stored in resumed:
                seen.append(stored)
                if stored.id == expected[-1]:
                    break
        await resumed.aclose()
        assert [s.id for s in seen] == expected
    finally:
        await tables.aclose()
        await client.delete(keys.state(table_id), keys.events(table_id))


async def test_idle_watchers_cost_redis_nothing(client: Redis) -> None:
    tables = make_tables(client)
    store = tables.store
    table_id, state = await open_table(store)
    streams = [tables.watch(PLAYERS[n % 4], table_id) for n in range(200)]
    try:
        await append(store, table_id, state, 1, events=[TableEvent("moved", 1, 0, {"n": 1})])
        firsts = await asyncio.gather(*(anext(s) for s in streams))
        assert len(firsts) == 200
        waiting = [asyncio.create_task(anext(s)) for s in streams]  # all idle now
        # Until the watchers' catch-up reads are over: Redis sees only our INFO calls.
        async with asyncio.timeout(15):
            before = (await client.info("stats"))["total_commands_processed"]
            while True:
                await asyncio.sleep(0.1)
                now = (await client.info("stats"))["total_commands_processed"]
                if now - before <= 1:
                    break
                before = now
        before = now
        await asyncio.sleep(3.0)  # the thing measured: 3 s of idle watching
        after = (await client.info("stats"))["total_commands_processed"]
        # Only the INFO command itself was processed: no polling, no blocked reads.
        assert after - before <= 2
        await append(store, table_id, state, 2, events=[TableEvent("moved", 1, 0, {"n": 2})])
        woken = await asyncio.wait_for(asyncio.gather(*waiting), 10)
        assert {s.event.data.get("n") for s in woken} == {2}
    finally:
        for stream in streams:
            await stream.aclose()
        await tables.aclose()
        await client.delete(keys.state(table_id), keys.events(table_id))


async def test_a_lost_pubsub_connection_loses_no_event(client: Redis) -> None:
    tables = make_tables(client)
    store = tables.store
    table_id, state = await open_table(store)
    stream = tables.watch("p2", table_id)
    try:
        await append(store, table_id, state, 1, events=[TableEvent("moved", 1, 0, {"n": 1})])
        seen = [await anext(stream)]
        # Kill the hub's pub/sub connection on the server side; events keep coming meanwhile.
        for info in await client.client_list():
            if int(info.get("sub", 0)) > 0:
                await client.client_kill_filter(_id=info["id"])
        for n in range(2, 6):
            await append(store, table_id, state, n)
        expected = [e for e, _ in await expected_for(client, table_id, 2)]
        async with asyncio.timeout(10):
            async for stored in stream:
                seen.append(stored)
                if stored.id == expected[-1]:
                    break
        assert [s.id for s in seen] == expected
    finally:
        await stream.aclose()
        await tables.aclose()
        await client.delete(keys.state(table_id), keys.events(table_id))


def test_stream_entry_decoding_is_what_watchers_receive() -> None:
    event = TableEvent("drew", 2, 1, {"n": 1}, 1, {"tile": 7})
    text = {"type": "drew", "round": "2", "seat": "1", "data": '{"n":1}'}
    text |= {"private_seat": "1", "private_data": '{"tile":7}'}
    fields = {k.encode(): v.encode() for k, v in text.items()}
    assert stored_event("1-0", fields) == StoredEvent("1-0", event)
    assert decode(fields) == event


async def test_commits_of_this_process_reach_its_watchers_without_a_stream_read(
    client: Redis,
) -> None:
    tables = make_tables(client)
    store = tables.store
    table_id, state = await open_table(store)
    streams = {seat: tables.watch(PLAYERS[seat], table_id) for seat in range(4)}
    got: dict[int, list[StoredEvent]] = {seat: [] for seat in range(4)}
    commits = 40
    try:
        await append_here(tables, table_id, state, 1)
        for seat, stream in streams.items():  # subscribed and caught up
            got[seat].append(await anext(stream))
        reads = await xrange_calls(client)
        offers = FANOUT_OFFERS._value.get()
        for n in range(2, commits + 2):
            await append_here(tables, table_id, state, n)
        last = {seat: (await expected_for(client, table_id, seat))[-1][0] for seat in range(4)}
        reads_after = await xrange_calls(client) - 4  # expected_for's own
        offered = FANOUT_OFFERS._value.get() - offers

        async def rest(seat: int) -> None:
            async for stored in streams[seat]:
                got[seat].append(stored)
                if stored.id == last[seat]:
                    return

        await asyncio.wait_for(asyncio.gather(*(rest(seat) for seat in range(4))), 10)
        for seat in range(4):
            expected = await expected_for(client, table_id, seat)
            assert [s.id for s in got[seat]] == [e for e, _ in expected], "once, in order"
            assert [s.event.private_data is not None for s in got[seat]] == [p for _, p in expected]
    finally:
        for stream in streams.values():
            await stream.aclose()
        await tables.aclose()
        await client.delete(keys.state(table_id), keys.events(table_id))
    # The hub read the stream for at most a few of them (a wake-up that came first).
    assert offered >= commits * 3 // 4, f"only {offered} of {commits} commits were offered"
    assert reads_after - reads <= commits // 4, f"{reads_after - reads} reads for {commits}"


async def test_an_offer_that_does_not_follow_what_the_hub_delivered_is_ignored(
    client: Redis,
) -> None:
    tables = make_tables(client)
    store = tables.store
    table_id, state = await open_table(store)
    stream = tables.watch("p1", table_id)
    hub = tables.hub
    assert hub is not None
    try:
        first = await append_here(tables, table_id, state, 1)
        seen = [await anext(stream)]
        # A commit of another process (no offer here): the wake-up's read delivers it.
        other = await store.transact(
            table_id, lambda _: Transition(state=state, events=event_number(2))
        )
        async with asyncio.timeout(10):
            while seen[-1].id != other.event_ids[-1]:
                seen.append(await anext(stream))
            await asyncio.gather(*hub._reads)  # the read is over: offers are looked at
        # Offered late, or out of place: nothing is delivered twice or out of order.
        assert not hub.offer(table_id, other.previous_event_id, other.appended)
        assert not hub.offer(table_id, first.previous_event_id, first.appended)
        assert not hub.offer(table_id, "9999999999999-0", other.appended)
        assert not hub.offer("t-not-watched", other.event_ids[-1], other.appended)
        mine = await append_here(tables, table_id, state, 3)
        async with asyncio.timeout(10):
            while seen[-1].id != mine.event_ids[-1]:
                seen.append(await anext(stream))
        expected = [e for e, _ in await expected_for(client, table_id, 1)]
        assert [s.id for s in seen] == expected
    finally:
        await stream.aclose()
        await tables.aclose()
        await client.delete(keys.state(table_id), keys.events(table_id))


async def test_another_process_s_commit_read_by_the_hub_drops_the_state_this_one_kept(
    client: Redis,
) -> None:
    """A table played through two processes: when this process's hub reads the other's
    commit, it stops computing on the state it kept (which that commit made stale)."""
    here, there = make_tables(client), make_tables(client)
    table_id, state = await open_table(here.store)
    stream = here.watch(PLAYERS[0], table_id)
    try:
        await append_here(here, table_id, state, 1)
        await anext(stream)  # watched, and caught up
        assert here.store.cache.get(table_id) is not None
        await append(there.store, table_id, state, 2)
        got = await asyncio.wait_for(anext(stream), 10)
        while got.event.data != {"n": 2}:  # the rest of commit 1
            got = await asyncio.wait_for(anext(stream), 10)
        assert here.store.cache.get(table_id) is None
    finally:
        await stream.aclose()
        await here.aclose()
        await there.aclose()
