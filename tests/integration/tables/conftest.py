"""Fixtures of the table-service tests: a real grpc.aio table server on loopback over the
machine's Redis, players with tokens, and cleanup of the keys a table leaves."""

from __future__ import annotations

import json
import os
import secrets
import uuid
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import grpc
import pytest
from redis.asyncio import Redis

from kishpa.table.v1 import table_pb2, table_pb2_grpc
from services.common.auth import TokenAuthority, bearer_metadata
from services.common.redis_client import async_client
from services.common.settings import Settings, load_settings
from services.table.server import TableServer, create_table_server
from shared import keys
from tests.conftest import TEST_REDIS_URL

PLAYERS = ["ann", "bob", "cat", "dan"]


@pytest.fixture(scope="session")
def redis_url() -> str:
    """A Redis database of the table tests' own (db 11 of the test server unless
    ``TEST_TABLE_REDIS_URL`` says otherwise): the deadline index is per database, and table
    services of other tests on the shared machine must not claim these tables' timers."""
    own = os.environ.get("TEST_TABLE_REDIS_URL")
    return own or urlunsplit(urlsplit(TEST_REDIS_URL)._replace(path="/11"))


@pytest.fixture
def settings(redis_url: str) -> Settings:
    return load_settings(
        "table",
        redis_url=redis_url,
        token_secret=secrets.token_urlsafe(48),
        service_secret=secrets.token_urlsafe(48),
        grpc_port=0,
        metrics_port=0,
    )


@pytest.fixture
def authority(settings: Settings) -> TokenAuthority:
    return TokenAuthority.from_settings(settings)


@pytest.fixture
async def server(settings: Settings) -> AsyncIterator[TableServer]:
    srv = create_table_server(settings, address="127.0.0.1:0")
    await srv.start()
    yield srv
    await srv.stop(0)


@pytest.fixture
async def channel(server: TableServer) -> AsyncIterator[grpc.aio.Channel]:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as ch:
        yield ch


@pytest.fixture
async def redis(redis_url: str) -> AsyncIterator[Redis]:
    client = async_client(redis_url)
    yield client
    await client.aclose()


@pytest.fixture
def players() -> list[str]:
    suffix = uuid.uuid4().hex[:8]
    return [f"{p}-{suffix}" for p in PLAYERS]


@pytest.fixture
def md(authority: TokenAuthority, players: list[str]) -> dict[str, Any]:
    """Call metadata per player."""
    return {p: bearer_metadata(authority.issue_player_token(p, p.upper()).token) for p in players}


@pytest.fixture
def stub(channel: grpc.aio.Channel) -> table_pb2_grpc.TableServiceStub:
    return table_pb2_grpc.TableServiceStub(channel)


async def cleanup(redis: Redis, table_id: str) -> None:
    """Delete every key the table left (its test's tables only; nothing else is touched)."""
    await redis.delete(
        keys.state(table_id),
        keys.events(table_id),
        keys.requests(table_id),
        keys.outbox(table_id),
        keys.settled(table_id),
        keys.balances(table_id),
    )
    await redis.zrem(keys.deadlines(table_id), table_id)
    await redis.zrem(keys.unsettled(table_id), table_id)


async def versioned_state(redis: Redis, table_id: str) -> tuple[int, dict[str, Any]]:
    """The table's stored version and whole state (hidden parts included), read directly."""
    version, raw = await redis.hmget(keys.state(table_id), ["version", "state"])  # type: ignore[misc]
    return int(version), json.loads(raw)


# Fields that carry a tile or card id, in both spellings MessageToDict may produce.
ID_FIELDS = frozenset(
    {"id", "tile_id", "tileId", "discard_id", "discardId", "tile_ids", "tileIds"}
    | {"must_use", "mustUse"}
)


def ids_in(obj: Any) -> set[int]:
    """Every tile or card id a message (as a dict) carries, for the leak checks."""
    found: set[int] = set()
    if isinstance(obj, dict):
        for key, value in obj.items():
            if key in ID_FIELDS and value is not None:
                values = value if isinstance(value, list) else [value]
                found.update(int(v) for v in values if isinstance(v, int | float | str))
            else:
                found |= ids_in(value)
    elif isinstance(obj, list):
        for item in obj:
            found |= ids_in(item)
    return found


def private_part(event: table_pb2.TableEvent) -> bool:
    """Whether an event carries a fact only its own seat may see (a dealt hand, a tile drawn
    from the pile, a reveal window's private prompts)."""
    kind = event.WhichOneof("event")
    if kind == "dealt":
        return bool(event.dealt.tiles)
    if kind == "drew":
        return event.drew.source == table_pb2.DRAW_SOURCE_PILE and event.drew.HasField("tile")
    return kind in ("card_drawn", "may_reveal", "reveal_declined")
