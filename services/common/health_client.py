"""Client side of gRPC health checking: ask a server whether a service is SERVING.

One typed place for it (the published ``HealthStub`` stubs omit the RPC methods), for
benchmarks, end-to-end tests and ``kishpa run`` waiting for a process to come up.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from shared.tls import ClientTls, aio_channel

SERVING = health_pb2.HealthCheckResponse.SERVING


async def check_health(
    channel: grpc.aio.Channel, service: str = "", rpc_seconds: float = 1.0
) -> int:
    """The serving status (``health_pb2.HealthCheckResponse.ServingStatus``) of ``service``."""
    stub: Any = health_pb2_grpc.HealthStub(channel)
    reply: health_pb2.HealthCheckResponse = await stub.Check(
        health_pb2.HealthCheckRequest(service=service), timeout=rpc_seconds
    )
    return int(reply.status)


async def wait_until_serving(
    address: str,
    service: str = "",
    deadline_seconds: float = 30.0,
    *,
    tls: ClientTls | None = None,
) -> None:
    """Return once ``service`` at ``address`` reports SERVING; else ``TimeoutError``."""
    deadline = time.monotonic() + deadline_seconds
    async with aio_channel(address, tls) as channel:
        while True:
            try:
                if await check_health(channel, service) == SERVING:
                    return
            except grpc.aio.AioRpcError:
                pass  # not listening yet, or the service is not registered yet
            if time.monotonic() >= deadline:
                raise TimeoutError(f"{address} did not report {service or 'the server'} SERVING")
            await asyncio.sleep(0.1)
