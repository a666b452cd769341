"""The services on a Redis of the test's own, for tests that take that Redis away: a
``redis-server`` (AOF), ``kishpa serve wallet|table|matchmaking`` and ``kishpa worker --beat``,
as real processes on free ports."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.integration.workers_support import (
    KISHPA,
    Backend,
    Process,
    RedisServer,
    Wallet,
    Worker,
    free_port,
    port_open,
    wait_for,
)


@dataclass
class ServicesStack:
    redis: RedisServer
    services: dict[str, Process]
    """``table`` and ``matchmaking``."""
    ports: dict[str, int]
    """Their gRPC ports."""
    worker: Process
    env: dict[str, str]
    """A client's environment: the stack's Redis, secrets and service addresses."""


@contextlib.contextmanager
def services_on_own_redis(tmp: Path, log_level: str = "INFO") -> Iterator[ServicesStack]:
    """The stack, started; every process and the Redis stopped at the end."""
    server = RedisServer(tmp / "redis").start()
    backend = Backend(server.url, server.url)
    wallet = Wallet(free_port(), tmp / "wallet.sqlite3", backend).start(tmp / "wallet.log")
    ports = {"table": free_port(), "matchmaking": free_port()}
    env = backend.env(
        KISHPA_WALLET_ADDR=wallet.addr,
        KISHPA_TABLE_ADDR=f"127.0.0.1:{ports['table']}",
        KISHPA_MATCHMAKING_ADDR=f"127.0.0.1:{ports['matchmaking']}",
        KISHPA_LOG_LEVEL=log_level,
    )
    worker = Worker(wallet.addr, tmp / "worker.log", backend, extra_args=["--beat"])
    worker.extra_env = {"DATABASE_URL": wallet.url}
    services: dict[str, Process] = {}
    try:
        for name, port in ports.items():
            child = dict(
                env,
                KISHPA_GRPC_PORT=str(port),
                KISHPA_GRPC_HOST="127.0.0.1",
                KISHPA_METRICS_PORT=str(free_port()),
                KISHPA_WORKER_QUEUE=worker.queue,
            )
            services[name] = Process(name, [KISHPA, "serve", name], child, tmp / f"{name}.log")
            services[name].start()
            wait_for(lambda p=port: port_open(p), 30, f"{name} to listen")  # type: ignore[misc]
        worker.start()
        assert worker.process is not None
        yield ServicesStack(server, services, ports, worker.process, env)
    finally:
        worker.stop()
        for process in services.values():
            process.stop()
        if wallet.process is not None:
            wallet.process.stop()
        server.stop()
