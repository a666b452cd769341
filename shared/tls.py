"""Client-side TLS for every gRPC client: services calling each other, workers, SDK, CLI.

A client verifies its server against a CA file and, for mutual TLS, presents its own
certificate and key (``services.common.tls`` is the server side and the docs). Without a CA
file a client speaks plaintext (``make run`` on loopback).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc


class TlsConfigError(RuntimeError):
    """The TLS files are missing, unreadable, or do not belong together."""


@dataclass(frozen=True, slots=True)
class ClientTls:
    """How a client verifies servers (CA) and, for mutual TLS, proves who it is."""

    ca_file: Path
    cert_file: Path | None = None
    key_file: Path | None = None
    server_name: str = ""
    """Expected name in the server's certificate when it differs from the dialled host."""

    def channel_credentials(self) -> grpc.ChannelCredentials:
        """gRPC channel credentials, read from the files now (a new channel re-reads them)."""
        try:
            ca = self.ca_file.read_bytes()
            cert = self.cert_file.read_bytes() if self.cert_file else None
            key = self.key_file.read_bytes() if self.key_file else None
        except OSError as exc:
            raise TlsConfigError(f"cannot read a TLS file: {exc}") from None
        return grpc.ssl_channel_credentials(
            root_certificates=ca, private_key=key, certificate_chain=cert
        )

    def channel_options(self) -> list[tuple[str, Any]]:
        """Options naming the expected server (``grpc.ssl_target_name_override``)."""
        return [("grpc.ssl_target_name_override", self.server_name)] if self.server_name else []


def client_tls_from_env(env: Mapping[str, str] | None = None) -> ClientTls | None:
    """Client TLS for tools (SDK, CLI) from ``KISHPA_TLS_CA_FILE`` and, for mutual TLS,
    ``KISHPA_TLS_CERT_FILE``/``KISHPA_TLS_KEY_FILE``; None (plaintext) without a CA."""
    env = os.environ if env is None else env
    ca = env.get("KISHPA_TLS_CA_FILE", "")
    if not ca:
        return None
    cert, key = env.get("KISHPA_TLS_CERT_FILE", ""), env.get("KISHPA_TLS_KEY_FILE", "")
    return ClientTls(
        ca_file=Path(ca),
        cert_file=Path(cert) if cert and key else None,
        key_file=Path(key) if cert and key else None,
        server_name=env.get("KISHPA_TLS_SERVER_NAME", ""),
    )


def aio_channel(
    address: str,
    tls: ClientTls | None,
    *,
    options: Sequence[tuple[str, Any]] = (),
    interceptors: Sequence[Any] | None = None,
) -> grpc.aio.Channel:
    """An asyncio channel to ``address``: TLS when ``tls`` is given, else plaintext."""
    if tls is None:
        return grpc.aio.insecure_channel(address, options=list(options), interceptors=interceptors)
    return grpc.aio.secure_channel(
        address,
        tls.channel_credentials(),
        options=[*options, *tls.channel_options()],
        interceptors=interceptors,
    )


def sync_channel(
    address: str, tls: ClientTls | None, *, options: Sequence[tuple[str, Any]] = ()
) -> grpc.Channel:
    """A blocking channel to ``address`` (the workers'): TLS when ``tls`` is given."""
    if tls is None:
        return grpc.insecure_channel(address, options=list(options))
    return grpc.secure_channel(
        address, tls.channel_credentials(), options=[*options, *tls.channel_options()]
    )
