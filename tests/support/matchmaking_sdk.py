"""The SDK against real matchmaking and table servers on loopback: the servers, a client per
player, and the tables made (deleted afterwards)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import socket
import uuid
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest
from redis.asyncio import Redis

from sdk import KishpaClient
from services.common.redis_client import async_client
from services.common.settings import Settings, load_settings
from services.matchmaking.server import MatchmakingServer, create_matchmaking_server
from services.matchmaking.service import MatchmakingConfig
from services.table.server import TableServer, create_table_server
from shared import keys as table_keys
from tests.conftest import TEST_REDIS_URL


@pytest.fixture(scope="session")
def redis_url() -> str:
    """A Redis database of the matchmaking tests' own (db 14 of the test server unless
    ``TEST_MATCHMAKING_REDIS_URL`` says otherwise): the table services started here run the
    deadline timers of their database, and must neither serve nor be served by the tables
    of other tests on the shared machine."""
    own = os.environ.get("TEST_MATCHMAKING_REDIS_URL")
    return own or urlunsplit(urlsplit(TEST_REDIS_URL)._replace(path="/14"))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def env(redis_url: str) -> dict[str, Any]:
    return {
        "redis_url": redis_url,
        "token_secret": secrets.token_urlsafe(48),
        "service_secret": secrets.token_urlsafe(48),
        "grpc_port": 0,
        "metrics_port": 0,
    }


@pytest.fixture
def table_port() -> int:
    return _free_port()


def table_settings(env: dict[str, Any]) -> Settings:
    return load_settings("table", **env)


def mm_settings(env: dict[str, Any], table_port: int) -> Settings:
    return load_settings("matchmaking", table_addr=f"127.0.0.1:{table_port}", **env)


@pytest.fixture
async def redis(redis_url: str) -> AsyncIterator[Redis]:
    client = async_client(redis_url)
    yield client
    await client.aclose()


@pytest.fixture
async def tables_made(redis: Redis, prefix: str) -> AsyncIterator[set[str]]:
    made: set[str] = set()
    yield made
    for table_id in made:
        await redis.delete(
            table_keys.state(table_id),
            table_keys.events(table_id),
            table_keys.requests(table_id),
            table_keys.outbox(table_id),
            table_keys.balances(table_id),
        )
        await redis.zrem(table_keys.deadlines(table_id), table_id)
    async for key in redis.scan_iter(match=prefix.replace("{", "[{]").replace("}", "[}]") + ":*"):
        await redis.delete(key)


@pytest.fixture
def prefix() -> str:
    return f"kishpa:mm-sdk-{uuid.uuid4().hex[:12]}"


async def start_table(env: dict[str, Any], port: int) -> TableServer:
    srv = create_table_server(table_settings(env), address=f"127.0.0.1:{port}")
    await srv.start()
    return srv


async def start_mm(
    env: dict[str, Any], table_port: int, prefix: str, config: MatchmakingConfig | None = None
) -> MatchmakingServer:
    srv = create_matchmaking_server(
        mm_settings(env, table_port),
        address="127.0.0.1:0",
        key_prefix=prefix,
        open_wallets=False,
        config=config or MatchmakingConfig(turn_seconds=600, reveal_window_seconds=1),
    )
    await srv.start()
    return srv


def client_for(mm: MatchmakingServer, table_port: int, **kw: Any) -> KishpaClient:
    return KishpaClient(f"127.0.0.1:{mm.port}", f"127.0.0.1:{table_port}", **kw)


@contextlib.asynccontextmanager
async def ann_and_bob(
    mm: MatchmakingServer, table_port: int, **kw: Any
) -> AsyncIterator[tuple[KishpaClient, KishpaClient]]:
    """Two clients of ``mm`` (``kw``: their options), logged in as Ann and Bob."""
    async with client_for(mm, table_port, **kw) as ann, client_for(mm, table_port, **kw) as bob:
        await ann.login("Ann")
        await bob.login("Bob")
        yield ann, bob


async def quick_match(
    ann: KishpaClient,
    bob: KishpaClient,
    *,
    ann_declares: bool | None = None,
    bob_declares: bool | None = None,
) -> str:
    """Ann and Bob quick-match into a two-seat table (whether each client declares it
    contributes; None: the SDK's default); the table's id."""
    first = await ann.join_queue(seats=2, will_contribute=ann_declares)
    waiting = asyncio.create_task(ann.wait_for_table(first.ticket_id))
    await bob.join_queue(seats=2, will_contribute=bob_declares)
    matched = await asyncio.wait_for(waiting, 10)
    return matched.table_id


@contextlib.asynccontextmanager
async def table_and_matchmaking(
    env: dict[str, Any], table_port: int, prefix: str, config: MatchmakingConfig | None = None
) -> AsyncIterator[tuple[TableServer, MatchmakingServer]]:
    """A table server on ``table_port`` and a matchmaking server in front of it; both stopped
    at the end."""
    table = await start_table(env, table_port)
    try:
        mm = await start_mm(env, table_port, prefix, config)
        try:
            yield table, mm
        finally:
            await mm.stop(0)
    finally:
        await table.stop(0)
