"""The edge as an ASGI application: gRPC-Web calls to the services, and the web client.

One POST per call. The body holds one framed request message (binary, or base64 for the
``-text`` variant); the answer is ``200`` with the response messages and a final trailer
frame carrying ``grpc-status``. Errors of the call travel in that trailer frame, never as
HTTP errors; HTTP errors (405, 413, 415) mean the request was not gRPC-Web at all.

The messages are not decoded: the edge forwards the bytes to the upstream service over a
``grpc.aio`` channel (unary-unary or unary-stream by the method's descriptor), so it needs
no change when a message grows a field. The caller's ``authorization`` travels as gRPC
metadata, with ``x-forwarded-for`` naming the browser; ``grpc-timeout`` becomes the
upstream call's deadline; a browser that goes away
(closes the page, aborts the fetch) cancels the upstream call.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import structlog

from services.common.health_client import SERVING, check_health
from services.edge import grpcweb
from services.edge.assets import Assets
from services.edge.routes import Route, public_routes
from shared.tls import ClientTls, reloading_aio_channel

log = structlog.get_logger("kishpa.edge")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

MAX_REQUEST_BYTES = 256 * 1024
"""A request message larger than this is refused (413) before any upstream call."""
PASSED_HEADERS = frozenset({"authorization", "x-request-id"})
"""Request headers forwarded to the services as gRPC metadata."""
ALLOWED_REQUEST_HEADERS = (
    "authorization",
    "content-type",
    "grpc-timeout",
    "x-grpc-web",
    "x-request-id",
    "x-user-agent",
)
EXPOSED_HEADERS = "grpc-status, grpc-message, grpc-status-details-bin"
HEALTH_TIMEOUT_S = 1.0
READY_PATH = "/readyz"
"""Readiness: every upstream answers its gRPC health check with SERVING."""
LIVE_PATH = "/healthz"
"""Liveness: the process answers."""


@dataclass(frozen=True, slots=True)
class EdgeConfig:
    """Where the services are, which origins may call, where the web client's files are."""

    upstreams: Mapping[str, str]
    """Upstream name (``matchmaking``, ``table``, ``wallet``) -> ``host:port``."""
    cors_origins: frozenset[str] = frozenset()
    """Origins allowed to call from another site (``*`` for any); empty: same origin only."""
    web_root: Path | None = None
    """The built web client (``web/dist``), served at ``/``; None serves no files."""
    routes: Mapping[str, Route] = field(default_factory=public_routes)
    upstream_tls: ClientTls | None = None
    """How the edge verifies the services and proves it is the edge (mutual TLS); None:
    plaintext upstreams (``make run``)."""


def _header(scope: Scope, name: bytes) -> str:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return str(value.decode("latin-1"))
    return ""


class Edge:
    """The ASGI application (``lifespan`` opens and closes the upstream channels)."""

    def __init__(self, config: EdgeConfig) -> None:
        self.config = config
        self.channels: dict[str, grpc.aio.Channel] = {}
        self._assets: Assets | None = None

    # ---- lifecycle -------------------------------------------------------------------

    async def open(self) -> None:
        """Open one channel per upstream (inside the serving event loop)."""
        for name, address in self.config.upstreams.items():
            if name not in self.channels:
                self.channels[name] = reloading_aio_channel(address, self.config.upstream_tls)

    async def close(self) -> None:
        """Close the channels; calls still running are cancelled."""
        channels, self.channels = self.channels, {}
        await asyncio.gather(*(c.close(grace=None) for c in channels.values()))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        path = scope["path"]
        method = scope["method"]
        route = self.config.routes.get(path)
        if route is not None or (path.count("/") == 2 and "." in path.split("/")[1]):
            if method == "OPTIONS":
                await self._preflight(scope, send)
            elif method != "POST":
                await _plain(send, 405, b"gRPC-Web calls are POST\n", [(b"allow", b"POST")])
            else:
                await self._call(scope, receive, send, route)
            return
        if method not in ("GET", "HEAD"):
            await _plain(send, 405, b"method not allowed\n", [(b"allow", b"GET, HEAD")])
        elif path == LIVE_PATH:
            await _plain(send, 200, b"ok\n")
        elif path == READY_PATH:
            ready = await self.ready()
            await _plain(send, 200 if ready else 503, b"ready\n" if ready else b"not ready\n")
        else:
            await self._static(scope, path, send, head=method == "HEAD")

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await self.open()
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self.close()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def ready(self) -> bool:
        """Every upstream answers its gRPC health check with SERVING."""
        await self.open()

        async def check(channel: grpc.aio.Channel) -> bool:
            try:
                return await check_health(channel, "", HEALTH_TIMEOUT_S) == SERVING
            except grpc.RpcError:
                return False

        results = await asyncio.gather(*(check(c) for c in self.channels.values()))
        return all(results)

    # ---- CORS ------------------------------------------------------------------------

    def _cors(self, scope: Scope) -> list[tuple[bytes, bytes]] | None:
        """CORS response headers for an allowed cross-origin caller; [] for a same-origin
        call (no Origin, or the edge's own); None for a refused origin."""
        origin = _header(scope, b"origin")
        if not origin:
            return []
        host = _header(scope, b"host")
        scheme = scope.get("scheme", "http")
        if host and origin == f"{scheme}://{host}":
            return []
        allowed = self.config.cors_origins
        if "*" not in allowed and origin not in allowed:
            return None
        return [
            (b"access-control-allow-origin", origin.encode("latin-1")),
            (b"access-control-expose-headers", EXPOSED_HEADERS.encode()),
            (b"vary", b"origin"),
        ]

    async def _preflight(self, scope: Scope, send: Send) -> None:
        cors = self._cors(scope)
        if not cors:
            await _plain(send, 403, b"origin not allowed\n")
            return
        headers = [
            *cors,
            (b"access-control-allow-methods", b"POST, OPTIONS"),
            (b"access-control-allow-headers", ", ".join(ALLOWED_REQUEST_HEADERS).encode()),
            (b"access-control-max-age", b"600"),
        ]
        await send({"type": "http.response.start", "status": 204, "headers": headers})
        await send({"type": "http.response.body", "body": b""})

    # ---- calls -----------------------------------------------------------------------

    async def _call(self, scope: Scope, receive: Receive, send: Send, route: Route | None) -> None:
        started = time.perf_counter()
        cors = self._cors(scope)
        if cors is None:
            await _plain(send, 403, b"origin not allowed\n")
            return
        text = grpcweb.is_text(_header(scope, b"content-type"))
        if text is None:
            await _plain(send, 415, b"expected application/grpc-web or grpc-web-text\n")
            return
        body = await _read_body(receive, MAX_REQUEST_BYTES * 2 if text else MAX_REQUEST_BYTES)
        if body is None:
            await _plain(send, 413, b"request too large\n")
            return
        kind = b"application/grpc-web-text+proto" if text else b"application/grpc-web+proto"
        headers = [(b"content-type", kind), *cors]
        responder = _Responder(send, headers, text)
        code = grpc.StatusCode.OK
        try:
            if route is None:
                raise _Refused(grpc.StatusCode.UNIMPLEMENTED, f"{scope['path']} is not exposed")
            try:
                message = grpcweb.single_message(grpcweb.decode_text(body) if text else body)
                timeout_header = _header(scope, b"grpc-timeout")
                timeout = grpcweb.parse_timeout(timeout_header) if timeout_header else None
                metadata = grpcweb.metadata_from_headers(scope["headers"], PASSED_HEADERS)
                metadata.append(("x-forwarded-for", _forwarded_for(scope)))
            except grpcweb.ProtocolError as exc:
                raise _Refused(grpc.StatusCode.INVALID_ARGUMENT, str(exc)) from None
            channel = self.channels.get(route.upstream)
            if channel is None:
                raise _Refused(grpc.StatusCode.UNAVAILABLE, f"no upstream {route.upstream!r}")
            code = await _until_disconnect(
                receive, self._forward(channel, route, message, metadata, timeout, responder)
            )
        except _Refused as refused:
            code = refused.code
            await responder.finish(refused.code, refused.message, ())
        log.info(
            "edge_call",
            path=scope["path"],
            code=code.name,
            ms=round((time.perf_counter() - started) * 1000, 1),
            http=scope.get("http_version", ""),
            text=text,
        )

    async def _forward(
        self,
        channel: grpc.aio.Channel,
        route: Route,
        message: bytes,
        metadata: list[tuple[str, str | bytes]],
        deadline_s: float | None,
        responder: _Responder,
    ) -> grpc.StatusCode:
        upstream: grpc.aio.Call | None = None
        try:
            if route.server_streaming:
                streaming: grpc.aio.UnaryStreamMultiCallable[bytes, bytes] = channel.unary_stream(
                    route.path
                )
                stream_call = streaming(message, metadata=metadata, timeout=deadline_s)
                upstream = stream_call
                await responder.start(())
                async for reply in stream_call:
                    await responder.message(reply)
            else:
                unary: grpc.aio.UnaryUnaryMultiCallable[bytes, bytes] = channel.unary_unary(
                    route.path
                )
                unary_call = unary(message, metadata=metadata, timeout=deadline_s)
                upstream = unary_call
                reply = await unary_call
                await responder.start(())
                await responder.message(reply)
        except grpc.aio.AioRpcError as error:
            await responder.finish(
                error.code(), error.details() or "", error.trailing_metadata() or ()
            )
            return error.code()
        except asyncio.CancelledError:
            # The browser went away: end the service's call too (RST_STREAM upstream).
            if upstream is not None:
                upstream.cancel()
            raise
        # Our services send no response metadata on success (errors carry theirs, above):
        # not awaiting it saves a round of the call's state machine per call.
        await responder.finish(grpc.StatusCode.OK, "", ())
        return grpc.StatusCode.OK

    # ---- the web client --------------------------------------------------------------

    async def _static(self, scope: Scope, path: str, send: Send, *, head: bool) -> None:
        root = self.config.web_root
        if root is None:
            await _plain(send, 404, b"not found\n")
            return
        if self._assets is None or self._assets.root != root.resolve():
            self._assets = Assets(root)
        target = self._assets.find(path)
        if target is None:
            await _plain(send, 404, b"not found\n")
            return
        accept = _header(scope, b"accept-encoding")
        asset = await asyncio.to_thread(self._assets.load, target, accept)
        headers = [
            (b"content-type", asset.content_type.encode()),
            (b"content-length", str(len(asset.body)).encode()),
            (b"cache-control", asset.cache_control.encode()),
            (b"x-content-type-options", b"nosniff"),
        ]
        if asset.encoding:
            headers.append((b"content-encoding", asset.encoding.encode()))
        if asset.vary:
            headers.append((b"vary", b"accept-encoding"))
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": b"" if head else asset.body})


class _Refused(Exception):
    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class _Responder:
    """Writes one gRPC-Web response: headers once, data frames, the trailer frame."""

    def __init__(self, send: Send, headers: list[tuple[bytes, bytes]], text: bool) -> None:
        self._send = send
        self._headers = headers
        self._text = text
        self._started = False
        self._finished = False

    async def start(self, metadata: Iterable[tuple[str, str | bytes]]) -> None:
        if self._started:
            return
        self._started = True
        extra = [(k.encode(), v.encode("latin-1")) for k, v in grpcweb.header_pairs(metadata)]
        await self._send(
            {"type": "http.response.start", "status": 200, "headers": [*self._headers, *extra]}
        )

    async def message(self, data: bytes) -> None:
        await self._body(grpcweb.frame(data), more=True)

    async def finish(
        self, code: grpc.StatusCode, details: str, metadata: Iterable[tuple[str, str | bytes]]
    ) -> None:
        if self._finished:
            return
        await self.start(())
        self._finished = True
        await self._body(grpcweb.trailer_frame(code, details, metadata), more=False)

    async def _body(self, chunk: bytes, *, more: bool) -> None:
        body = grpcweb.encode_text(chunk) if self._text else chunk
        await self._send({"type": "http.response.body", "body": body, "more_body": more})


async def _until_disconnect(receive: Receive, work: Awaitable[grpc.StatusCode]) -> grpc.StatusCode:
    """Run the forwarded call; if the browser disconnects first, cancel it (and so the
    upstream call: cancelling a ``grpc.aio`` call's task cancels the RPC)."""
    task = asyncio.ensure_future(work)

    async def watch() -> None:
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return

    watcher = asyncio.ensure_future(watch())
    try:
        done, _ = await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
        if task in done:
            return task.result()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        return grpc.StatusCode.CANCELLED
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher
        if not task.done():
            task.cancel()


def _forwarded_for(scope: Scope) -> str:
    """``x-forwarded-for`` for the services: what the browser's side said, then the peer the
    edge sees (the services trust the edge's hop when KISHPA_LIMIT_TRUSTED_PROXIES names it,
    so per-address limits count browsers, not the edge)."""
    client = scope.get("client") or ("unknown", 0)
    before = _header(scope, b"x-forwarded-for")
    return f"{before}, {client[0]}" if before else str(client[0])


async def _read_body(receive: Receive, limit: int) -> bytes | None:
    body = bytearray()
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return bytes(body)
        body += message.get("body", b"")
        if len(body) > limit:
            return None
        if not message.get("more_body", False):
            return bytes(body)


async def _plain(
    send: Send, status: int, body: bytes, headers: Iterable[tuple[bytes, bytes]] = ()
) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"content-length", str(len(body)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
