"""An identity provider whose key endpoint fails: UNAVAILABLE, a clear reason, no internals.

A real local HTTP server plays the provider's JWKS endpoint and misbehaves as asked (an
error status, an HTML page, a body that is not JSON, JSON that is not a key set, a set
without keys, an answer slower than the fetch timeout, a dropped connection); a real gRPC
server verifies a valid provider token through it. Once the endpoint recovers, the same
token signs in, and the exchange names the player (``RefreshTokenResponse.player_id``).
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import grpc
import pytest

from kishpa.auth.v1 import auth_pb2, auth_pb2_grpc
from services.common.auth import TokenAuthority, bearer_metadata
from services.common.auth_service import auth_registration
from services.common.errors import error_reason
from services.common.oidc import OidcConfig, OidcVerifier, player_id_for
from services.common.server import create_server
from services.common.settings import load_settings
from tests.support.oidc import AUDIENCE, Provider

pytestmark = pytest.mark.integration

TOKEN_KEY = "k" * 40
FETCH_TIMEOUT_S = 0.5
FAILURES = ["503", "html", "not-json", "json-list", "no-keys", "slow", "dropped"]


class FailingProvider(Provider):
    mode: str = "ok"


@pytest.fixture
def provider() -> Iterator[FailingProvider]:
    prov = FailingProvider()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            mode = prov.mode
            status, kind, body = 200, "application/json", json.dumps(prov.jwks()).encode()
            if mode == "503":
                status, kind, body = 503, "text/plain", b"Service Unavailable"
            elif mode == "html":
                kind, body = "text/html", b"<html><body>Maintenance</body></html>"
            elif mode == "not-json":
                body = b'{"keys": [ {"kty": '
            elif mode == "json-list":
                body = b"[1, 2, 3]"
            elif mode == "no-keys":
                body = b'{"keys": []}'
            elif mode == "slow":
                time.sleep(FETCH_TIMEOUT_S * 3)
            elif mode == "dropped":
                self.close_connection = True
                self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Length: 500\r\n\r\n{")
                return
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    prov.issuer = f"http://127.0.0.1:{httpd.server_port}/realm-{uuid.uuid4().hex[:6]}"
    prov.jwks_url = f"http://127.0.0.1:{httpd.server_port}/jwks.json"  # type: ignore[attr-defined]
    prov.add_rsa("rsa-1")
    prov.published = ["rsa-1"]
    try:
        yield prov
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.fixture
async def channel(provider: FailingProvider) -> AsyncIterator[grpc.aio.Channel]:
    verifier = OidcVerifier(
        OidcConfig(
            issuer=provider.issuer,
            audience=AUDIENCE,
            jwks_url=provider.jwks_url,  # type: ignore[attr-defined]
            jwks_cooldown_seconds=0.0,
            fetch_timeout_seconds=FETCH_TIMEOUT_S,
        )
    )
    authority = TokenAuthority(TOKEN_KEY, None, external=verifier)
    server = create_server(
        [auth_registration(authority, guest_login=False)],
        load_settings("probe", token_secret=TOKEN_KEY),
        address="127.0.0.1:0",
        authority=authority,
    )
    await server.start()
    async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as ch:
        yield ch
    await server.stop(0)


@pytest.mark.parametrize("failure", FAILURES)
async def test_a_failing_key_endpoint_is_unavailable_without_internals(
    provider: FailingProvider, channel: grpc.aio.Channel, failure: str
) -> None:
    stub = auth_pb2_grpc.AuthServiceStub(channel)
    token = provider.token("rsa-1")
    provider.mode = failure
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await stub.RefreshToken(
            auth_pb2.RefreshTokenRequest(), metadata=bearer_metadata(token), timeout=10
        )
    error = refused.value
    assert (error.code(), error_reason(error)) == (
        grpc.StatusCode.UNAVAILABLE,
        "IDENTITY_PROVIDER_UNAVAILABLE",
    )
    details = error.details() or ""
    for internal in ("<class", "services.", "Error", "Exception", "Traceback", "jwt"):
        assert internal not in details, details
    # The provider recovers: the same token signs in, and the answer names the player.
    provider.mode = "ok"
    reply = await stub.RefreshToken(
        auth_pb2.RefreshTokenRequest(), metadata=bearer_metadata(token), timeout=10
    )
    assert reply.player_id == player_id_for(provider.issuer, "user-1")
    assert reply.token
