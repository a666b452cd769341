"""The gRPC-Web edge in front of real services: unary and streaming calls, binary and text,
HTTP/1.1 and HTTP/2, the caller's token passed through, deadlines and cancellation reaching
the service, CORS, and service-only RPCs never reachable from a browser."""

from __future__ import annotations

import asyncio
import os
import secrets
import socket
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import grpc
import httpx
import pytest

from kishpa.auth.v1 import auth_pb2
from kishpa.common.v1 import common_pb2
from kishpa.matchmaking.v1 import matchmaking_pb2 as mm_pb2
from kishpa.table.v1 import table_pb2, table_pb2_grpc
from kishpa.wallet.v1 import wallet_pb2
from services.common.settings import load_settings
from services.edge.app import Edge, EdgeConfig
from services.edge.server import hypercorn_config, serve_edge
from services.matchmaking.server import MatchmakingServer, create_matchmaking_server
from services.matchmaking.service import MatchmakingConfig
from services.table.server import TableServer, create_table_server
from services.wallet.server import WalletServer, create_wallet_server
from tests.conftest import TEST_REDIS_URL
from tests.grpcweb_client import FrameReader, call, headers, request_body
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.integration]

TABLE = "/kishpa.table.v1.TableService"
LOGIN = "/kishpa.auth.v1.AuthService/Login"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _redis_url() -> str:
    # A database of the web tests' own: the table servers here run the deadline timers of
    # their database and must not serve other tests' tables.
    own = os.environ.get("TEST_WEB_REDIS_URL")
    return own or urlunsplit(urlsplit(TEST_REDIS_URL)._replace(path="/12"))


@dataclass
class Running:
    base: str
    edge: Edge
    port: int
    stop: asyncio.Event
    task: asyncio.Task[None]


async def start_edge(config: EdgeConfig) -> Running:
    port = _free_port()
    edge = Edge(config)
    stop = asyncio.Event()
    task = asyncio.create_task(serve_edge(edge, hypercorn_config("127.0.0.1", port, 1.0), stop))
    base = f"http://127.0.0.1:{port}"

    async with httpx.AsyncClient() as client:

        async def healthy() -> bool:
            try:
                return (await client.get(base + "/healthz")).status_code == 200
            except httpx.TransportError:
                return False

        await wait_until(healthy, timeout=20, message="the edge to come up")
    return Running(base, edge, port, stop, task)


async def stop_edge(running: Running) -> None:
    running.stop.set()
    await asyncio.wait_for(running.task, 10)


@dataclass
class Stack:
    edge: Running
    table: TableServer
    matchmaking: MatchmakingServer
    wallet: WalletServer


@pytest.fixture
async def stack(tmp_path: Path) -> AsyncIterator[Stack]:
    env: dict[str, Any] = {
        "redis_url": _redis_url(),
        "token_secret": secrets.token_urlsafe(48),
        "service_secret": secrets.token_urlsafe(48),
        "grpc_port": 0,
        "metrics_port": 0,
        "database_url": f"sqlite:///{tmp_path / 'wallet.sqlite3'}",
    }
    wallet = create_wallet_server(
        load_settings("wallet", **env), address="127.0.0.1:0", migrate=True
    )
    await wallet.server.start()
    table_port = _free_port()
    table = create_table_server(load_settings("table", **env), address=f"127.0.0.1:{table_port}")
    await table.start()
    mm = create_matchmaking_server(
        load_settings(
            "matchmaking",
            table_addr=f"127.0.0.1:{table_port}",
            wallet_addr=f"127.0.0.1:{wallet.server.port}",
            **env,
        ),
        address="127.0.0.1:0",
        key_prefix=f"kishpa:{{edge-{uuid.uuid4().hex[:12]}}}",
        config=MatchmakingConfig(turn_seconds=600, reveal_window_seconds=1),
    )
    await mm.start()
    web_root = tmp_path / "web"
    web_root.mkdir()
    (web_root / "index.html").write_text("<!doctype html><title>Kishpa</title>")
    edge = await start_edge(
        EdgeConfig(
            upstreams={
                "matchmaking": f"127.0.0.1:{mm.port}",
                "table": f"127.0.0.1:{table_port}",
                "wallet": f"127.0.0.1:{wallet.server.port}",
            },
            cors_origins=frozenset({"https://play.example"}),
            web_root=web_root,
        )
    )
    yield Stack(edge, table, mm, wallet)
    await stop_edge(edge)
    await mm.stop(0)
    await table.stop(0)
    await wallet.server.stop(0)


async def login(client: httpx.AsyncClient, base: str, name: str, *, text: bool = False) -> str:
    reply = await call(client, base, LOGIN, auth_pb2.LoginRequest(display_name=name), text=text)
    assert reply.http_status == 200
    assert reply.status == 0, reply
    return reply.parsed(auth_pb2.LoginResponse)[0].token


def kishpa_settings(**kw: Any) -> table_pb2.TableSettings:
    return table_pb2.TableSettings(game=common_pb2.GAME_KISHPA, seats=2, **kw)


@pytest.mark.parametrize(("http2", "text"), [(False, False), (False, True), (True, False)])
async def test_login_create_and_watch_a_table_through_the_edge(
    stack: Stack, http2: bool, text: bool
) -> None:
    base = stack.edge.base
    async with httpx.AsyncClient(http1=not http2, http2=http2, timeout=20) as client:
        token = await login(client, base, "Dana", text=text)
        created = await call(
            client,
            base,
            f"{TABLE}/CreateTable",
            table_pb2.CreateTableRequest(settings=kishpa_settings(), request_id=str(uuid.uuid4())),
            text=text,
            token=token,
        )
        assert created.status == 0, created
        assert created.http_version == ("HTTP/2" if http2 else "HTTP/1.1")
        view = created.parsed(table_pb2.CreateTableResponse)[0].table
        assert view.seats[0].display_name == "Dana"

        # The stream: the table's history arrives as frames before the call ends.
        reader = FrameReader(text=text)
        async with client.stream(
            "POST",
            f"{base}{TABLE}/WatchTable",
            content=request_body(table_pb2.WatchTableRequest(table_id=view.table_id), text=text),
            headers=headers(text=text, token=token),
        ) as response:
            assert response.status_code == 200
            async for chunk in response.aiter_raw():
                reader.feed(chunk)
                if len(reader.messages) >= 2:
                    break
        types = []
        for raw in reader.messages:
            event = table_pb2.WatchTableResponse()
            event.ParseFromString(raw)
            types.append(event.event)
        assert len(types) >= 2
        assert reader.trailers is None  # the stream was still open: nothing was buffered


async def test_errors_travel_as_grpc_status_in_the_trailer_frame(stack: Stack) -> None:
    base = stack.edge.base
    async with httpx.AsyncClient(timeout=20) as client:
        # No token: the service refuses, the edge passes the status through.
        refused = await call(
            client, base, f"{TABLE}/GetTable", table_pb2.GetTableRequest(table_id="t1")
        )
        assert refused.http_status == 200
        assert refused.status == grpc.StatusCode.UNAUTHENTICATED.value[0]
        token = await login(client, base, "Eli")
        missing = await call(
            client,
            base,
            f"{TABLE}/GetTable",
            table_pb2.GetTableRequest(table_id="t0000"),
            token=token,
        )
        assert missing.status == grpc.StatusCode.NOT_FOUND.value[0]
        assert "grpc-status-details-bin" in missing.trailers  # ErrorInfo reaches the browser
        mine = await call(
            client,
            base,
            "/kishpa.matchmaking.v1.MatchmakingService/GetMyTable",
            mm_pb2.GetMyTableRequest(),
            token=token,
        )
        assert mine.status == grpc.StatusCode.NOT_FOUND.value[0]


async def test_the_players_own_wallet_is_readable_but_money_moving_rpcs_are_not_exposed(
    stack: Stack,
) -> None:
    base = stack.edge.base
    async with httpx.AsyncClient(timeout=20) as client:
        token = await login(client, base, "Gal")
        balance = await call(
            client,
            base,
            "/kishpa.wallet.v1.WalletService/GetBalance",
            wallet_pb2.GetBalanceRequest(),
            token=token,
        )
        assert balance.status == 0, balance
        assert balance.parsed(wallet_pb2.GetBalanceResponse)[0].balance.tokens == 2000
        for rpc, request in (
            ("ApplyBatch", wallet_pb2.ApplyBatchRequest(request_id="x")),
            ("LoadTokens", wallet_pb2.LoadTokensRequest(request_id="x")),
            ("OpenWallet", wallet_pb2.OpenWalletRequest(player_id="someone")),
        ):
            reply = await call(
                client, base, f"/kishpa.wallet.v1.WalletService/{rpc}", request, token=token
            )
            assert reply.status == grpc.StatusCode.UNIMPLEMENTED.value[0], rpc
            assert "not exposed" in reply.message
        unknown = await call(client, base, "/grpc.health.v1.Health/Check", auth_pb2.LoginRequest())
        assert unknown.status == grpc.StatusCode.UNIMPLEMENTED.value[0]
        # Unchanged: still exactly the opening grant.
        again = await call(
            client,
            base,
            "/kishpa.wallet.v1.WalletService/GetBalance",
            wallet_pb2.GetBalanceRequest(),
            token=token,
        )
        assert again.parsed(wallet_pb2.GetBalanceResponse)[0].balance.tokens == 2000


async def test_cors_allows_the_configured_origin_only(stack: Stack) -> None:
    base = stack.edge.base
    async with httpx.AsyncClient(timeout=20) as client:
        preflight = await client.options(
            base + LOGIN,
            headers={
                "origin": "https://play.example",
                "access-control-request-method": "POST",
                "access-control-request-headers": "content-type,x-grpc-web,authorization",
            },
        )
        assert preflight.status_code == 204
        assert preflight.headers["access-control-allow-origin"] == "https://play.example"
        assert "authorization" in preflight.headers["access-control-allow-headers"]
        reply = await client.post(
            base + LOGIN,
            content=request_body(auth_pb2.LoginRequest(display_name="Hen"), text=False),
            headers={**headers(text=False), "origin": "https://play.example"},
        )
        assert reply.headers["access-control-allow-origin"] == "https://play.example"
        assert "grpc-status" in reply.headers["access-control-expose-headers"]
        other = await client.options(
            base + LOGIN,
            headers={"origin": "https://evil.example", "access-control-request-method": "POST"},
        )
        assert other.status_code == 403
        refused = await client.post(
            base + LOGIN,
            content=request_body(auth_pb2.LoginRequest(display_name="Hen"), text=False),
            headers={**headers(text=False), "origin": "https://evil.example"},
        )
        assert refused.status_code == 403


async def test_the_web_client_probes_and_bad_requests(stack: Stack) -> None:
    base = stack.edge.base
    async with httpx.AsyncClient(timeout=20) as client:
        page = await client.get(base + "/")
        assert page.status_code == 200
        assert "Kishpa" in page.text
        assert page.headers["content-type"].startswith("text/html")
        assert (await client.get(base + "/../../etc/passwd")).status_code == 404
        assert (await client.get(base + "/readyz")).status_code == 200
        assert (await client.get(base + LOGIN)).status_code == 405
        wrong_type = await client.post(
            base + LOGIN, content=b"{}", headers={"content-type": "application/json"}
        )
        assert wrong_type.status_code == 415
        garbage = await client.post(base + LOGIN, content=b"\x00\x00", headers=headers(text=False))
        assert garbage.status_code == 200
        reader = FrameReader(text=False)
        reader.feed(garbage.content)
        assert reader.trailers is not None
        assert reader.trailers["grpc-status"] == str(grpc.StatusCode.INVALID_ARGUMENT.value[0])


class SlowTables(table_pb2_grpc.TableServiceServicer):
    """A real gRPC server that records what the edge's calls looked like on arrival."""

    def __init__(self) -> None:
        self.remaining: list[float | None] = []
        self.metadata: list[dict[str, str]] = []
        self.watch_cancelled = asyncio.Event()

    async def GetTable(self, request: Any, context: Any) -> Any:
        self.remaining.append(context.time_remaining())
        self.metadata.append({k: v for k, v in context.invocation_metadata()})
        await asyncio.sleep(5)
        return table_pb2.GetTableResponse()

    async def WatchTable(self, request: Any, context: Any) -> AsyncIterator[Any]:
        yield table_pb2.WatchTableResponse(event=table_pb2.TableEvent(event_id="1-0"))
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            self.watch_cancelled.set()
            raise


async def test_deadlines_and_cancellation_reach_the_service() -> None:
    servicer = SlowTables()
    server = grpc.aio.server()
    table_pb2_grpc.add_TableServiceServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    edge = await start_edge(EdgeConfig(upstreams={"table": f"127.0.0.1:{port}"}))
    try:
        async with httpx.AsyncClient(timeout=20) as client:
            started = time.monotonic()
            reply = await call(
                client,
                edge.base,
                f"{TABLE}/GetTable",
                table_pb2.GetTableRequest(table_id="t"),
                token="abc",
                grpc_timeout="300m",
            )
            assert reply.status == grpc.StatusCode.DEADLINE_EXCEEDED.value[0]
            assert time.monotonic() - started < 4
            remaining = servicer.remaining[0]
            assert remaining is not None
            assert 0 < remaining <= 0.3
            assert servicer.metadata[0]["authorization"] == "Bearer abc"
            assert servicer.metadata[0]["x-forwarded-for"] == "127.0.0.1"

            reader = FrameReader(text=False)
            async with client.stream(
                "POST",
                f"{edge.base}{TABLE}/WatchTable",
                content=request_body(table_pb2.WatchTableRequest(table_id="t"), text=False),
                headers=headers(text=False),
            ) as response:
                async for chunk in response.aiter_raw():
                    reader.feed(chunk)
                    if reader.messages:
                        break
            # Leaving the block closed the connection: the service's call is cancelled.
            await asyncio.wait_for(servicer.watch_cancelled.wait(), 10)
    finally:
        await stop_edge(edge)
        await server.stop(0)
