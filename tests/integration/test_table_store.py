"""The Redis table store against the machine's real Redis: versioned commits, replays,
events, outbox records, expiry, the deadline index and the unsettled index."""

from __future__ import annotations

import asyncio
import json
import os
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest
from redis.asyncio import Redis

from services.common.redis_client import async_client
from services.table.store import (
    Snapshot,
    TableExistsError,
    TableStore,
    Transition,
    request_field,
)
from shared import keys
from shared.phase_record import PhaseRecord, parse_phase_record
from shared.stream import TableEvent
from tests.conftest import TEST_REDIS_URL

pytestmark = pytest.mark.integration


@pytest.fixture(scope="session")
def redis_url() -> str:
    """A Redis database of the table tests' own (db 11 of the test server unless
    ``TEST_TABLE_REDIS_URL`` says otherwise): the deadline index is per database, and table
    services of other tests on the shared machine must not claim these tables' timers."""
    own = os.environ.get("TEST_TABLE_REDIS_URL")
    return own or urlunsplit(urlsplit(TEST_REDIS_URL)._replace(path="/11"))


@pytest.fixture
async def redis(redis_url: str) -> AsyncIterator[Redis]:
    client = async_client(redis_url)
    yield client
    await client.aclose()


@pytest.fixture
async def table_id(redis: Redis) -> AsyncIterator[str]:
    tid = f"t-store-{uuid.uuid4().hex}"
    yield tid
    await redis.delete(
        keys.state(tid),
        keys.events(tid),
        keys.requests(tid),
        keys.outbox(tid),
        keys.balances(tid),
    )
    await redis.zrem(keys.deadlines(tid), tid)
    await redis.zrem(keys.unsettled(tid), tid)


def _increment(snapshot: Snapshot) -> Transition:
    count = int(snapshot.state.get("count", 0)) + 1
    return Transition(
        state={"count": count},
        events=[TableEvent("counted", 0, -1, {"count": count})],
        answer=json.dumps({"count": count}),
    )


async def test_create_then_commit_bumps_version_and_appends_events(
    redis: Redis, table_id: str
) -> None:
    store = TableStore(redis)
    first = await store.transact(table_id, _increment, create=True)
    assert first.version == 1
    assert not first.replayed
    with pytest.raises(TableExistsError):
        await store.transact(table_id, _increment, create=True)
    second = await store.transact(table_id, _increment)
    assert second.version == 2
    snap = await store.load(table_id)
    assert snap is not None
    assert snap.version == 2
    assert snap.state == {"count": 2}
    events = await store.read_events(table_id, "0-0")
    assert [e.event.data["count"] for e in events] == [1, 2]
    assert [e.id for e in events] == [*first.event_ids, *second.event_ids]
    assert await store.read_events(table_id, events[0].id) == events[1:]


async def test_the_stored_state_is_plain_json_any_reader_reads_alike(
    redis: Redis, table_id: str
) -> None:
    # Replicas of an older release read the state with json.loads: names in any script,
    # integer keys (written as strings, as json writes them) and nesting read back alike.
    state: dict[Any, Any] = {
        "seats": [{"name": "נגן א׳", "emoji": "🀄"}, {"name": "Zoë"}],
        "by_seat": {0: 12, 3: -4},
        "flags": [True, False, None],
        "big": 2**62,
    }
    store = TableStore(redis)
    await store.transact(table_id, lambda _: Transition(state=state), create=True)
    raw = await redis.hget(keys.state(table_id), "state")  # type: ignore[misc]
    expected = {**state, "by_seat": {"0": 12, "3": -4}}
    assert json.loads(raw) == expected
    assert json.loads(raw.decode("utf-8")) == expected
    snap = await store.load(table_id)
    assert snap is not None
    assert snap.state == expected


async def test_stale_version_is_refused_and_nothing_changes(redis: Redis, table_id: str) -> None:
    store = TableStore(redis)
    await store.transact(table_id, _increment, create=True)
    stale = await store.commit(table_id, 0, Transition(state={"count": 99}))
    assert stale is None
    snap = await store.load(table_id)
    assert snap is not None
    assert snap.state == {"count": 1}
    assert snap.version == 1
    assert len(await store.read_events(table_id, "0-0")) == 1


async def test_replayed_request_returns_first_answer_and_changes_nothing(
    redis: Redis, table_id: str
) -> None:
    store = TableStore(redis)
    await store.transact(table_id, _increment, create=True)
    req = request_field("p1", "r-1")
    first = await store.transact(table_id, _increment, request=req)
    again = await store.transact(table_id, _increment, request=req)
    assert again.replayed
    assert again.answer == first.answer == json.dumps({"count": 2})
    other_player = await store.transact(table_id, _increment, request=request_field("p2", "r-1"))
    assert not other_player.replayed
    snap = await store.load(table_id)
    assert snap is not None
    assert snap.state == {"count": 3}


async def test_a_request_id_never_reads_another_requests_markers(
    redis: Redis, table_id: str
) -> None:
    """Request ids are printable ASCII without spaces: one ending like a marker ("r|from",
    "r t" cannot be sent) is its own request, not a replay of r's cursor."""
    store = TableStore(redis)
    await store.transact(table_id, _increment, create=True)
    await store.transact(table_id, _increment, request=request_field("p1", "r"))
    other = await store.transact(table_id, _increment, request=request_field("p1", "r|from"))
    assert not other.replayed
    assert other.answer == json.dumps({"count": 3})


async def test_old_request_answers_are_dropped_and_recent_ones_still_replay(
    redis: Redis, table_id: str
) -> None:
    """A table that plays for hours must not keep every answer it gave (the soak found the
    requests hash growing by every move): answers older than the memory go, every 64th
    version; an answer within it still replays."""
    store = TableStore(redis, request_memory_ms=60_000)
    await store.transact(table_id, _increment, create=True)  # version 1
    old = request_field("p1", "old")
    await store.transact(table_id, _increment, request=old)  # version 2
    # The old answer's time, set back 2 minutes by hand: this test's clock is Redis's data.
    await redis.hset(keys.requests(table_id), f"{old} t", int(time.time() * 1000) - 120_000)
    recent = request_field("p1", "recent")
    await store.transact(table_id, _increment, request=recent)  # version 3
    for n in range(4, 63):
        await store.transact(table_id, _increment, request=request_field("p2", f"r{n}"))
    assert await redis.hexists(keys.requests(table_id), old)  # not yet: version 62
    await store.transact(table_id, _increment)  # 63
    await store.transact(table_id, _increment)  # 64: the sweep
    raw_fields = await redis.hkeys(keys.requests(table_id))
    fields = {f.decode() if isinstance(f, bytes) else f for f in raw_fields}
    assert not {old, f"{old} from", f"{old} t"} & fields
    assert {recent, f"{recent} from", f"{recent} t"} <= fields
    again = await store.transact(table_id, _increment, request=recent)
    assert again.replayed
    assert again.answer == json.dumps({"count": 3})
    # A retry of the dropped request is a new request now (hours later, no client retries).
    late = await store.transact(table_id, _increment, request=old)
    assert not late.replayed
    assert late.answer == json.dumps({"count": 65})


async def test_concurrent_writers_never_lose_an_update(redis: Redis, table_id: str) -> None:
    store = TableStore(redis)
    await store.transact(table_id, _increment, create=True)

    async def slow_increment(snapshot: Snapshot) -> Transition:
        await asyncio.sleep(0)  # let the other writers interleave between load and commit
        return _increment(snapshot)

    await asyncio.gather(*(store.transact(table_id, slow_increment) for _ in range(10)))
    snap = await store.load(table_id)
    assert snap is not None
    assert snap.state == {"count": 11}
    assert snap.version == 11
    counts = [e.event.data["count"] for e in await store.read_events(table_id, "0-0")]
    assert counts == list(range(1, 12))


async def test_outbox_private_fields_deadline_and_expiry(redis: Redis, table_id: str) -> None:
    store = TableStore(redis, finished_ttl_s=120)
    await store.transact(table_id, _increment, create=True)
    event = TableEvent("drew", 1, 2, {"source": "pile"}, 2, {"tile": 7})
    record = PhaseRecord(table_id, "kishpa", 1, "start", {"players": ["p1", "p2"]}, 7)
    done = await store.transact(
        table_id,
        lambda s: Transition(
            state={"count": 0},
            events=[event],
            phases=[record],
            deadline_ms=12345,
        ),
    )
    stored = (await store.read_events(table_id, "0-0"))[-1]
    assert stored.id == done.event_ids[0]
    assert stored.event == event
    assert stored.event.visible_to(2) == {"tile": 7}
    assert stored.event.visible_to(1) is None
    raw: Any = await redis.hget(keys.outbox(table_id), keys.phase_field(1, "start"))
    assert parse_phase_record(raw) == record
    assert await store.deadline_of(table_id) == 12345
    assert await redis.zscore(keys.deadlines(table_id), table_id) == 12345
    assert await redis.ttl(keys.state(table_id)) == -1

    await store.transact(table_id, lambda s: Transition(state={"count": 0}, finished=True))
    assert await store.deadline_of(table_id) is None
    assert await redis.zscore(keys.deadlines(table_id), table_id) is None
    assert 0 < await redis.ttl(keys.state(table_id)) <= 120
    assert 0 < await redis.ttl(keys.events(table_id)) <= 120


async def test_a_commit_that_writes_phase_records_indexes_its_table_as_unsettled(
    redis: Redis, table_id: str
) -> None:
    store = TableStore(redis)
    await store.transact(table_id, _increment, create=True)
    assert await redis.zscore(keys.unsettled(table_id), table_id) is None  # no phase yet

    def phase(name: str, created_ms: int) -> Transition:
        record = PhaseRecord(table_id, "kishpa", 1, name, {"players": ["p1", "p2"]}, created_ms)
        return Transition(state={"count": 0}, phases=[record])

    # A commit that lost the version race writes nothing, index included.
    assert await store.commit(table_id, 0, phase("start", 5_000)) is None
    assert await redis.zscore(keys.unsettled(table_id), table_id) is None

    await store.transact(table_id, lambda s: phase("start", 7_000))
    # In the shard of the table's hash-slot range, scored by the record's creation time
    # (on one node written by the commit script itself; on a cluster right after it).
    assert keys.unsettled(table_id) == keys.unsettled_shard(keys.shard_of(table_id))
    assert await redis.zscore(keys.unsettled(table_id), table_id) == 7_000
    # A later phase keeps the earliest unsettled phase's time.
    await store.transact(table_id, lambda s: phase("end", 9_000))
    assert await redis.zscore(keys.unsettled(table_id), table_id) == 7_000
    await store.transact(table_id, _increment)  # no phase: the entry stays as it is
    assert await redis.zscore(keys.unsettled(table_id), table_id) == 7_000


async def test_claim_due_moves_deadline_by_a_lease(redis: Redis, table_id: str) -> None:
    store = TableStore(redis)
    await store.set_deadline(table_id, 1_000)
    claimed = await store.claim_due(5_000, lease_ms=2_000, limit=10_000)
    assert table_id in claimed
    assert await redis.zscore(keys.deadlines(table_id), table_id) == 7_000
    assert table_id not in await store.claim_due(6_000, lease_ms=2_000, limit=10_000)


async def test_a_waiting_table_expires_when_idle_and_a_started_one_does_not(
    redis: Redis, table_id: str
) -> None:
    store = TableStore(redis)
    waiting = Transition(
        state={"count": 0}, events=[TableEvent("created", 0, -1, {})], idle_ttl_s=300
    )
    await store.transact(
        table_id, lambda s: waiting, request=request_field("p1", "create"), create=True
    )
    for key in (keys.state, keys.events, keys.requests):
        assert 0 < await redis.ttl(key(table_id)) <= 300
    await store.transact(
        table_id,
        lambda s: Transition(state={"count": 1}, events=[TableEvent("started", 1, -1, {})]),
    )
    for key in (keys.state, keys.events, keys.requests):
        assert await redis.ttl(key(table_id)) == -1, "a playing table is kept"


async def test_each_player_keeps_only_his_latest_answers_however_long_the_table_plays(
    redis: Redis, table_id: str
) -> None:
    """Answers are bounded per player by what a retrying client can still ask for (its few
    requests in flight), not per minute of play: p1's sixth request drops his first answers,
    never p2's; his latest ones still replay."""
    store = TableStore(redis, answers_per_player=3)
    await store.transact(table_id, _increment, create=True)  # count 1
    other = request_field("p2", "x")
    await store.transact(table_id, _increment, request=other)  # count 2
    for n in range(1, 7):  # counts 3..8
        await store.transact(table_id, _increment, request=request_field("p1", f"r{n}"))
    raw_fields = await redis.hkeys(keys.requests(table_id))
    fields = {f.decode() if isinstance(f, bytes) else f for f in raw_fields}
    kept = {f for f in fields if f.startswith("p1:") and " " not in f}
    assert kept == {"p1:r4", "p1:r5", "p1:r6"}
    assert not {f for f in fields if f.startswith(("p1:r1", "p1:r2", "p1:r3"))}
    assert other in fields  # another seat's answer is his own business
    again = await store.transact(table_id, _increment, request=request_field("p1", "r4"))
    assert again.replayed
    assert again.answer == json.dumps({"count": 6})
    assert (await store.transact(table_id, _increment, request=other)).replayed
