"""TLS for every listener and every client, from certificate files that may be rotated.

A process is configured with three PEM files (``docs/operations.md``, *TLS and workload
identities*): its certificate chain (``KISHPA_TLS_CERT_FILE``), its private key
(``KISHPA_TLS_KEY_FILE``) and the CA that signs the peers it talks to
(``KISHPA_TLS_CA_FILE``). With a certificate the gRPC server, the edge and the metrics
endpoint speak TLS; with a CA every client verifies the server against it and, when the
process has a certificate too, presents it (mutual TLS).

Rotation without a restart: :class:`CertificateFiles` notices a change of the files (their
modification time and size) at the next TLS handshake and switches to the new pair once the
key matches the certificate (a half-written rotation keeps the old pair). gRPC asks through
``grpc.dynamic_ssl_server_credentials``' fetcher before each handshake; the HTTP listeners
(edge, metrics) through the ``ssl.SSLContext``'s SNI callback, which may replace the context
of the connection being made. Established connections keep the certificate they started
with; nothing is dropped.

A workload's identity is its certificate's: the URI SAN ``spiffe://kishpa/<workload>``
(:func:`workload_uri`), else its first DNS SAN's first label, else its common name.
:func:`peer_identity` reads it from the verified peer of a gRPC call.
"""

from __future__ import annotations

import os
import ssl
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import grpc
import structlog

from services.common.settings import Settings
from shared.tls import ClientTls, FileStamp, TlsConfigError, file_stamp, key_matches

__all__ = [
    "CertificateFiles",
    "client_tls_from_settings",
    "grpc_server_credentials",
    "peer_identity",
    "reloading_ssl_context",
]

_log = structlog.get_logger(__name__)

WORKLOAD_URI_PREFIX: Final = "spiffe://kishpa/"
"""A workload certificate names its workload as a URI SAN ``spiffe://kishpa/<name>``."""


def workload_uri(name: str) -> str:
    """The URI SAN that names workload ``name`` in its certificate."""
    return WORKLOAD_URI_PREFIX + name


@dataclass(frozen=True, slots=True)
class Pair:
    """One loaded certificate chain and its key (PEM bytes), plus the CA bundle."""

    cert: bytes
    key: bytes
    ca: bytes | None
    stamp: FileStamp


def check_pair(cert_pem: bytes, key_pem: bytes) -> None:
    """Raise :class:`TlsConfigError` unless ``key_pem`` is the key of ``cert_pem``'s leaf."""
    try:
        matches = key_matches(cert_pem, key_pem)
    except ValueError as exc:
        raise TlsConfigError(f"the certificate or key is not valid PEM: {exc}") from None
    if not matches:
        raise TlsConfigError("the private key does not belong to the certificate")


class CertificateFiles:
    """A certificate/key pair (and CA) on disk, re-read when the files change.

    ``current()`` is cheap (two or three ``stat`` calls) and safe from any thread: it is
    called on every handshake.
    """

    def __init__(self, cert_file: Path, key_file: Path, ca_file: Path | None = None) -> None:
        self.cert_file = cert_file
        self.key_file = key_file
        self.ca_file = ca_file
        self._lock = threading.Lock()
        self._pair = self._load()  # fails at start-up, naming the problem
        self.reloads = 0

    def _paths(self) -> list[Path]:
        return [p for p in (self.cert_file, self.key_file, self.ca_file) if p is not None]

    def _load(self) -> Pair:
        try:
            stamp = file_stamp(self._paths())
            cert = self.cert_file.read_bytes()
            key = self.key_file.read_bytes()
            ca = self.ca_file.read_bytes() if self.ca_file is not None else None
        except OSError as exc:
            raise TlsConfigError(f"cannot read a TLS file: {exc}") from None
        check_pair(cert, key)
        return Pair(cert, key, ca, stamp)

    def current(self) -> tuple[Pair, bool]:
        """The pair to serve now, and whether it changed since the previous call."""
        with self._lock:
            stamp = file_stamp(self._paths())
            # A file being replaced (unreadable now): keep serving the old pair.
            changed = None not in stamp and stamp != self._pair.stamp
            if not changed:
                return self._pair, False
            try:
                pair = self._load()
            except TlsConfigError as exc:
                # Cert written, key not yet (or the reverse): retry at the next handshake.
                _log.warning("tls.reload_deferred", cert_file=str(self.cert_file), error=str(exc))
                return self._pair, False
            self._pair = pair
            self.reloads += 1
            _log.info("tls.reloaded", cert_file=str(self.cert_file), reloads=self.reloads)
            return pair, True


# -- gRPC ---------------------------------------------------------------------------------


def grpc_server_credentials(
    files: CertificateFiles, *, require_client_auth: bool
) -> grpc.ServerCredentials:
    """Server credentials that serve the files' current pair at every new handshake.

    With ``require_client_auth`` a client must present a certificate signed by the CA file
    (mutual TLS); without it, none is asked for.
    """
    if require_client_auth and files.ca_file is None:
        raise TlsConfigError("mutual TLS needs KISHPA_TLS_CA_FILE to verify client certificates")

    def config(pair: Pair) -> Any:
        return grpc.ssl_server_certificate_configuration(
            [(pair.key, pair.cert)], root_certificates=pair.ca
        )

    pair, _ = files.current()

    def fetch() -> Any:
        # Called by grpc before each handshake; None means "keep the current configuration".
        latest, changed = files.current()
        return config(latest) if changed else None

    return grpc.dynamic_ssl_server_credentials(
        config(pair), fetch, require_client_authentication=require_client_auth
    )


def client_tls_from_settings(settings: Settings) -> ClientTls | None:
    """The process's client TLS (None when ``KISHPA_TLS_CA_FILE`` is unset: plaintext)."""
    if not settings.tls_ca_file:
        return None
    own = bool(settings.tls_cert_file and settings.tls_key_file)
    return ClientTls(
        ca_file=Path(settings.tls_ca_file),
        cert_file=Path(settings.tls_cert_file) if own else None,
        key_file=Path(settings.tls_key_file) if own else None,
        server_name=settings.tls_server_name,
    )


# -- the peer of a call ---------------------------------------------------------------------


def _text(value: bytes | str) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def identity_from_auth_context(auth: dict[str, list[bytes]]) -> str | None:
    """The workload named by a verified peer certificate, or None (no certificate).

    Prefers the URI SAN ``spiffe://kishpa/<name>``, then the first DNS SAN's first label
    (``wallet.kishpa.svc`` -> ``wallet``; ``localhost`` names nobody), then the common name.
    grpc fills these properties only from a certificate it verified against the CA.
    """
    for uri in (_text(v) for v in (*auth.get("peer_spiffe_id", ()), *auth.get("peer_uri", ()))):
        if uri.startswith(WORKLOAD_URI_PREFIX) and uri[len(WORKLOAD_URI_PREFIX) :]:
            return uri[len(WORKLOAD_URI_PREFIX) :]
    for dns in (_text(v) for v in auth.get("peer_dns", ())):
        if dns and dns != "localhost":
            return dns.split(".", 1)[0]
    names = [_text(v) for v in auth.get("x509_common_name", ())]
    return names[0] if names and names[0] else None


def peer_identity(context: Any) -> str | None:
    """The verified peer certificate's workload identity for a gRPC call (None: no cert)."""
    try:
        auth = context.auth_context()
    except (AttributeError, RuntimeError):
        return None
    return identity_from_auth_context(dict(auth or {}))


# -- HTTP listeners (edge, metrics) --------------------------------------------------------


def reloading_ssl_context(
    files: CertificateFiles, *, require_client_auth: bool = False, alpn: Sequence[str] = ()
) -> ssl.SSLContext:
    """A server ``SSLContext`` that switches to a rotated pair at the next handshake.

    The returned context's SNI callback (called for every ClientHello, with or without a
    server name) swaps in a context built from the files' current pair when they changed.
    """

    def build(pair: Pair) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        _load_chain(context, pair)
        if pair.ca is not None:
            context.load_verify_locations(cadata=pair.ca.decode())
        if require_client_auth:
            context.verify_mode = ssl.CERT_REQUIRED
        if alpn:
            context.set_alpn_protocols(list(alpn))
        return context

    pair, _ = files.current()
    holder: dict[str, ssl.SSLContext] = {}

    def on_hello(sock: ssl.SSLObject | ssl.SSLSocket, _name: str | None, _ctx: Any) -> None:
        latest, changed = files.current()
        if changed:
            fresh = build(latest)
            fresh.sni_callback = on_hello
            holder["current"] = fresh
        current = holder.get("current")
        if current is not None and sock.context is not current:
            sock.context = current

    first = build(pair)
    first.sni_callback = on_hello
    holder["current"] = first
    return first


def _load_chain(context: ssl.SSLContext, pair: Pair) -> None:
    # ssl only loads chains from files: write them to a private temporary directory.
    import tempfile

    with tempfile.TemporaryDirectory(prefix="kishpa-tls-") as tmp:
        cert, key = Path(tmp) / "tls.crt", Path(tmp) / "tls.key"
        cert.write_bytes(pair.cert)
        fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(pair.key)
        context.load_cert_chain(cert, key)


def server_files_from_settings(settings: Settings) -> CertificateFiles | None:
    """The process's certificate files (None when ``KISHPA_TLS_CERT_FILE`` is unset)."""
    if not settings.tls_cert_file:
        return None
    if not settings.tls_key_file:
        raise TlsConfigError("KISHPA_TLS_CERT_FILE is set but KISHPA_TLS_KEY_FILE is not")
    return CertificateFiles(
        Path(settings.tls_cert_file),
        Path(settings.tls_key_file),
        Path(settings.tls_ca_file) if settings.tls_ca_file else None,
    )
