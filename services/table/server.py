"""The table service's gRPC server: ``create_table_server`` for tests, ``main`` for
``kishpa serve table``.

Besides the RPCs, every process runs the deadline loop (:mod:`services.table.timers`):
replicas share the work through Redis, and whichever is alive enforces the timers.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Coroutine, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import grpc

from kishpa.table.v1 import history_pb2, history_pb2_grpc, table_pb2, table_pb2_grpc
from services.common.auth import ServiceCredentials
from services.common.limits import Limiter, limiter_from_settings
from services.common.logging import get_logger
from services.common.redis_client import async_client, pubsub_source
from services.common.server import KishpaServer, ServiceRegistration, create_server, serve
from services.common.settings import Settings, load_section, load_settings
from services.common.tls import client_tls_from_settings
from services.table import durability, gctune
from services.table.engine import TableSettings
from services.table.engines import engines
from services.table.fanout import StreamHub
from services.table.history import History
from services.table.history_servicer import HistoryServicer
from services.table.service import Tables
from services.table.servicer import TableServicer
from services.table.settings import TableServiceSettings
from services.table.store import TableStore
from services.table.timers import run_timers
from services.table.wallet_balances import BalanceSource, WalletBalances
from shared import keys
from shared.celery_enqueue import CeleryEnqueue
from shared.stream import StoredEvent, stored_event
from shared.tasks import Enqueue
from shared.tls import reloading_aio_channel

log = get_logger(__name__)

SERVICE_NAME = table_pb2.DESCRIPTOR.services_by_name["TableService"].full_name
HISTORY_SERVICE_NAME = history_pb2.DESCRIPTOR.services_by_name["HistoryService"].full_name
BALANCES_CALLER = "table"
"""The service name on the table service's own credential (it reads wallet balances)."""


def settlement_enqueue(settings: Settings) -> Enqueue | None:
    """The Celery hand-off to the workers' queue, unless disabled (``KISHPA_TABLE_ENQUEUE``)."""
    if not load_section(TableServiceSettings).enqueue:
        return None
    return CeleryEnqueue(settings.broker_url, queue=settings.worker_queue)


COMMAND_CONNECTIONS = 48
"""Redis connections for commands (per cluster node on a cluster); callers beyond it wait
(up to a timeout) for one. Watchers hold none: the shared fan-out reads for all of them
(one pub/sub connection more), so a process never holds more than ~50 connections."""


def redis_clients(url: str) -> tuple[Any, StreamHub[StoredEvent]]:
    """The command client and the shared WatchTable fan-out over it."""
    commands = async_client(url, max_connections=COMMAND_CONNECTIONS)
    hub: StreamHub[StoredEvent] = StreamHub(
        commands,
        pubsub_source(commands),
        stream_key=keys.events,
        channel=keys.notify,
        decode=stored_event,
    )
    return commands, hub


def build_tables(
    redis: Any,
    enqueue: Enqueue | None,
    hub: StreamHub[StoredEvent],
    stakes: Mapping[str, Sequence[int]] | None = None,
    balances: BalanceSource | None = None,
) -> Tables:
    """The use cases over Redis connections (``stakes``: the stakes offered per game;
    ``balances``: where seated players' wallet balances are read)."""
    own = load_section(TableServiceSettings)
    store = TableStore(redis, finished_ttl_s=own.finished_table_ttl_s)
    return Tables(
        store,
        engines(),
        enqueue=enqueue,
        hub=hub,
        stakes=stakes,
        balances=balances,
        await_lone_creator=own.await_lone_creator,
    )


def wallet_balances(settings: Settings) -> tuple[grpc.aio.Channel, WalletBalances]:
    """A channel to the wallet (``KISHPA_WALLET_ADDR``) and the balance reader over it, with
    the table service's own service credential."""
    channel = reloading_aio_channel(settings.wallet_addr, client_tls_from_settings(settings))
    credentials = ServiceCredentials.for_process(settings, BALANCES_CALLER)
    return channel, WalletBalances(channel, credentials)


async def use_durability(tables: Tables) -> None:
    """Probe what Redis can promise for phase-ending commits, use it, and say so once
    (docs/workers.md, "Durable phase outcomes"); refuse to start when it was required."""
    store = tables.store
    # Asked again on every new connection, every few seconds and before a refusal: a Redis
    # restarted or reconfigured with weaker settings makes the service refuse round ends
    # under `required` (and warn under `auto`), a fixed one is used again at once.
    store.watch = await durability.watch(store, store.redis)
    if store.durability.durable:
        log.info(
            "phase_durability",
            barrier=store.durability.barrier,
            replicas=store.durability.replicas,
            server=store.durability.server,
        )
    else:
        log.warning(
            "phase_outcomes_not_durable",
            server=store.durability.server,
            hint="a Redis crash may lose an announced round end: use Redis >= 7.2 with "
            "appendonly yes, or appendfsync always",
        )


def registration(
    tables: Tables, defaults: TableSettings | None = None, history: History | None = None
) -> ServiceRegistration:
    """The table servicer, ready for ``create_server`` (``defaults``: the timers a
    CreateTable leaving them unset gets, from KISHPA_TABLE_*; ``history``: the round
    archive GetRoundRecord reads first)."""
    return ServiceRegistration(
        SERVICE_NAME,
        TableServicer(tables, defaults=defaults, history=history),
        table_pb2_grpc.add_TableServiceServicer_to_server,
    )


def history_registration(history: History) -> ServiceRegistration:
    """The history servicer (the round archive's reads), ready for ``create_server``."""
    return ServiceRegistration(
        HISTORY_SERVICE_NAME,
        HistoryServicer(history),
        history_pb2_grpc.add_HistoryServiceServicer_to_server,
    )


@dataclass
class TableServer:
    """A created table server with its Redis connection and deadline loop."""

    server: KishpaServer
    tables: Tables
    redis: Any
    hub: StreamHub[StoredEvent]
    timers: bool = True
    limiter: Limiter | None = None
    wallet_channel: grpc.aio.Channel | None = None
    _stop: asyncio.Event | None = None
    _task: asyncio.Task[None] | None = None

    @property
    def port(self) -> int:
        """The bound gRPC port."""
        return self.server.port

    async def start(self) -> None:
        """Serve, and enforce deadlines unless created without timers."""
        await use_durability(self.tables)
        await self.hub.start()
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
        if self.tables.store.watch is not None:
            await self.tables.store.watch.stop()
        await self.hub.stop()
        await self.redis.aclose()
        if self.limiter is not None:
            await self.limiter.close()
        if self.wallet_channel is not None:
            await self.wallet_channel.close()


def create_table_server(
    settings: Settings,
    *,
    address: str | None = None,
    enqueue: Enqueue | None = None,
    timers: bool = True,
    options: Sequence[tuple[str, object]] = (),
    read_balances: bool = False,
) -> TableServer:
    """A ready-to-start table server (tests: ``address="127.0.0.1:0"``, then ``.port``);
    ``read_balances``: read seated players' balances from the wallet at ``wallet_addr``."""
    redis, hub = redis_clients(settings.redis_url)
    channel, balances = wallet_balances(settings) if read_balances else (None, None)
    tables = build_tables(redis, enqueue, hub, settings.stakes(), balances)
    limiter = limiter_from_settings(settings)
    history = History(settings.archive_url)
    server = create_server(
        [
            registration(tables, settings.table_defaults(), history),
            history_registration(history),
        ],
        settings,
        address=address,
        options=options,
        limiter=limiter,
    )
    return TableServer(server, tables, redis, hub, timers, limiter, channel)


async def _serve(settings: Settings) -> int:
    enqueue = settlement_enqueue(settings)
    if enqueue is not None:
        settings.require_broker_url()
    redis, hub = redis_clients(settings.redis_url)
    wallet_channel, balances = wallet_balances(settings)
    tables = build_tables(redis, enqueue, hub, settings.stakes(), balances)
    stop_timers = asyncio.Event()
    task: asyncio.Task[None] | None = None

    async def factory() -> Sequence[ServiceRegistration]:
        nonlocal task
        await use_durability(tables)
        gctune.tune()
        await hub.start()
        task = asyncio.create_task(run_timers(tables, stop_timers))
        history = History(settings.archive_url)
        registrations = [
            registration(tables, settings.table_defaults(), history),
            history_registration(history),
        ]
        gctune.freeze_startup()  # what start-up allocated is never walked again
        gctune.measure()  # pauses from here on (not the start-up collection)
        return registrations

    limiter = limiter_from_settings(settings)

    async def cleanup() -> None:
        stop_timers.set()
        if task is not None:
            await task
        if tables.store.watch is not None:
            await tables.store.watch.stop()
        await hub.stop()
        await redis.aclose()
        if limiter is not None:
            await limiter.close()
        await wallet_channel.close()

    return await serve(settings, factory, cleanup=cleanup, limiter=limiter)


def run_loop(main_coro: Coroutine[Any, Any, int], *, use_uvloop: bool = True) -> int:
    """Run on uvloop when it is installed and not disabled (``KISHPA_UVLOOP``; cheaper per
    RPC), else asyncio."""
    if use_uvloop:
        try:
            import uvloop
        except ImportError:  # an optional speed-up: the standard loop behaves the same
            pass
        else:
            return uvloop.run(main_coro)
    return asyncio.run(main_coro)


def main() -> int:
    """``kishpa serve table``: serve until SIGTERM/SIGINT."""
    settings = load_settings("table")
    load_section(TableServiceSettings)  # a bad value stops the start, naming its variable
    try:
        return run_loop(_serve(settings), use_uvloop=settings.uvloop)
    except durability.DurabilityRequiredError as exc:
        print(f"kishpa serve table: {exc}", file=sys.stderr)
        return 2
