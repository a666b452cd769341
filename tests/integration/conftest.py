"""Fixtures shared by integration modules: a Redis of their own, a wallet ledger."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
from redis.asyncio import Redis

from devkit.postgres import temporary_postgres_database
from devkit.redis_servers import RedisProcess, start_redis, stop_redis
from services.wallet.database import create_wallet_engine
from services.wallet.ledger import Ledger
from services.wallet.migrate import upgrade
from tests.conftest import TEST_DATABASE_URL


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


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def ledger(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Ledger]:
    """A migrated wallet ledger of each kind, for the module (the wallet's ledger tests)."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path_factory.mktemp('ledger') / 'wallet.sqlite3'}"
        upgrade(url)
        engine = create_wallet_engine(url)
        yield Ledger(engine)
        engine.dispose()
        return
    with temporary_postgres_database(TEST_DATABASE_URL) as url:
        upgrade(url)
        engine = create_wallet_engine(url)
        yield Ledger(engine)
        engine.dispose()
