"""Fixtures shared by integration modules that need a Redis of their own."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
from redis.asyncio import Redis

from devkit.redis_servers import RedisProcess, start_redis, stop_redis


@pytest.fixture(scope="module")
def private_redis() -> Iterator[RedisProcess]:
    """A redis-server of the module's own (free port), so that what the server counts
    (commands run, clients connected) is that module's alone."""
    server = start_redis()
    yield server
    stop_redis(server)


@pytest.fixture
async def client(private_redis: RedisProcess) -> AsyncIterator[Redis]:
    redis = Redis.from_url(private_redis.url)
    yield redis
    await redis.aclose()
