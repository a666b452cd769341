"""A long-lived client channel follows a rotated client certificate (shared/tls.py,
``ReloadingChannel``): over real mutual TLS, after the client's certificate and key files are
rewritten, the next calls present the new certificate, and no call fails meanwhile, not
even one in flight over the old connection or a stream opened before the rotation."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from cryptography import x509

from devkit.tlscerts import TestCA
from shared.tls import ClientTls, ReloadingChannel, aio_channel, reloading_aio_channel

pytestmark = pytest.mark.integration

SERVICE = "kishpa.test.PeerEcho"


def _peer_serial(context: grpc.aio.ServicerContext) -> bytes:
    """The serial number of the client certificate the server saw on this call."""
    (pem,) = context.auth_context()["x509_pem_cert"]
    return str(x509.load_pem_x509_certificate(pem).serial_number).encode()


async def _serial(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
    if request == b"slow":
        await asyncio.sleep(0.5)  # a call still in flight when the channel is replaced
    return _peer_serial(context)


async def _serials(request: bytes, context: grpc.aio.ServicerContext) -> AsyncIterator[bytes]:
    for _ in range(int(request)):
        yield _peer_serial(context)
        await asyncio.sleep(0.05)


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[tuple[TestCA, int]]:
    """A real gRPC server over mutual TLS that answers with the caller's certificate serial."""
    ca = TestCA(tmp_path / "pki")
    issued = ca.issue("wallet", cert_file=tmp_path / "srv.crt", key_file=tmp_path / "srv.key")
    credentials = grpc.ssl_server_credentials(
        [(issued.key_pem, issued.cert_pem)],
        root_certificates=ca.cert_pem,
        require_client_auth=True,
    )
    server = grpc.aio.server()
    server.add_generic_rpc_handlers(
        [
            grpc.method_handlers_generic_handler(
                SERVICE,
                {
                    "Serial": grpc.unary_unary_rpc_method_handler(_serial),
                    "Serials": grpc.unary_stream_rpc_method_handler(_serials),
                },
            )
        ]
    )
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server.add_secure_port(f"127.0.0.1:{port}", credentials)
    await server.start()
    try:
        yield ca, port
    finally:
        await server.stop(0)


async def test_the_next_calls_present_the_rotated_client_certificate(
    server: tuple[TestCA, int], tmp_path: Path
) -> None:
    ca, port = server
    first = ca.issue("worker", cert_file=tmp_path / "c.crt", key_file=tmp_path / "c.key")
    tls = ClientTls(ca.ca_file, first.cert_file, first.key_file, server_name="localhost")
    channel = ReloadingChannel(f"127.0.0.1:{port}", tls, check_every=0)
    serial = channel.unary_unary(f"/{SERVICE}/Serial")  # made once, like a stub's method
    stream = channel.unary_stream(f"/{SERVICE}/Serials")
    try:
        assert await serial(b"") == str(first.serial).encode()
        in_flight = asyncio.ensure_future(serial(b"slow"))  # over the old connection
        watching = stream(b"20")  # a stream opened before the rotation
        assert await watching.read() == str(first.serial).encode()

        # A half-written rotation (new certificate, old key) is not picked up.
        second = ca.issue("worker", cert_file=tmp_path / "n.crt", key_file=tmp_path / "n.key")
        first.cert_file.write_bytes(second.cert_pem)
        assert await serial(b"") == str(first.serial).encode()
        first.key_file.write_bytes(second.key_pem)

        answers = [await serial(b"") for _ in range(5)]
        assert answers == [str(second.serial).encode()] * 5
        assert await in_flight == str(first.serial).encode()
        rest = []
        while (message := await watching.read()) is not grpc.aio.EOF:
            rest.append(message)
        assert rest == [str(first.serial).encode()] * 19
        assert await watching.code() == grpc.StatusCode.OK
    finally:
        await channel.close()


async def test_a_plain_channel_keeps_presenting_the_old_certificate(
    server: tuple[TestCA, int], tmp_path: Path
) -> None:
    """Why the wrapper exists: gRPC reads a channel's credentials once."""
    ca, port = server
    first = ca.issue("worker", cert_file=tmp_path / "c.crt", key_file=tmp_path / "c.key")
    tls = ClientTls(ca.ca_file, first.cert_file, first.key_file, server_name="localhost")
    async with aio_channel(f"127.0.0.1:{port}", tls) as channel:
        serial = channel.unary_unary(f"/{SERVICE}/Serial")
        assert await serial(b"") == str(first.serial).encode()
        ca.issue("worker", cert_file=first.cert_file, key_file=first.key_file)
        assert await serial(b"") == str(first.serial).encode()


async def test_only_mutual_tls_channels_reload(tmp_path: Path) -> None:
    ca = TestCA(tmp_path / "pki")
    plain = reloading_aio_channel("127.0.0.1:1", None)
    server_only = reloading_aio_channel("127.0.0.1:1", ClientTls(ca.ca_file))
    try:
        assert not isinstance(plain, ReloadingChannel)
        assert not isinstance(server_only, ReloadingChannel)
    finally:
        await plain.close()
        await server_only.close()
