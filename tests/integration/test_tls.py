"""Mutual TLS between real servers: who may connect, whose credential counts, and rotation.

A wallet (SQLite) and a table service (Redis) serve over mutual TLS with certificates made
here (devkit/tlscerts.py); the worker's blocking wallet client, the wallet's own call to the
table service (an operator's CloseTable), the SDK and raw TLS sockets are the clients.
"""

from __future__ import annotations

import asyncio
import os
import socket
import ssl
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import grpc
import pytest
from cryptography import x509
from grpc_health.v1 import health_pb2, health_pb2_grpc

from devkit.tlscerts import TestCA
from kishpa.admin.v1 import admin_pb2, admin_pb2_grpc
from kishpa.wallet.v1 import wallet_pb2, wallet_pb2_grpc
from sdk import KishpaClient
from sdk.errors import KishpaError
from sdk.retry import NO_RETRY
from services.common.auth import ServiceCredentials, TokenAuthority, bearer_metadata
from services.common.errors import error_reason
from services.common.server import start_tls_http_server
from services.common.settings import load_settings
from services.common.tls import CertificateFiles, ClientTls, aio_channel, reloading_ssl_context
from services.table.server import TableServer, create_table_server
from services.wallet.migrate import upgrade
from services.wallet.server import WalletServer, create_wallet_server
from tests.conftest import TEST_REDIS_URL
from workers.wallet_client import WalletClient

pytestmark = pytest.mark.integration

SECRETS = {"token_secret": "t" * 40, "service_secret": "s" * 40}
REDIS_URL = os.environ.get("TEST_TABLE_REDIS_URL") or urlunsplit(
    urlsplit(TEST_REDIS_URL)._replace(path="/11")
)


@dataclass
class TlsStack:
    ca: TestCA
    wallet: WalletServer
    table: TableServer
    authority: TokenAuthority
    wallet_files: CertificateFiles

    def client(self, workload: str | None, ca: TestCA | None = None) -> ClientTls:
        """Client TLS trusting our CA, with ``workload``'s certificate (None: no cert)."""
        trust = (ca or self.ca).ca_file
        if workload is None:
            return ClientTls(trust)
        issued = self.ca.issue(workload)
        return ClientTls(trust, issued.cert_file, issued.key_file)


def _tls_settings(ca: TestCA, workload: str) -> dict[str, object]:
    issued = ca.issue(
        workload,
        cert_file=ca.directory / f"{workload}-server.crt",
        key_file=ca.directory / f"{workload}-server.key",
    )
    return {
        "tls_cert_file": str(issued.cert_file),
        "tls_key_file": str(issued.key_file),
        "tls_ca_file": str(ca.ca_file),
    }


@pytest.fixture
async def stack(tmp_path: Path) -> AsyncIterator[TlsStack]:
    ca = TestCA(tmp_path / "pki")
    table_settings = load_settings(
        "table",
        redis_url=REDIS_URL,
        grpc_port=0,
        metrics_port=0,
        **SECRETS,
        **_tls_settings(ca, "table"),  # type: ignore[arg-type]
    )
    table = create_table_server(table_settings, address="127.0.0.1:0", timers=False)
    await table.start()
    url = f"sqlite:///{tmp_path / 'wallet.sqlite3'}"
    upgrade(url)
    wallet_tls = _tls_settings(ca, "wallet")
    wallet_settings = load_settings(
        "wallet",
        database_url=url,
        table_addr=f"127.0.0.1:{table.port}",
        grpc_port=0,
        metrics_port=0,
        **SECRETS,
        **wallet_tls,  # type: ignore[arg-type]
    )
    wallet = create_wallet_server(wallet_settings, address="127.0.0.1:0")
    await wallet.start()
    files = CertificateFiles(
        Path(str(wallet_tls["tls_cert_file"])), Path(str(wallet_tls["tls_key_file"])), ca.ca_file
    )
    try:
        yield TlsStack(ca, wallet, table, TokenAuthority.from_settings(wallet_settings), files)
    finally:
        await wallet.stop(1)
        await table.stop(0)


def _batch(player: str, amount: int) -> wallet_pb2.ApplyBatchRequest:
    return wallet_pb2.ApplyBatchRequest(
        request_id=uuid.uuid4().hex,
        postings=[
            wallet_pb2.Posting(
                from_account=f"player:{player}",
                to_account="bowl:t-tls",
                amount=amount,
                reason=wallet_pb2.TRANSFER_REASON_BOWL_CONTRIBUTION,
                table_id="t-tls",
            )
        ],
    )


async def _health(address: str, tls: ClientTls | None) -> grpc.StatusCode:
    async with aio_channel(address, tls) as channel:
        try:
            await health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(), timeout=5
            )
        except grpc.aio.AioRpcError as exc:
            return exc.code()
    return grpc.StatusCode.OK


async def test_only_clients_with_a_certificate_of_our_ca_may_connect(
    stack: TlsStack, tmp_path: Path
) -> None:
    stranger = TestCA(tmp_path / "other", name="other-ca")
    for port in (stack.wallet.port, stack.table.port):
        address = f"127.0.0.1:{port}"
        assert await _health(address, stack.client("worker")) == grpc.StatusCode.OK
        # No certificate, a certificate of another CA, or no TLS at all: no connection.
        assert await _health(address, stack.client(None)) == grpc.StatusCode.UNAVAILABLE
        foreign = stranger.issue("worker")
        other = ClientTls(stack.ca.ca_file, foreign.cert_file, foreign.key_file)
        assert await _health(address, other) == grpc.StatusCode.UNAVAILABLE
        assert await _health(address, None) == grpc.StatusCode.UNAVAILABLE
        # A client that does not trust the server's CA refuses the server too.
        untrusting = ClientTls(stranger.ca_file, foreign.cert_file, foreign.key_file)
        assert await _health(address, untrusting) == grpc.StatusCode.UNAVAILABLE


async def test_the_worker_applies_batches_over_tls_and_only_the_worker(stack: TlsStack) -> None:
    address = f"127.0.0.1:{stack.wallet.port}"
    worker = WalletClient(
        address, ServiceCredentials(stack.authority, "worker"), tls=stack.client("worker")
    )
    try:
        await asyncio.to_thread(worker.open_wallets, ["pa"])
        assert await asyncio.to_thread(worker.balance, "player:pa") > 0
    finally:
        worker.close()

    async def apply(cert: str, credential: str) -> tuple[grpc.StatusCode, str]:
        async with aio_channel(address, stack.client(cert)) as channel:
            stub = wallet_pb2_grpc.WalletServiceStub(channel)
            token = stack.authority.issue_service_token(credential).token
            try:
                await stub.ApplyBatch(_batch("pa", 5), metadata=bearer_metadata(token), timeout=5)
            except grpc.aio.AioRpcError as exc:
                return exc.code(), error_reason(exc)
        return grpc.StatusCode.OK, ""

    assert await apply("worker", "worker") == (grpc.StatusCode.OK, "")
    # The matchmaking service holds the shared service key: it still cannot move tokens.
    denied = grpc.StatusCode.PERMISSION_DENIED
    assert await apply("matchmaking", "matchmaking") == (denied, "SERVICE_NOT_ALLOWED")
    # Nor by minting the worker's credential: the certificate says who is calling.
    assert await apply("matchmaking", "worker") == (denied, "PEER_IDENTITY_MISMATCH")


async def test_a_service_credential_without_a_workload_certificate_is_refused(
    tmp_path: Path,
) -> None:
    ca = TestCA(tmp_path / "pki")
    url = f"sqlite:///{tmp_path / 'w.sqlite3'}"
    upgrade(url)
    # Server-only TLS (no client certificates asked for): a service credential cannot be
    # tied to a workload, so it counts for nothing (docs/api.md: PEER_CERTIFICATE_REQUIRED);
    # players and operators, whose tokens say who they are, are served as usual.
    settings = load_settings(
        "wallet",
        database_url=url,
        grpc_port=0,
        metrics_port=0,
        tls_client_auth=False,
        **SECRETS,
        **_tls_settings(ca, "wallet"),  # type: ignore[arg-type]
    )
    server = create_wallet_server(settings, address="127.0.0.1:0")
    await server.start()
    authority = TokenAuthority.from_settings(settings)
    try:
        async with aio_channel(f"127.0.0.1:{server.port}", ClientTls(ca.ca_file)) as channel:
            stub = wallet_pb2_grpc.WalletServiceStub(channel)
            for call, request in (
                (stub.OpenWallet, wallet_pb2.OpenWalletRequest(player_id="pz")),
                (stub.ApplyBatch, _batch("pz", 5)),
            ):
                with pytest.raises(grpc.aio.AioRpcError) as refused:
                    await call(
                        request,  # type: ignore[arg-type]
                        metadata=bearer_metadata(authority.issue_service_token("worker").token),
                        timeout=5,
                    )
                assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED
                assert error_reason(refused.value) == "PEER_CERTIFICATE_REQUIRED"
            player = authority.issue_player_token("pz", "Zoe").token
            reply = await stub.OpenWallet(
                wallet_pb2.OpenWalletRequest(), metadata=bearer_metadata(player), timeout=5
            )
            assert reply.created  # the refused calls opened nothing
    finally:
        await server.stop(0)


async def test_the_wallet_calls_the_table_service_over_mutual_tls(stack: TlsStack) -> None:
    """An operator's CloseTable makes the wallet call TableService.CloseTable as ``wallet``."""
    async with aio_channel(f"127.0.0.1:{stack.wallet.port}", stack.client("edge")) as channel:
        stub = admin_pb2_grpc.AdminServiceStub(channel)
        token = stack.authority.issue_admin_token("ops-ann", roles=("ops",)).token
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await stub.CloseTable(
                admin_pb2.CloseTableRequest(
                    table_id="no-such-table", reason="stuck", ticket="T-1", request_id="c1"
                ),
                metadata=bearer_metadata(token),
                timeout=10,
            )
    # The table service answered (over mTLS, as the wallet): the table does not exist.
    assert refused.value.code() == grpc.StatusCode.NOT_FOUND, refused.value.details()


def _served_serial(port: int, client: ClientTls, alpn: str = "h2") -> int:
    context = ssl.create_default_context(cafile=str(client.ca_file))
    if client.cert_file and client.key_file:
        context.load_cert_chain(client.cert_file, client.key_file)
    context.set_alpn_protocols([alpn])
    with (
        socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
        context.wrap_socket(raw, server_hostname="localhost") as tls,
    ):
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der).serial_number


async def test_rotating_the_files_changes_the_served_certificate_without_dropping_calls(
    stack: TlsStack,
) -> None:
    port = stack.wallet.port
    client = stack.client("worker")
    first = await asyncio.to_thread(_served_serial, port, client)
    async with aio_channel(f"127.0.0.1:{port}", client) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        # A stream opened before the rotation, and calls running through it.
        watch = health.Watch(health_pb2.HealthCheckRequest())
        assert (await watch.read()).status == health_pb2.HealthCheckResponse.SERVING
        stop = asyncio.Event()

        async def keep_calling() -> int:
            calls = 0
            while not stop.is_set():
                await health.Check(health_pb2.HealthCheckRequest(), timeout=5)
                calls += 1
            return calls

        caller = asyncio.create_task(keep_calling())
        rotated = stack.ca.issue(
            "wallet", cert_file=stack.wallet_files.cert_file, key_file=stack.wallet_files.key_file
        )
        served = await asyncio.to_thread(_served_serial, port, client)
        stop.set()
        assert await caller > 0  # every call succeeded (one failure would have raised)
        assert served == rotated.serial != first
        # The old stream is still alive and still answers.
        assert not watch.done()
        watch.cancel()
        # A new gRPC connection works against the new certificate.
        assert await _health(f"127.0.0.1:{port}", client) == grpc.StatusCode.OK


async def test_kubelet_probes_reach_a_plaintext_port_that_serves_only_health(
    tmp_path: Path,
) -> None:
    from kishpa.wallet.v1 import wallet_pb2_grpc as stubs

    ca = TestCA(tmp_path / "pki")
    url = f"sqlite:///{tmp_path / 'w.sqlite3'}"
    upgrade(url)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        health_port = probe.getsockname()[1]
    settings = load_settings(
        "wallet",
        database_url=url,
        grpc_port=0,
        metrics_port=0,
        health_port=health_port,
        grpc_host="127.0.0.1",
        **SECRETS,
        **_tls_settings(ca, "wallet"),  # type: ignore[arg-type]
    )
    server = create_wallet_server(settings, address="127.0.0.1:0")
    await server.start()
    try:
        assert await _health(f"127.0.0.1:{health_port}", None) == grpc.StatusCode.OK
        async with grpc.aio.insecure_channel(f"127.0.0.1:{health_port}") as channel:
            with pytest.raises(grpc.aio.AioRpcError) as other:
                await stubs.WalletServiceStub(channel).GetBalance(
                    wallet_pb2.GetBalanceRequest(), timeout=5
                )
        assert other.value.code() == grpc.StatusCode.UNIMPLEMENTED
    finally:
        await server.stop(0)


async def test_the_metrics_endpoint_speaks_tls_and_follows_rotation(tmp_path: Path) -> None:
    ca = TestCA(tmp_path / "pki")
    issued = ca.issue("wallet")
    files = CertificateFiles(issued.cert_file, issued.key_file, ca.ca_file)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    httpd, thread = start_tls_http_server(port, reloading_ssl_context(files), addr="127.0.0.1")
    try:
        client = ClientTls(ca.ca_file)
        assert await asyncio.to_thread(_served_serial, port, client, "http/1.1") == issued.serial
        rotated = ca.issue("wallet", cert_file=issued.cert_file, key_file=issued.key_file)
        assert await asyncio.to_thread(_served_serial, port, client, "http/1.1") == rotated.serial
        with pytest.raises(ssl.SSLError):  # a client that does not trust our CA
            await asyncio.to_thread(
                _served_serial, port, ClientTls(TestCA(tmp_path / "x", "x").ca_file), "http/1.1"
            )
    finally:
        httpd.shutdown()
        thread.join(timeout=5)


async def test_a_half_written_rotation_keeps_serving_the_old_pair(tmp_path: Path) -> None:
    ca = TestCA(tmp_path / "pki")
    issued = ca.issue("wallet")
    files = CertificateFiles(issued.cert_file, issued.key_file, ca.ca_file)
    other = ca.issue("wallet", cert_file=tmp_path / "n.crt", key_file=tmp_path / "n.key")
    issued.cert_file.write_bytes(other.cert_pem)  # the new certificate, the old key
    pair, changed = files.current()
    assert (pair.cert, changed) == (issued.cert_pem, False)
    issued.key_file.write_bytes(other.key_pem)  # now the key follows
    pair, changed = files.current()
    assert (pair.cert, changed) == (other.cert_pem, True)


async def test_the_sdk_signs_in_over_tls_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from services.common.auth_service import auth_registration
    from services.common.server import create_server

    ca = TestCA(tmp_path / "pki")
    settings = load_settings(
        "matchmaking",
        grpc_port=0,
        metrics_port=0,
        tls_client_auth=False,
        **SECRETS,
        **_tls_settings(ca, "matchmaking"),  # type: ignore[arg-type]
    )
    server = create_server(
        [auth_registration(TokenAuthority.from_settings(settings))],
        settings,
        address="127.0.0.1:0",
    )
    await server.start()
    try:
        monkeypatch.setenv("KISHPA_TLS_CA_FILE", str(ca.ca_file))
        address = f"127.0.0.1:{server.port}"
        async with KishpaClient(address, address) as client:
            session = await client.login("Tova")
        assert session.display_name == "Tova"
        monkeypatch.delenv("KISHPA_TLS_CA_FILE")
        async with KishpaClient(address, address, retry=NO_RETRY) as plain:  # plaintext
            with pytest.raises(KishpaError) as failed:
                await asyncio.wait_for(plain.login("Tova"), 20)
        assert failed.value.code == grpc.StatusCode.UNAVAILABLE
    finally:
        await server.stop(0)
