"""Bootstrap of every gRPC service: interceptors, health, reflection, metrics, shutdown.

``create_server`` builds a ready-to-start server (tests start it in-process on port 0);
``serve``/``run`` are what a service's ``main()`` calls in production: logs, the Prometheus
``/metrics`` endpoint, SIGTERM/SIGINT handling (health turns NOT_SERVING first so load
balancers stop routing, then in-flight calls get ``shutdown_grace_seconds`` to finish).
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1.health import aio as health_aio
from grpc_reflection.v1alpha import reflection
from prometheus_client import start_http_server

from services.common.auth import (
    DEFAULT_PUBLIC_METHODS,
    AuthInterceptor,
    RefusalHook,
    TokenAuthority,
)
from services.common.errors import ErrorInterceptor
from services.common.limits import Limiter, LimitsInterceptor
from services.common.logging import configure_logging, get_logger
from services.common.metrics import GrpcMetrics, MetricsInterceptor
from services.common.settings import Settings
from services.common.tls import (
    CertificateFiles,
    grpc_server_credentials,
    reloading_ssl_context,
    server_files_from_settings,
)
from services.common.tracing import configure_tracing, server_interceptors
from services.common.validation import ValidationInterceptor

_log = get_logger(__name__)

PENDING_CALLS = 20_000
"""Calls that may wait for the application before grpc starts refusing new ones."""

DEFAULT_SERVER_OPTIONS: tuple[tuple[str, Any], ...] = (
    # Two processes must never share a port silently (grpc enables SO_REUSEPORT by default).
    ("grpc.so_reuseport", 0),
    # Ping idle connections so a vanished phone does not hold a WatchTable stream for hours.
    ("grpc.keepalive_time_ms", 60_000),
    ("grpc.keepalive_timeout_ms", 20_000),
    # Accept client keepalive pings every 20 s or more (clients on mobile networks send them).
    ("grpc.http2.min_ping_interval_without_data_ms", 20_000),
    ("grpc.keepalive_permit_without_calls", 1),
    # Larger bodies are refused by grpc itself (RESOURCE_EXHAUSTED) before they are read;
    # below it, each RPC's own limit applies (services.common.validation).
    ("grpc.max_receive_message_length", 1024 * 1024),
    # Calls that arrived and wait for the application to pick them up: beyond 1,000 (grpc's
    # default) grpc refuses new ones at random, with CANCELLED, which clients cannot tell
    # from a server that ended their stream. A table process holds thousands of WatchTable
    # streams, which all come back at once after a restart (docs/operations.md).
    ("grpc.server.max_pending_requests", PENDING_CALLS),
    ("grpc.server.max_pending_requests_hard_limit", 2 * PENDING_CALLS),
)
"""Server channel options; ``create_server(options=...)`` entries override these."""

OVERALL_HEALTH = ""
"""The health-check name of the whole server (what a bare gRPC probe asks about)."""


@dataclass(frozen=True, slots=True)
class ServiceRegistration:
    """One servicer to host: its full name (``kishpa.table.v1.TableService``) and adder."""

    name: str
    servicer: Any
    add_to_server: Callable[[Any, grpc.aio.Server], None]


class KishpaServer:
    """A created (not yet started) gRPC server with its health servicer and bound port."""

    def __init__(
        self,
        server: grpc.aio.Server,
        health: health_aio.HealthServicer,
        port: int,
        names: Sequence[str],
        probe: tuple[grpc.aio.Server, int] | None = None,
    ) -> None:
        self.server = server
        self.health = health
        self.port = port
        self.service_names = tuple(names)
        self.probe_server: grpc.aio.Server | None = probe[0] if probe is not None else None
        self.probe_port = probe[1] if probe is not None else 0

    async def start(self) -> None:
        """Start serving and report SERVING for every hosted service and the server."""
        await self.server.start()
        if self.probe_server is not None:
            await self.probe_server.start()
        for name in (OVERALL_HEALTH, *self.service_names):
            await self.health.set(name, health_pb2.HealthCheckResponse.SERVING)

    async def stop(self, grace: float | None) -> None:
        """Report NOT_SERVING, then stop, letting in-flight calls run for ``grace`` seconds."""
        await self.health.enter_graceful_shutdown()
        await self.server.stop(grace)
        if self.probe_server is not None:
            await self.probe_server.stop(0)

    async def wait_for_termination(self) -> None:
        """Block until the server has stopped."""
        await self.server.wait_for_termination()


def create_server(
    services: Sequence[ServiceRegistration],
    settings: Settings,
    *,
    public_methods: Collection[str] = DEFAULT_PUBLIC_METHODS,
    address: str | None = None,
    authority: TokenAuthority | None = None,
    metrics: GrpcMetrics | None = None,
    options: Sequence[tuple[str, Any]] = (),
    limiter: Limiter | None = None,
    tls: CertificateFiles | None = None,
    on_refusal: RefusalHook | None = None,
) -> KishpaServer:
    """Build a server hosting ``services`` plus health and reflection, bound to ``address``.

    ``address`` defaults to the settings' ``host:port``; pass ``"127.0.0.1:0"`` to get a free
    port (read it from ``.port``). Every call except ``public_methods`` needs a token;
    exceptions from servicers are mapped by :mod:`services.common.errors`. With a
    ``limiter``, the abuse limits of :mod:`services.common.limits` apply after validation.
    With certificate files (``tls``, else the settings' ``KISHPA_TLS_*``) the port speaks
    TLS, mutual unless ``KISHPA_TLS_CLIENT_AUTH=0``; a workload is then who its client
    certificate says, and a service token is refused without that certificate
    (``PEER_CERTIFICATE_REQUIRED``, so server-only TLS serves players and operators only).
    """
    files = tls if tls is not None else server_files_from_settings(settings)
    mutual = files is not None and settings.tls_client_auth
    server = grpc.aio.server(
        interceptors=[
            # Outermost first: metrics see the final code, auth runs before any servicer code.
            MetricsInterceptor(metrics),
            AuthInterceptor(
                authority or TokenAuthority.from_settings(settings),
                public_methods,
                # Any TLS port: a service token needs its workload's client certificate
                # (a server-only TLS port therefore refuses service tokens).
                require_service_certificate=files is not None,
                on_refusal=on_refusal,
            ),
            # Bodies that do not decode or break a field rule never reach a servicer.
            ValidationInterceptor(),
            *([LimitsInterceptor(limiter)] if limiter is not None else []),
            ErrorInterceptor(),
            # Innermost: the span covers the servicer (nothing when tracing is off).
            *server_interceptors(),
        ],
        options=list({**dict(DEFAULT_SERVER_OPTIONS), **dict(options)}.items()),
    )
    for service in services:
        service.add_to_server(service.servicer, server)
    health = health_aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health, server)
    names = [s.name for s in services]
    reflection.enable_server_reflection(
        [
            *names,
            health_pb2.DESCRIPTOR.services_by_name["Health"].full_name,
            reflection.SERVICE_NAME,
        ],
        server,
    )
    bind = address if address is not None else settings.grpc_address
    try:
        if files is None:
            port = server.add_insecure_port(bind)
        else:
            port = server.add_secure_port(
                bind, grpc_server_credentials(files, require_client_auth=mutual)
            )
    except RuntimeError as exc:  # grpc raises when the address is taken
        raise RuntimeError(f"could not bind the gRPC server to {bind}: {exc}") from None
    if port == 0:
        raise RuntimeError(f"could not bind the gRPC server to {bind}")
    probe = _probe_server(health, settings) if files is not None else None
    return KishpaServer(server, health, port, names, probe)


def _probe_server(
    health: health_aio.HealthServicer, settings: Settings
) -> tuple[grpc.aio.Server, int] | None:
    """A plaintext port serving only the health service (``KISHPA_HEALTH_PORT``).

    Kubernetes' gRPC probes cannot speak TLS: with TLS on the service port they ask this
    one, which answers health checks and nothing else (the same health servicer, so
    NOT_SERVING during a shutdown shows here too).
    """
    if not settings.health_port:
        return None
    probe = grpc.aio.server(options=[("grpc.so_reuseport", 0)])
    health_pb2_grpc.add_HealthServicer_to_server(health, probe)
    bind = f"{settings.grpc_host}:{settings.health_port}"
    try:
        port = probe.add_insecure_port(bind)
    except RuntimeError as exc:
        raise RuntimeError(f"could not bind the health port to {bind}: {exc}") from None
    return probe, port


def start_metrics_server(settings: Settings) -> tuple[Any, Any]:
    """The Prometheus ``/metrics`` endpoint: over TLS (rotated like the gRPC port) when the
    process has a certificate, unless ``KISHPA_TLS_METRICS=0`` (a scraper on loopback)."""
    files = server_files_from_settings(settings) if settings.tls_metrics else None
    if files is None:
        return start_http_server(settings.metrics_port)
    return start_tls_http_server(settings.metrics_port, reloading_ssl_context(files))


def start_tls_http_server(port: int, context: Any, addr: str = "0.0.0.0") -> tuple[Any, Any]:
    """prometheus_client's WSGI server with our rotating ``SSLContext`` around its socket."""
    import threading
    from wsgiref.simple_server import make_server

    from prometheus_client.exposition import (
        ThreadingWSGIServer,
        _SilentHandler,
        make_wsgi_app,
    )

    httpd = make_server(
        addr, port, make_wsgi_app(), ThreadingWSGIServer, handler_class=_SilentHandler
    )
    httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    return httpd, thread


ServiceFactory = Callable[[], Awaitable[Sequence[ServiceRegistration]]]
Cleanup = Callable[[], Awaitable[None]]


async def serve(
    settings: Settings,
    services: Sequence[ServiceRegistration] | ServiceFactory,
    *,
    public_methods: Collection[str] = DEFAULT_PUBLIC_METHODS,
    cleanup: Cleanup | None = None,
    stop_event: asyncio.Event | None = None,
    limiter: Limiter | None = None,
    on_refusal: RefusalHook | None = None,
) -> int:
    """Run a service until SIGTERM/SIGINT (or ``stop_event``); returns the exit code.

    ``services`` may be an async factory, called inside the event loop, for servicers that
    need connections opened there; ``cleanup`` runs after the server has stopped.
    """
    configure_logging(settings.log_format, settings.log_level, service=settings.service)
    configure_tracing(settings.service, settings.otlp_endpoint)
    metrics_server, metrics_thread = start_metrics_server(settings)
    stop = stop_event or asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    try:
        registrations = services if isinstance(services, Sequence) else await services()
        server = create_server(
            registrations,
            settings,
            public_methods=public_methods,
            limiter=limiter,
            on_refusal=on_refusal,
        )
        await server.start()
        _log.info(
            "server.started",
            grpc_port=server.port,
            metrics_port=settings.metrics_port,
            services=list(server.service_names),
            tls="mutual"
            if settings.tls_cert_file and settings.tls_client_auth
            else ("server" if settings.tls_cert_file else "off"),
        )
        await stop.wait()
        _log.info("server.stopping", grace_seconds=settings.shutdown_grace_seconds)
        await server.stop(settings.shutdown_grace_seconds)
        if cleanup is not None:
            await cleanup()
        _log.info("server.stopped")
        return 0
    finally:
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(signum)
        metrics_server.shutdown()
        metrics_thread.join(timeout=5)


def run(
    settings: Settings,
    services: Sequence[ServiceRegistration] | ServiceFactory,
    *,
    public_methods: Collection[str] = DEFAULT_PUBLIC_METHODS,
    cleanup: Cleanup | None = None,
    on_refusal: RefusalHook | None = None,
) -> int:
    """Blocking entry point for a service's ``main()``: ``return run(settings, factory)``."""
    return asyncio.run(
        serve(
            settings,
            services,
            public_methods=public_methods,
            cleanup=cleanup,
            on_refusal=on_refusal,
        )
    )
