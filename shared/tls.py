"""Client-side TLS for every gRPC client: services calling each other, workers, SDK, CLI.

A client verifies its server against a CA file and, for mutual TLS, presents its own
certificate and key (``services.common.tls`` is the server side and the docs). Without a CA
file a client speaks plaintext (``make run`` on loopback).
"""

from __future__ import annotations

import asyncio
import os
import time
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


# -- long-lived channels that follow a rotated client certificate -----------------------------

# -- what both sides use to follow a rotation (the servers' side: services.common.tls) --------

FileStamp = tuple[tuple[int, int] | None, ...]


def file_stamp(paths: Sequence[Path | None]) -> FileStamp:
    """(mtime, size) of each file: a renewal (cert-manager swapping the mounted Secret's
    files) changes it. A file that cannot be read right now (or None) stamps as None."""
    stamps: list[tuple[int, int] | None] = []
    for path in paths:
        try:
            info = path.stat() if path is not None else None
        except OSError:
            info = None
        stamps.append((info.st_mtime_ns, info.st_size) if info is not None else None)
    return tuple(stamps)


def key_matches(cert_pem: bytes, key_pem: bytes) -> bool:
    """Whether ``key_pem`` is the private key of ``cert_pem``'s leaf certificate, so a
    half-written rotation (new certificate, old key) is never used. Raises ``ValueError``
    when either is not valid PEM."""
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    try:
        cert = x509.load_pem_x509_certificate(cert_pem)
        key = serialization.load_pem_private_key(key_pem, password=None)
    except TypeError as exc:  # an encrypted key, or a key type gRPC cannot use
        raise ValueError(str(exc)) from None
    public = serialization.PublicFormat.SubjectPublicKeyInfo
    der = serialization.Encoding.DER
    return cert.public_key().public_bytes(der, public) == key.public_key().public_bytes(der, public)


def _stamp(tls: ClientTls) -> FileStamp:
    return file_stamp((tls.ca_file, tls.cert_file, tls.key_file))


def _pair_matches(tls: ClientTls) -> bool:
    """The client's certificate and key belong together (no pair: nothing to match)."""
    if tls.cert_file is None or tls.key_file is None:
        return True
    try:
        return key_matches(tls.cert_file.read_bytes(), tls.key_file.read_bytes())
    except (OSError, ValueError):
        return False


class ReloadingChannel(grpc.aio.Channel):
    """An asyncio channel that rebuilds itself when the client's TLS files change.

    gRPC reads channel credentials once, so a long-lived channel would keep presenting the
    certificate it started with until the process restarts. Before each new call this checks
    the files' (mtime, size) (at most every ``check_every`` seconds); after a change, once the
    certificate and key match, the call and later ones go over a new channel built from the
    new files. The old channel is closed with ``grace`` seconds for the calls and streams
    still on it to finish, so no call fails because of a rotation. Stubs made on this object
    once keep working: each method looks up the current channel per call.
    """

    def __init__(
        self,
        address: str,
        tls: ClientTls,
        *,
        options: Sequence[tuple[str, Any]] = (),
        interceptors: Sequence[Any] | None = None,
        check_every: float = 1.0,
        grace: float = 600.0,
    ) -> None:
        self._address, self._tls = address, tls
        self._options, self._interceptors = list(options), interceptors
        self._check_every, self._grace = check_every, grace
        self._stamp = _stamp(tls)
        self._channel = self._build()
        self._checked = time.monotonic()
        self._retiring: set[asyncio.Task[None]] = set()

    def _build(self) -> grpc.aio.Channel:
        return grpc.aio.secure_channel(
            self._address,
            self._tls.channel_credentials(),
            options=[*self._options, *self._tls.channel_options()],
            interceptors=self._interceptors,
        )

    def current(self) -> grpc.aio.Channel:
        """The channel for a new call: rebuilt first if the TLS files changed."""
        now = time.monotonic()
        if now - self._checked < self._check_every:
            return self._channel
        self._checked = now
        stamp = _stamp(self._tls)
        if stamp == self._stamp or not _pair_matches(self._tls):
            return self._channel
        try:
            fresh = self._build()
        except TlsConfigError:
            return self._channel  # unreadable mid-rotation: keep the old one, look again later
        old, self._channel, self._stamp = self._channel, fresh, stamp
        task = asyncio.get_running_loop().create_task(old.close(grace=self._grace))
        self._retiring.add(task)
        task.add_done_callback(self._retiring.discard)
        return fresh

    def unary_unary(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return _PerCall(self, "unary_unary", method, args, kwargs)

    def unary_stream(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return _PerCall(self, "unary_stream", method, args, kwargs)

    def stream_unary(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return _PerCall(self, "stream_unary", method, args, kwargs)

    def stream_stream(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return _PerCall(self, "stream_stream", method, args, kwargs)

    async def __aenter__(self) -> ReloadingChannel:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self, grace: float | None = None) -> None:
        await self._channel.close(grace)
        for task in list(self._retiring):
            task.cancel()
        if self._retiring:
            await asyncio.gather(*self._retiring, return_exceptions=True)

    def get_state(self, try_to_connect: bool = False) -> grpc.ChannelConnectivity:
        return self._channel.get_state(try_to_connect)

    async def wait_for_state_change(self, last_observed_state: grpc.ChannelConnectivity) -> None:
        await self._channel.wait_for_state_change(last_observed_state)

    async def channel_ready(self) -> None:
        await self.current().channel_ready()


class _PerCall:
    """A stub's method on a ``ReloadingChannel``: each call goes over the current channel
    (the multicallable is made once per channel, not per call)."""

    def __init__(
        self,
        owner: ReloadingChannel,
        kind: str,
        method: str,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> None:
        self._owner, self._kind, self._method = owner, kind, method
        self._args, self._kwargs = args, kwargs
        self._made: tuple[grpc.aio.Channel, Any] | None = None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        channel = self._owner.current()
        if self._made is None or self._made[0] is not channel:
            factory = getattr(channel, self._kind)
            self._made = (channel, factory(self._method, *self._args, **self._kwargs))
        return self._made[1](*args, **kwargs)


def reloading_aio_channel(
    address: str,
    tls: ClientTls | None,
    *,
    options: Sequence[tuple[str, Any]] = (),
    interceptors: Sequence[Any] | None = None,
) -> grpc.aio.Channel:
    """A long-lived asyncio channel (a service's to another service): like ``aio_channel``,
    but it follows a renewed client certificate (``ReloadingChannel``) under mutual TLS."""
    if tls is None or tls.cert_file is None:
        return aio_channel(address, tls, options=options, interceptors=interceptors)
    return ReloadingChannel(address, tls, options=options, interceptors=interceptors)
