"""The table service's gRPC server: ``create_table_server`` for tests, ``main`` for
``kishpa serve table``.

Besides the RPCs, every process runs the deadline loop (:mod:`services.table.timers`):
replicas share the work through Redis, and whichever is alive enforces the timers.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass
from typing import Any

from redis.asyncio import BlockingConnectionPool, ConnectionPool, Redis

from kishpa.table.v1 import table_pb2, table_pb2_grpc
from services.common.server import KishpaServer, ServiceRegistration, create_server, serve
from services.common.settings import Settings, load_settings
from services.table.engine import GameEngine
from services.table.hand_engine import HandEngine
from services.table.kishpa_engine import KishpaEngine
from services.table.service import Enqueue, Tables
from services.table.servicer import TableServicer
from services.table.store import TableStore
from services.table.timers import run_timers

SERVICE_NAME = table_pb2.DESCRIPTOR.services_by_name["TableService"].full_name
ENQUEUE_ENV = "KISHPA_TABLE_ENQUEUE"
"""Set to ``0`` to write outbox records without enqueueing (the sweeper still finds them)."""


def engines() -> dict[str, GameEngine]:
    """The games this service plays, by name."""
    return {"kishpa": KishpaEngine(), "hand": HandEngine()}


def settlement_enqueue() -> Enqueue | None:
    """The Celery hand-off (``workers.enqueue``), unless disabled by the environment."""
    if os.environ.get(ENQUEUE_ENV, "1") == "0":
        return None
    from workers.enqueue import enqueue_settlement

    def enqueue(table_id: str, round_no: int, phase: str) -> None:
        enqueue_settlement(table_id=table_id, round_no=round_no, phase=phase)

    return enqueue


COMMAND_CONNECTIONS = 128
"""Redis connections for commands; callers beyond it wait (up to a timeout) for one."""
WATCH_CONNECTIONS = 20_000
"""Redis connections for blocked WatchTable reads (one per live watcher)."""
STREAM_READ_TIMEOUT_S = 30.0
"""Read timeout of the stream connections: longer than any blocking read's BLOCK time."""


def redis_clients(url: str) -> tuple[Redis, Redis]:
    """A bounded pool for commands and a separate one for blocking stream reads."""
    commands = Redis(
        connection_pool=BlockingConnectionPool.from_url(
            url, max_connections=COMMAND_CONNECTIONS, timeout=10
        )
    )
    # A blocked XREAD waits up to its BLOCK time: the read timeout must outlast it (redis-py's
    # default of 5 s equals the watch's 5 s block, so idle watches failed as UNAVAILABLE).
    streams = Redis(
        connection_pool=ConnectionPool.from_url(
            url, max_connections=WATCH_CONNECTIONS, socket_timeout=STREAM_READ_TIMEOUT_S
        )
    )
    return commands, streams


def build_tables(redis: Redis, enqueue: Enqueue | None, streams: Redis | None = None) -> Tables:
    """The use cases over Redis connections."""
    return Tables(TableStore(redis, streams=streams), engines(), enqueue=enqueue)


def registration(tables: Tables) -> ServiceRegistration:
    """The table servicer, ready for ``create_server``."""
    return ServiceRegistration(
        SERVICE_NAME, TableServicer(tables), table_pb2_grpc.add_TableServiceServicer_to_server
    )


@dataclass
class TableServer:
    """A created table server with its Redis connection and deadline loop."""

    server: KishpaServer
    tables: Tables
    redis: Redis
    streams: Redis
    timers: bool = True
    _stop: asyncio.Event | None = None
    _task: asyncio.Task[None] | None = None

    @property
    def port(self) -> int:
        """The bound gRPC port."""
        return self.server.port

    async def start(self) -> None:
        """Serve, and enforce deadlines unless created without timers."""
        await self.server.start()
        if self.timers:
            self._stop = asyncio.Event()
            self._task = asyncio.create_task(run_timers(self.tables, self._stop))

    async def stop(self, grace: float | None = None) -> None:
        """Stop the timers and the server, then close Redis."""
        if self._stop is not None and self._task is not None:
            self._stop.set()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self.server.stop(grace)
        await self.redis.aclose()
        await self.streams.aclose()


def create_table_server(
    settings: Settings,
    *,
    address: str | None = None,
    enqueue: Enqueue | None = None,
    timers: bool = True,
    options: Sequence[tuple[str, object]] = (),
) -> TableServer:
    """A ready-to-start table server (tests: ``address="127.0.0.1:0"``, then ``.port``)."""
    redis, streams = redis_clients(settings.redis_url)
    tables = build_tables(redis, enqueue, streams)
    server = create_server([registration(tables)], settings, address=address, options=options)
    return TableServer(server, tables, redis, streams, timers)


async def _serve(settings: Settings) -> int:
    redis, streams = redis_clients(settings.redis_url)
    tables = build_tables(redis, settlement_enqueue(), streams)
    stop_timers = asyncio.Event()
    task: asyncio.Task[None] | None = None

    async def factory() -> Sequence[ServiceRegistration]:
        nonlocal task
        task = asyncio.create_task(run_timers(tables, stop_timers))
        return [registration(tables)]

    async def cleanup() -> None:
        stop_timers.set()
        if task is not None:
            await task
        await redis.aclose()
        await streams.aclose()

    return await serve(settings, factory, cleanup=cleanup)


UVLOOP_ENV = "KISHPA_UVLOOP"
"""Set to ``0`` to serve on the standard asyncio loop instead of uvloop."""


def run_loop(main_coro: Coroutine[Any, Any, int]) -> int:
    """Run on uvloop when it is installed and not disabled (cheaper per RPC), else asyncio."""
    if os.environ.get(UVLOOP_ENV, "1") != "0":
        try:
            import uvloop
        except ImportError:  # an optional speed-up: the standard loop behaves the same
            pass
        else:
            return uvloop.run(main_coro)
    return asyncio.run(main_coro)


def main() -> int:
    """``kishpa serve table``: serve until SIGTERM/SIGINT."""
    return run_loop(_serve(load_settings("table")))
