"""Games played to their settlement through real processes, for the settlement and finance
suites: bots play a two-round Kishpa game or a whole Hand game at a ``kishpa serve table``
started with :data:`TOKEN_SECRET`, and the finance suites' wallet runs on SQLite or
PostgreSQL."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import secrets
import subprocess
import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import pytest

from cli.play.bot import BotPlayer
from cli.play.games import HAND
from devkit.postgres import temporary_postgres_database
from kishpa.common.v1 import common_pb2
from kishpa.table.v1 import table_pb2, table_pb2_grpc
from sdk import table_settings
from services.common.auth import TokenAuthority, bearer_metadata
from services.wallet.migrate import upgrade
from shared import keys
from tests.conftest import TEST_DATABASE_URL
from tests.integration.workers_support import (
    KISHPA,
    SHARED,
    Process,
    Wallet,
    Worker,
    free_port,
    start_table_service,
)

TOKEN_SECRET = secrets.token_urlsafe(48)
"""The player-token key of the table services these suites start."""

TABLE_KEYS = (keys.state, keys.events, keys.requests, keys.outbox, keys.settled, keys.balances)
"""Every key a table service and a worker write for one table."""


def forget_tables(client: Any, table_ids: Iterable[str], creators: Iterable[str] = ()) -> None:
    """Remove what ``table_ids`` left in Redis (their keys, their deadline and unsettled
    entries) and the create-request keys of ``creators``."""
    for table in table_ids:
        for key in TABLE_KEYS:
            client.delete(key(table))
        client.zrem(keys.deadlines(table), table)
        client.zrem(keys.unsettled(table), table)
    for creator in creators:
        for key in client.scan_iter(match=f"kishpa:create:{creator}:*"):
            client.delete(key)


@dataclass
class SettlementStack:
    """``kishpa serve wallet``, ``kishpa worker`` and ``kishpa serve table`` (its port:
    ``port``, its token key :data:`TOKEN_SECRET`) on the settlement suites' Redis."""

    wallet: Wallet
    worker: Worker
    table: Process
    port: int
    client: Any
    """A client of that Redis."""
    tables: list[str] = field(default_factory=list)
    """Tables the test made: forgotten (:func:`forget_tables`) once the processes stop."""
    creators: list[str] = field(default_factory=list)
    """Players whose create-request keys go with them."""


@contextlib.contextmanager
def settlement_stack(tmp_path: Path, wallet: Wallet | None = None) -> Iterator[SettlementStack]:
    """The three processes, started (``wallet``: one on another database, not started yet);
    stopped at the end, then the test's tables forgotten."""
    wallet = wallet or Wallet(free_port(), tmp_path / "wallet.sqlite3", SHARED)
    wallet.start(tmp_path / "wallet.log")
    worker = Worker(wallet.addr, tmp_path / "worker.log", SHARED).start(concurrency=2)
    table, port = start_table_service(tmp_path, worker, wallet, TOKEN_SECRET)
    stack = SettlementStack(wallet, worker, table, port, SHARED.client())
    try:
        yield stack
    finally:
        for process in (table, wallet.process):
            if process is not None:
                process.stop()
        worker.stop()
        forget_tables(stack.client, stack.tables, stack.creators)
        stack.client.close()


async def _seat_and_start(
    stub: Any,  # an aio TableServiceStub
    md: dict[str, Any],
    players: list[str],
    settings: table_pb2.TableSettings,
    created_ids: list[str],
) -> str:
    """The first player creates a table with ``settings``, the others join, he starts the
    game; ``created_ids`` gets the table's id as soon as it exists (cleaned up even if the
    game then fails)."""
    created = await stub.CreateTable(
        table_pb2.CreateTableRequest(settings=settings, request_id=uuid.uuid4().hex),
        metadata=md[players[0]],
    )
    table_id = created.table.table_id
    created_ids.append(table_id)
    for p in players[1:]:
        await stub.JoinTable(
            table_pb2.JoinTableRequest(table_id=table_id, request_id=uuid.uuid4().hex),
            metadata=md[p],
        )
    await stub.StartGame(
        table_pb2.StartGameRequest(table_id=table_id, request_id=uuid.uuid4().hex),
        metadata=md[players[0]],
    )
    return str(table_id)


async def play_two_round_game(
    port: int, players: list[str], created_ids: list[str], stake: int = 1
) -> str:
    """Seat ``players`` at a new table of the service on ``port`` and let bots play it to its
    close (round 2 is the last); ``created_ids`` gets the table's id as soon as it exists."""
    authority = TokenAuthority(TOKEN_SECRET)
    md = {p: bearer_metadata(authority.issue_player_token(p, p).token) for p in players}
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = table_pb2_grpc.TableServiceStub(channel)
        settings = table_settings(
            common_pb2.GAME_KISHPA,
            len(players),
            stake=stake,
            turn_seconds=60,
            reveal_window_seconds=1,  # a window nobody acts in closes soon
            next_round_pause_ms=30,
        )
        table_id = await _seat_and_start(stub, md, players, settings, created_ids)
        # Pressed during round 1: round 2 is the last, and its end empties the bowl.
        await stub.PressLastRound(
            table_pb2.PressLastRoundRequest(table_id=table_id, request_id=uuid.uuid4().hex),
            metadata=md[players[0]],
        )
        bots = [
            BotPlayer(channel, authority.issue_player_token(p, p).token, bytes([n + 40]) * 80)
            for n, p in enumerate(players)
        ]
        idle_since = time.monotonic()
        while time.monotonic() - idle_since < 60:
            view = await bots[0].view(table_id)
            if view.status == table_pb2.TABLE_STATUS_CLOSED:
                return table_id
            moved = False
            for bot in bots:
                if await bot.play(table_id, await bot.view(table_id)) is not None:
                    moved = True
            if moved:
                idle_since = time.monotonic()
            else:
                await asyncio.sleep(0.05)  # the table's deadline loop closes windows, starts rounds
    raise AssertionError(f"the game stalled: {view}")


async def play_hand_game(
    port: int, players: list[str], stake: int = 1
) -> tuple[str, table_pb2.TableView]:
    """Four bots play a whole game at ``stake``; returns the table id and the final view."""
    authority = TokenAuthority(TOKEN_SECRET)
    md = {p: bearer_metadata(authority.issue_player_token(p, p).token) for p in players}
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = table_pb2_grpc.TableServiceStub(channel)
        settings = table_settings(
            common_pb2.GAME_HAND, len(players), stake=stake, turn_seconds=60, next_round_pause_ms=20
        )
        table_id = await _seat_and_start(stub, md, players, settings, [])
        bots = [
            BotPlayer(channel, authority.issue_player_token(p, p).token, bytes([n + 7]) * 80, HAND)
            for n, p in enumerate(players)
        ]
        idle_since = time.monotonic()
        view = await bots[0].view(table_id)
        while time.monotonic() - idle_since < 60:
            view = await bots[0].view(table_id)
            if view.status == table_pb2.TABLE_STATUS_CLOSED:
                return table_id, view
            moved = False
            for bot in bots:
                # One read per player and round of the loop: well inside the per-player
                # read limit (KISHPA_LIMIT_PLAYER_READS) however fast the machine is.
                mine = view if bot is bots[0] else await bot.view(table_id)
                if await bot.play(table_id, mine) is not None:
                    moved = True
            if moved:
                idle_since = time.monotonic()
            else:
                await asyncio.sleep(0.02)  # the table's deadline loop deals the next deal
    raise AssertionError(f"the game stalled: {view}")


class UrlWallet(Wallet):
    """``kishpa serve wallet`` on any database URL (a PostgreSQL one here)."""

    database_url: str = ""

    @property
    def url(self) -> str:
        return self.database_url or super().url


def month_bounds(now: dt.datetime) -> tuple[dt.datetime, dt.datetime]:
    """The first instant of ``now``'s month and of the next."""
    start = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    return start, (start + dt.timedelta(days=32)).replace(day=1)


def wallet_cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """``kishpa wallet ARGS`` with ``env``, its output captured."""
    return subprocess.run(
        [KISHPA, "wallet", *args], env=env, capture_output=True, text=True, timeout=120
    )


@pytest.fixture(params=["sqlite", "postgres"])
def database_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """The wallet's database: "" (the wallet's own SQLite file) or a fresh PostgreSQL one."""
    if request.param == "sqlite":
        yield ""
        return
    with temporary_postgres_database(TEST_DATABASE_URL) as url:
        upgrade(url)
        yield url
