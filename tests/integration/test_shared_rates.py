"""Player rates counted in the process and shared through a real Redis in batches: exact in
one process, every admitted call lands in the shared total, replicas learn each other's
counts at their next flush, and an unreachable Redis fails open."""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from limits import parse
from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from services.common.redis_client import async_client
from services.common.shared_rates import SharedRates
from tests.conftest import TEST_REDIS_URL

pytestmark = pytest.mark.integration

HOURLY = parse("5/hour")
"""An hour-long window: a window boundary inside a test still counts the calls (the
previous window weighs almost fully)."""


@pytest.fixture
async def redis() -> AsyncIterator[Any]:
    # The table service's Redis: a 3-master cluster under ``pytest --redis-cluster``.
    client = async_client(os.environ.get("TEST_TABLE_REDIS_URL") or TEST_REDIS_URL)
    yield client
    await client.aclose()


@pytest.fixture
def prefix() -> str:
    return f"kishpa:test-rates:{uuid.uuid4().hex}"


async def _shared_total(redis: Any, prefix: str, name: str) -> int:
    total = 0
    async for key in redis.scan_iter(match=f"{prefix}:{name}:*"):
        total += int(await redis.get(key) or 0)
        assert 0 < await redis.ttl(key) <= 2 * 3600
    return total


async def test_one_process_admits_exactly_the_rate(redis: Any, prefix: str) -> None:
    rates = SharedRates(redis, prefix)
    admitted = [rates.hit(HOURLY, "{p1}:table:write") is None for _ in range(8)]
    assert admitted == [True] * 5 + [False] * 3
    retry = rates.hit(HOURLY, "{p1}:table:write")
    assert retry is not None
    assert 0.05 <= retry <= 3600
    # Another counter has its own budget.
    assert rates.hit(HOURLY, "{p2}:table:write") is None
    await rates.close()
    assert await _shared_total(redis, prefix, "{p1}:table:write") == 5
    assert await _shared_total(redis, prefix, "{p2}:table:write") == 1


async def test_many_counters_share_in_one_flush_and_nothing_is_lost(
    redis: Any, prefix: str
) -> None:
    rates = SharedRates(redis, prefix, flush_s=3600)  # only explicit flushes
    for n in range(200):
        for _ in range(n % 4 + 1):
            assert rates.hit(HOURLY, f"{{p{n}}}:reads") is None
    await rates.flush()
    for n in (0, 1, 2, 3, 199):
        assert await _shared_total(redis, prefix, f"{{p{n}}}:reads") == n % 4 + 1
    await rates.close()


async def test_replicas_learn_each_others_counts_at_their_next_flush(
    redis: Any, prefix: str
) -> None:
    a, b = SharedRates(redis, prefix, flush_s=3600), SharedRates(redis, prefix, flush_s=3600)
    name = "{p}:table:read"
    assert [a.hit(HOURLY, name) is None for _ in range(4)] == [True] * 4
    await a.flush()
    # B has not flushed yet: it admits on what it knows (the documented overshoot bound)...
    assert b.hit(HOURLY, name) is None
    assert b.hit(HOURLY, name) is None
    await b.flush()
    # ...and from its flush on it knows A's four: 6 admitted in all, no more.
    assert b.hit(HOURLY, name) is not None
    assert a.hit(HOURLY, name) is None  # A still believes 4 (its own): one more
    await a.flush()
    assert a.hit(HOURLY, name) is not None
    assert await _shared_total(redis, prefix, name) == 7
    await a.close()
    await b.close()


async def test_an_unreachable_redis_fails_open(prefix: str) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    dead = Redis(host="127.0.0.1", port=port, retry=Retry(NoBackoff(), 0))
    rates = SharedRates(dead, prefix, flush_s=3600)
    assert all(rates.hit(HOURLY, "{p}:w") is None for _ in range(5))
    await rates.flush()  # refused connection: dropped, logged, no exception
    # Forgotten calls do not count against the player (fail open, like the limits library).
    assert rates.hit(HOURLY, "{p}:w") is None
    await rates.close()
    await dead.aclose()
