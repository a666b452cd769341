"""A slow key endpoint delays only the calls that need its keys, not the whole process.

The provider's JWKS endpoint (a real local HTTP server) answers after 5 s. While a real
gRPC server waits for it on behalf of one provider token, the same server keeps answering
calls with our own player tokens at their usual latency: the fetch runs in a thread, never
on the event loop (issue 32). The waiting call then succeeds with the keys that arrived.
"""

from __future__ import annotations

import asyncio
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
from services.common.oidc import OidcConfig, OidcVerifier, player_id_for
from services.common.server import create_server
from services.common.settings import load_settings
from tests.integration.test_common_oidc import AUDIENCE, Provider

pytestmark = pytest.mark.integration

TOKEN_KEY = "k" * 40
KEY_DELAY_S = 5.0
FAST_S = 0.5
"""A call answered within this is unaffected (a blocked loop would take the full 5 s)."""


class SlowProvider(Provider):
    def __init__(self) -> None:
        super().__init__()
        self.asked = threading.Event()
        self.answered = threading.Event()


@pytest.fixture
def provider() -> Iterator[SlowProvider]:
    prov = SlowProvider()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            prov.asked.set()
            time.sleep(KEY_DELAY_S)
            body = json.dumps(prov.jwks()).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            prov.answered.set()

        def log_message(self, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    prov.issuer = f"http://127.0.0.1:{httpd.server_port}/realm-{uuid.uuid4().hex[:6]}"
    prov.jwks_url = f"http://127.0.0.1:{httpd.server_port}/jwks.json"  # type: ignore[attr-defined]
    prov.add_ec("ec-1")
    prov.published = ["ec-1"]
    try:
        yield prov
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.fixture
async def stub(provider: SlowProvider) -> AsyncIterator[auth_pb2_grpc.AuthServiceStub]:
    verifier = OidcVerifier(
        OidcConfig(
            issuer=provider.issuer,
            audience=AUDIENCE,
            jwks_url=provider.jwks_url,  # type: ignore[attr-defined]
            fetch_timeout_seconds=KEY_DELAY_S * 3,
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
    async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
        yield auth_pb2_grpc.AuthServiceStub(channel)
    await server.stop(0)


async def _timed_refresh(stub: auth_pb2_grpc.AuthServiceStub, token: str) -> float:
    started = time.monotonic()
    await stub.RefreshToken(
        auth_pb2.RefreshTokenRequest(), metadata=bearer_metadata(token), timeout=30
    )
    return time.monotonic() - started


async def test_other_calls_keep_their_latency_while_the_keys_are_fetched(
    stub: auth_pb2_grpc.AuthServiceStub, provider: SlowProvider
) -> None:
    ours = TokenAuthority(TOKEN_KEY)
    # Each call its own token, so none is answered from the verified-token cache.
    tokens = [ours.issue_player_token(f"p-fast-{i}", "F").token for i in range(40)]
    baseline = [await _timed_refresh(stub, t) for t in tokens[:10]]
    slow = asyncio.create_task(_timed_refresh(stub, provider.token("ec-1", sub="slow-user")))
    deadline = time.monotonic() + 10
    while not provider.asked.is_set():  # the fetch has started and is now waiting
        assert time.monotonic() < deadline, "the provider was never asked for its keys"
        await asyncio.sleep(0.01)
    during = [await _timed_refresh(stub, t) for t in tokens[10:]]
    assert not provider.answered.is_set(), "the calls were not made while the fetch waited"
    assert max(during) < FAST_S, (max(baseline), during)
    # The waiting call itself gets its answer once the keys arrive.
    waited = await slow
    assert KEY_DELAY_S - 0.5 <= waited < KEY_DELAY_S * 3
    exchanged = await stub.RefreshToken(
        auth_pb2.RefreshTokenRequest(),
        metadata=bearer_metadata(provider.token("ec-1", sub="slow-user")),
        timeout=5,
    )
    assert exchanged.player_id == player_id_for(provider.issuer, "slow-user")
