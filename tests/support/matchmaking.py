"""Matchmaking over real gRPC servers (matchmaking and table) on loopback, for the tests
that play through it: its own Redis database, key prefix and players per test, cleaned up after."""

from __future__ import annotations

import os
import secrets
import uuid
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import grpc
import pytest
from redis.asyncio import Redis

from kishpa.matchmaking.v1 import matchmaking_pb2 as mm_pb2
from kishpa.matchmaking.v1 import matchmaking_pb2_grpc as mm_grpc
from services.common.auth import TokenAuthority, bearer_metadata
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


# Long timers: the tables made here must not play by themselves while the test inspects them.
CONFIG = MatchmakingConfig(turn_seconds=600, reveal_window_seconds=600, invite_ttl_s=60)


@pytest.fixture
def secrets_env() -> dict[str, str]:
    return {"token_secret": secrets.token_urlsafe(48), "service_secret": secrets.token_urlsafe(48)}


@pytest.fixture
async def table_server(redis_url: str, secrets_env: dict[str, str]) -> AsyncIterator[TableServer]:
    settings = load_settings(
        "table", redis_url=redis_url, grpc_port=0, metrics_port=0, **secrets_env
    )
    srv = create_table_server(settings, address="127.0.0.1:0", timers=False)
    await srv.start()
    yield srv
    await srv.stop(0)


@pytest.fixture
async def redis(redis_url: str) -> AsyncIterator[Redis]:
    client = async_client(redis_url)
    yield client
    await client.aclose()


@pytest.fixture
def prefix() -> str:
    return f"kishpa:mm-test-{uuid.uuid4().hex[:12]}"


@pytest.fixture
async def cleanup(redis: Redis, prefix: str) -> AsyncIterator[set[str]]:
    """Table ids to delete after the test; the test's own matchmaking keys go too."""
    tables: set[str] = set()
    yield tables
    for table_id in tables:
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


def mm_settings(
    redis_url: str, secrets_env: dict[str, str], table_port: int, wallet_port: int = 1
) -> Settings:
    return load_settings(
        "matchmaking",
        redis_url=redis_url,
        grpc_port=0,
        metrics_port=0,
        table_addr=f"127.0.0.1:{table_port}",
        wallet_addr=f"127.0.0.1:{wallet_port}",
        **secrets_env,
    )


@pytest.fixture
async def mm_server(
    redis_url: str,
    secrets_env: dict[str, str],
    table_server: TableServer,
    prefix: str,
    request: pytest.FixtureRequest,
) -> AsyncIterator[MatchmakingServer]:
    config = getattr(request, "param", CONFIG)
    srv = create_matchmaking_server(
        mm_settings(redis_url, secrets_env, table_server.port),
        address="127.0.0.1:0",
        config=config,
        key_prefix=prefix,
        open_wallets=False,
    )
    await srv.start()
    yield srv
    await srv.stop(0)


@pytest.fixture
async def channel(mm_server: MatchmakingServer) -> AsyncIterator[grpc.aio.Channel]:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{mm_server.port}") as ch:
        yield ch


@pytest.fixture
def mm(channel: grpc.aio.Channel) -> mm_grpc.MatchmakingServiceStub:
    return mm_grpc.MatchmakingServiceStub(channel)


@pytest.fixture
def authority(secrets_env: dict[str, str]) -> TokenAuthority:
    return TokenAuthority(secrets_env["token_secret"], secrets_env["service_secret"])


def md_for(authority: TokenAuthority, player_id: str) -> tuple[tuple[str, str], ...]:
    return bearer_metadata(authority.issue_player_token(player_id, player_id.upper()).token)


def new_players(n: int) -> list[str]:
    run = uuid.uuid4().hex[:8]
    return [f"p{run}x{i}" for i in range(n)]


async def final_ticket(mm: Any, md: Any, ticket_id: str) -> mm_pb2.QueueTicket:
    """The ticket once it left the waiting state (WatchQueue ends there)."""
    last = None
    async for message in mm.WatchQueue(mm_pb2.WatchQueueRequest(ticket_id=ticket_id), metadata=md):
        last = message.ticket
    assert last is not None
    return last
