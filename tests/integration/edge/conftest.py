"""A whole stack for the edge tests: real grpc.aio wallet (SQLite), table and matchmaking
servers on loopback, the machine's Redis (a database of these tests' own), player tokens and
service credentials, and a log capture that sees every record the servers write.

Each test gets fresh player ids and its own matchmaking key prefix; the tables it creates are
deleted afterwards. Nothing else in Redis is touched.
"""

from __future__ import annotations

import logging
import os
import secrets
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import grpc
import pytest
import structlog
from redis.asyncio import Redis

from kishpa.auth.v1 import auth_pb2_grpc
from kishpa.matchmaking.v1 import matchmaking_pb2_grpc as mm_grpc
from kishpa.table.v1 import table_pb2_grpc
from kishpa.wallet.v1 import wallet_pb2_grpc
from services.common.auth import TokenAuthority, bearer_metadata
from services.common.logging import configure_logging
from services.common.settings import Settings, load_settings
from services.matchmaking.server import MatchmakingServer, create_matchmaking_server
from services.matchmaking.service import MatchmakingConfig
from services.table.server import TableServer, create_table_server
from services.wallet.server import WalletServer, create_wallet_server
from shared import keys as table_keys
from tests.conftest import TEST_REDIS_URL

Metadata = tuple[tuple[str, str], ...]


@pytest.fixture(scope="session")
def redis_url() -> str:
    """Database 13 of the test Redis (``TEST_EDGE_REDIS_URL`` overrides): the table service's
    deadline index is per database, and other suites' timers must not claim these tables."""
    own = os.environ.get("TEST_EDGE_REDIS_URL")
    return own or urlunsplit(urlsplit(TEST_REDIS_URL)._replace(path="/13"))


class LogCapture(logging.Handler):
    """Every log record of the in-process servers (grpc's own loggers included)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def tracebacks(self) -> list[str]:
        """Records that carry a traceback or are errors: each one is a bug to fix."""
        return [
            f"{r.name}: {r.getMessage()[:300]}"
            for r in self.records
            if r.exc_info or r.levelno >= logging.ERROR
        ]


@pytest.fixture
def logs() -> Iterator[LogCapture]:
    """Structured logging as in production (JSON through the root logger), captured."""
    configure_logging("json", "INFO")
    capture = LogCapture()
    root = logging.getLogger()
    root.addHandler(capture)
    yield capture
    root.removeHandler(capture)
    root.handlers[:] = []
    structlog.reset_defaults()


@dataclass
class Stack:
    """The running services, their stubs and the means to call them as anyone."""

    authority: TokenAuthority
    wallet: WalletServer
    table: TableServer
    matchmaking: MatchmakingServer
    channels: dict[str, grpc.aio.Channel]
    redis: Redis
    prefix: str
    tables: set[str] = field(default_factory=set)

    def player(self, tag: str = "p") -> tuple[str, Metadata]:
        """A fresh player id and his token metadata."""
        player_id = f"{tag}{uuid.uuid4().hex[:12]}"
        token = self.authority.issue_player_token(player_id, tag.upper()).token
        return player_id, bearer_metadata(token)

    def service(self, name: str = "worker") -> Metadata:
        """Metadata carrying a service credential."""
        return bearer_metadata(self.authority.issue_service_token(name).token)

    @property
    def auth_stub(self) -> auth_pb2_grpc.AuthServiceStub:
        return auth_pb2_grpc.AuthServiceStub(self.channels["matchmaking"])

    @property
    def mm_stub(self) -> mm_grpc.MatchmakingServiceStub:
        return mm_grpc.MatchmakingServiceStub(self.channels["matchmaking"])

    @property
    def table_stub(self) -> table_pb2_grpc.TableServiceStub:
        return table_pb2_grpc.TableServiceStub(self.channels["table"])

    @property
    def wallet_stub(self) -> wallet_pb2_grpc.WalletServiceStub:
        return wallet_pb2_grpc.WalletServiceStub(self.channels["wallet"])


def _settings(service: str, redis_url: str, keys: dict[str, object], **extra: object) -> Settings:
    return load_settings(service, redis_url=redis_url, grpc_port=0, metrics_port=0, **keys, **extra)


@pytest.fixture
async def stack(
    redis_url: str, tmp_path: Path, request: pytest.FixtureRequest
) -> AsyncIterator[Stack]:
    """The stack; ``indirect`` parametrization passes setting overrides (limits...)."""
    limits_prefix = f"kishpa:test-limits:{uuid.uuid4().hex[:12]}"
    overrides: dict[str, object] = {"limits_key_prefix": limits_prefix}
    overrides.update(getattr(request, "param", {}))
    keys: dict[str, object] = {
        "token_secret": secrets.token_urlsafe(48),
        "service_secret": secrets.token_urlsafe(48),
        **overrides,
    }
    database_url = f"sqlite:///{tmp_path / 'wallet.sqlite3'}"
    wallet = create_wallet_server(
        _settings("wallet", redis_url, keys, database_url=database_url),
        address="127.0.0.1:0",
        migrate=True,
    )
    await wallet.start()
    table = create_table_server(
        _settings("table", redis_url, keys), address="127.0.0.1:0", timers=False
    )
    await table.start()
    prefix = f"kishpa:{{edge-{uuid.uuid4().hex[:12]}}}"
    matchmaking = create_matchmaking_server(
        _settings(
            "matchmaking",
            redis_url,
            keys,
            table_addr=f"127.0.0.1:{table.port}",
            wallet_addr=f"127.0.0.1:{wallet.port}",
        ),
        address="127.0.0.1:0",
        config=MatchmakingConfig(turn_seconds=600, reveal_window_seconds=600, invite_ttl_s=60),
        key_prefix=prefix,
        sweeper=False,
    )
    await matchmaking.start()
    channels = {
        name: grpc.aio.insecure_channel(f"127.0.0.1:{srv.port}")
        for name, srv in (("wallet", wallet), ("table", table), ("matchmaking", matchmaking))
    }
    redis = Redis.from_url(redis_url)
    built = Stack(
        TokenAuthority(str(keys["token_secret"]), str(keys["service_secret"])),
        wallet,
        table,
        matchmaking,
        channels,
        redis,
        prefix,
    )
    try:
        yield built
    finally:
        for channel in channels.values():
            await channel.close()
        await matchmaking.stop(0)
        await table.stop(0)
        await wallet.stop(0)
        for table_id in built.tables:
            await redis.delete(
                table_keys.state(table_id),
                table_keys.events(table_id),
                table_keys.requests(table_id),
                table_keys.outbox(table_id),
                table_keys.balances(table_id),
            )
            await redis.zrem(table_keys.deadlines(table_id), table_id)
            await redis.zrem(table_keys.unsettled(table_id), table_id)
        for pattern in (
            prefix.replace("{", "[{]").replace("}", "[}]") + ":*",
            f"*{limits_prefix}*",
        ):
            async for key in redis.scan_iter(match=pattern):
                await redis.delete(key)
        await redis.aclose()
