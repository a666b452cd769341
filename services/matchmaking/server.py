"""The matchmaking gRPC server (it also hosts kishpa.auth.v1 login):
``create_matchmaking_server`` for tests, ``main`` for ``kishpa serve matchmaking``.

It needs the player-token key (to sign logins) and the service-credential key (to create
tables and open wallets), Redis, and the table and wallet services' addresses. Every
process also runs the sweeper (expired tickets, groups whose seating was interrupted).
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from dataclasses import dataclass, field, replace

import grpc
from redis.asyncio import Redis

from kishpa.matchmaking.v1 import matchmaking_pb2, matchmaking_pb2_grpc
from services.common.auth import ServiceCredentials, TokenAuthority
from services.common.limits import Limiter, limiter_from_settings
from services.common.redis_client import async_client
from services.common.server import KishpaServer, ServiceRegistration, create_server, serve
from services.common.settings import Settings, SettingsError, load_section, load_settings
from services.common.tls import client_tls_from_settings
from services.matchmaking.gateways import SERVICE_NAME as CALLER_NAME
from services.matchmaking.gateways import TableGateway, WalletGateway
from services.matchmaking.keys import DEFAULT_PREFIX, Keys
from services.matchmaking.login import login_registration
from services.matchmaking.login_memory import LoginMemory
from services.matchmaking.service import Matchmaking, MatchmakingConfig
from services.matchmaking.servicer import MatchmakingServicer
from services.matchmaking.settings import MatchmakingSettings
from services.matchmaking.store import MatchStore
from shared.tls import reloading_aio_channel

SERVICE_NAME = matchmaking_pb2.DESCRIPTOR.services_by_name["MatchmakingService"].full_name
REDIS_CONNECTIONS = 256
"""Commands and WatchQueue subscriptions share this pool; callers beyond it wait."""


@dataclass
class Wiring:
    """Everything one matchmaking process opens (closed by :meth:`close`)."""

    matchmaking: Matchmaking
    registrations: list[ServiceRegistration]
    redis: Redis
    channels: list[grpc.aio.Channel] = field(default_factory=list)
    limiter: Limiter | None = None

    async def close(self) -> None:
        """Stop the ticket notifier, close the channels and Redis."""
        await self.matchmaking.notifier.close()
        for channel in self.channels:
            await channel.close()
        await self.redis.aclose()
        if self.limiter is not None:
            await self.limiter.close()


def wire(
    settings: Settings,
    *,
    config: MatchmakingConfig | None = None,
    key_prefix: str = DEFAULT_PREFIX,
    open_wallets: bool = True,
    limiter: Limiter | None = None,
) -> Wiring:
    """Connect the use cases to Redis, the table service and the wallet (must run in a loop)."""
    authority = TokenAuthority.from_settings(settings)
    settings.require_workload_identity()
    credentials = ServiceCredentials.for_process(settings, CALLER_NAME)
    redis = async_client(settings.redis_url, max_connections=REDIS_CONNECTIONS)
    tls = client_tls_from_settings(settings)
    table_channel = reloading_aio_channel(settings.table_addr, tls)
    channels = [table_channel]
    wallet = None
    if open_wallets:
        wallet_channel = reloading_aio_channel(settings.wallet_addr, tls)
        channels.append(wallet_channel)
        wallet = WalletGateway(wallet_channel, credentials)
    matchmaking = Matchmaking(
        MatchStore(redis, Keys(key_prefix)),
        TableGateway(table_channel, credentials),
        # The stakes offered come from the settings, like the table service's.
        replace(
            config or MatchmakingConfig(),
            stakes=settings.stakes(),
            table_defaults=settings.table_defaults(),
        ),
    )
    registrations = [
        ServiceRegistration(
            SERVICE_NAME,
            MatchmakingServicer(matchmaking),
            matchmaking_pb2_grpc.add_MatchmakingServiceServicer_to_server,
        ),
        login_registration(
            authority,
            wallet,
            limiter,
            guest_login=settings.guest_login,
            memory=LoginMemory(redis, Keys(key_prefix)),
        ),
    ]
    return Wiring(matchmaking, registrations, redis, channels, limiter)


@dataclass
class MatchmakingServer:
    """A created matchmaking server with its connections and sweeper."""

    server: KishpaServer
    wiring: Wiring
    sweeper: bool = True
    _stop: asyncio.Event | None = None
    _task: asyncio.Task[None] | None = None

    @property
    def port(self) -> int:
        """The bound gRPC port."""
        return self.server.port

    @property
    def matchmaking(self) -> Matchmaking:
        """The use cases (tests inspect the store through it)."""
        return self.wiring.matchmaking

    async def start(self) -> None:
        """Serve, and sweep unless created without the sweeper."""
        await self.server.start()
        if self.sweeper:
            self._stop = asyncio.Event()
            self._task = asyncio.create_task(self.wiring.matchmaking.run_sweeper(self._stop))

    async def stop(self, grace: float | None = None) -> None:
        """Stop the sweeper and the server, then close connections."""
        if self._stop is not None and self._task is not None:
            self._stop.set()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self.server.stop(grace)
        await self.wiring.close()


def create_matchmaking_server(
    settings: Settings,
    *,
    address: str | None = None,
    config: MatchmakingConfig | None = None,
    key_prefix: str = DEFAULT_PREFIX,
    open_wallets: bool = True,
    sweeper: bool = True,
) -> MatchmakingServer:
    """A ready-to-start server (tests: ``address="127.0.0.1:0"``, then ``.port``)."""
    wiring = wire(
        settings,
        config=config,
        key_prefix=key_prefix,
        open_wallets=open_wallets,
        limiter=limiter_from_settings(settings),
    )
    server = create_server(wiring.registrations, settings, address=address, limiter=wiring.limiter)
    return MatchmakingServer(server, wiring, sweeper)


async def _serve(settings: Settings) -> int:
    wiring: Wiring | None = None
    stop_sweeper = asyncio.Event()
    task: asyncio.Task[None] | None = None
    limiter = limiter_from_settings(settings)

    async def factory() -> list[ServiceRegistration]:
        nonlocal wiring, task
        wiring = wire(
            settings,
            key_prefix=load_section(MatchmakingSettings).key_prefix,
            limiter=limiter,
        )
        task = asyncio.create_task(wiring.matchmaking.run_sweeper(stop_sweeper))
        return wiring.registrations

    async def cleanup() -> None:
        stop_sweeper.set()
        if task is not None:
            await task
        if wiring is not None:
            await wiring.close()

    return await serve(settings, factory, cleanup=cleanup, limiter=limiter)


def main() -> int:
    """``kishpa serve matchmaking``: serve until SIGTERM/SIGINT."""
    try:
        settings = load_settings("matchmaking")
        load_section(MatchmakingSettings)  # a bad value stops the start, naming its variable
    except SettingsError as exc:
        print(f"kishpa serve matchmaking: {exc}", file=sys.stderr)
        return 2
    return asyncio.run(_serve(settings))
