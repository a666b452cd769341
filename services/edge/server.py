"""``kishpa serve edge``: the gRPC-Web edge on Hypercorn (HTTP/1.1 and cleartext HTTP/2).

Configuration (docs/configuration.md): its own in :class:`EdgeSettings` (port, host, CORS
origins, web root), and the services at ``KISHPA_MATCHMAKING_ADDR``, ``KISHPA_TABLE_ADDR``,
``KISHPA_WALLET_ADDR``.
With ``KISHPA_TLS_CERT_FILE``/``KISHPA_TLS_KEY_FILE`` it serves HTTPS (HTTP/2 by ALPN), and
with ``KISHPA_TLS_CA_FILE`` it calls the services over (mutual) TLS as the ``edge`` workload.
"""

from __future__ import annotations

import asyncio
import signal
import ssl
from pathlib import Path

import structlog
from hypercorn.asyncio import serve
from hypercorn.config import Config

from services.common.logging import configure_logging
from services.common.settings import Settings, load_section, load_settings
from services.common.tls import (
    CertificateFiles,
    client_tls_from_settings,
    reloading_ssl_context,
    server_files_from_settings,
)
from services.edge.app import LIVE_PATH, READY_PATH, Edge, EdgeConfig
from services.edge.settings import EdgeSettings

log = structlog.get_logger("kishpa.edge")

PROBES = (READY_PATH, LIVE_PATH)
"""The readiness and liveness probe paths."""
DEFAULT_WEB_ROOT = Path(__file__).resolve().parents[2] / "web" / "dist"


def edge_config(settings: Settings, own: EdgeSettings) -> EdgeConfig:
    """The edge's configuration from the shared settings and its own."""
    root = Path(own.web_root or DEFAULT_WEB_ROOT)
    return EdgeConfig(
        upstreams={
            "matchmaking": settings.matchmaking_addr,
            "table": settings.table_addr,
            "wallet": settings.wallet_addr,
        },
        cors_origins=own.origins(),
        web_root=root if root.is_dir() else None,
        upstream_tls=client_tls_from_settings(settings),
    )


class TlsConfig(Config):
    """Hypercorn's configuration with our rotating ``SSLContext`` (the certificate files are
    re-read at the next handshake after they change: docs/operations.md)."""

    def __init__(self, files: CertificateFiles) -> None:
        super().__init__()
        self._context = reloading_ssl_context(files, alpn=("h2", "http/1.1"))

    @property
    def ssl_enabled(self) -> bool:
        return True

    def create_ssl_context(self) -> ssl.SSLContext:
        return self._context


def hypercorn_config(
    host: str, port: int, grace_seconds: float, tls: CertificateFiles | None = None
) -> Config:
    """Hypercorn serving HTTP/1.1 and HTTP/2 on one port: over TLS (ALPN) with ``tls``,
    else in cleartext (prior knowledge or Upgrade: h2c)."""
    config = Config() if tls is None else TlsConfig(tls)
    config.bind = [f"[{host}]:{port}" if ":" in host else f"{host}:{port}"]
    config.graceful_timeout = grace_seconds
    config.accesslog = None
    config.keep_alive_timeout = 75  # browsers keep an idle connection ~60 s
    return config


async def serve_edge(edge: Edge, config: Config, stop: asyncio.Event) -> None:
    """Serve until ``stop`` is set (then finish running calls within the grace period)."""
    await serve(edge, config, shutdown_trigger=stop.wait)  # type: ignore[arg-type]


def main() -> int:
    """Run the edge until SIGTERM or SIGINT."""
    settings = load_settings("edge", grpc_port=0, metrics_port=0)
    configure_logging(settings.log_format, settings.log_level, service="edge")
    own = load_section(EdgeSettings)
    config_of_edge = edge_config(settings, own)
    host, port = own.host, own.port
    edge = Edge(config_of_edge)

    async def run() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        log.info(
            "edge_starting",
            address=f"{host}:{port}",
            upstreams=dict(config_of_edge.upstreams),
            web_root=str(config_of_edge.web_root),
            cors=sorted(config_of_edge.cors_origins),
        )
        config = hypercorn_config(
            host, port, settings.shutdown_grace_seconds, server_files_from_settings(settings)
        )
        await serve_edge(edge, config, stop)

    if settings.uvloop:
        try:
            import uvloop
        except ImportError:  # an optional speed-up: the standard loop behaves the same
            pass
        else:
            uvloop.run(run())
            return 0
    asyncio.run(run())
    return 0
