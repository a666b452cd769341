"""load.lua against the machine's real Redis: one round trip answers a replay with its first
answer, or returns the table's state, version and deadline."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from urllib.parse import urlsplit, urlunsplit

import pytest
from redis.asyncio import Redis

from services.common.redis_client import async_client
from services.table.store import TableStore, Transition, request_field
from shared import keys
from tests.conftest import TEST_REDIS_URL

pytestmark = pytest.mark.integration


@pytest.fixture
async def redis() -> AsyncIterator[Redis]:
    # The table tests' own database (see test_table_store.py).
    url = os.environ.get("TEST_TABLE_REDIS_URL") or urlunsplit(
        urlsplit(TEST_REDIS_URL)._replace(path="/11")
    )
    client = async_client(url)
    yield client
    await client.aclose()


@pytest.fixture
async def table_id(redis: Redis) -> AsyncIterator[str]:
    tid = f"t-load-{uuid.uuid4().hex}"
    yield tid
    await redis.delete(keys.state(tid), keys.events(tid), keys.requests(tid), keys.outbox(tid))
    await redis.zrem(keys.deadlines(tid), tid)


async def test_no_table_and_no_answer(redis: Redis, table_id: str) -> None:
    store = TableStore(redis)
    assert await store.load_for(table_id, "") == (None, None)
    assert await store.load_for(table_id, request_field("p1", "r1")) == (None, None)


async def test_state_version_and_deadline(redis: Redis, table_id: str) -> None:
    store = TableStore(redis)
    transition = Transition(state={"n": 1}, deadline_ms=1_234, answer='{"a":1}')
    assert await store.commit(table_id, 0, transition, request=request_field("p1", "r1"))
    answer, snapshot = await store.load_for(table_id, request_field("p1", "other"))
    assert answer is None
    assert snapshot is not None
    assert (snapshot.version, snapshot.state, snapshot.deadline_ms) == (1, {"n": 1}, 1_234)
    # Without a deadline the snapshot has none.
    assert await store.commit(table_id, 1, Transition(state={"n": 2}))
    _, snapshot = await store.load_for(table_id, "")
    assert snapshot is not None
    assert (snapshot.version, snapshot.deadline_ms) == (2, None)


async def test_answered_request_returns_its_first_answer(redis: Redis, table_id: str) -> None:
    store = TableStore(redis)
    field = request_field("p1", "r1")
    await store.commit(
        table_id, 0, Transition(state={"n": 1}, answer='{"first":true}'), request=field
    )
    # No events were appended, so there is no cursor to replay with.
    assert await store.load_for(table_id, field) == (('{"first":true}', ""), None)
    # Another player's request with the same id is not his answer.
    answer, snapshot = await store.load_for(table_id, request_field("p2", "r1"))
    assert answer is None
    assert snapshot is not None


async def test_transact_replays_without_computing(redis: Redis, table_id: str) -> None:
    store = TableStore(redis)
    field = request_field("p1", "r1")
    await store.transact(
        table_id, lambda s: Transition(state={"n": 1}, answer="one"), request=field, create=True
    )

    def refuse(_snapshot: object) -> Transition:
        raise AssertionError("a replay must not be recomputed")

    replayed = await store.transact(table_id, refuse, request=field)
    assert (replayed.replayed, replayed.answer) == (True, "one")
