"""What the browser edge costs: the same calls direct over gRPC and through the gRPC-Web
edge, in the same run.

A real table service (``kishpa serve table``) and the edge (``kishpa serve edge``) run as
their own processes on loopback over the machine's Redis (``TEST_REDIS_URL``'s server,
database 12); this process is the client. Measured:

- unary: sequential ``GetTable`` calls (token verified, table read from Redis), direct with
  ``grpc.aio``, and through the edge with a lean HTTP/1.1 keep-alive client; the same with
  ``httpx`` over HTTP/1.1 and HTTP/2 (h2c) shows HTTP/2 working and what a client library
  adds on its own;
- streaming: ``WatchTable`` replaying a backlog of events (one table with many joins and
  leaves) until the last one arrives, direct and through the edge.

Interleaved rounds, best of each (the machine is shared: noise only adds time). Prints the
time per call/event and each edge variant as a ratio to direct gRPC of the same run.

    .venv/bin/python benchmarks/bench_edge.py [calls]
"""

from __future__ import annotations

import asyncio
import os
import secrets
import signal
import struct
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # benchmarks/ and devkit/ run from the tree

import grpc  # noqa: E402
import httpx  # noqa: E402

from benchmarks._common import free_port  # noqa: E402
from kishpa.common.v1 import common_pb2  # noqa: E402
from kishpa.table.v1 import table_pb2, table_pb2_grpc  # noqa: E402
from services.common.auth import TokenAuthority, bearer_metadata  # noqa: E402
from services.common.health_client import wait_until_serving  # noqa: E402

ROUNDS = 5
EVENTS = 400
KISHPA = str(Path(sys.executable).with_name("kishpa"))
REDIS = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
GRPC_WEB = {"content-type": "application/grpc-web+proto", "x-grpc-web": "1"}


def _frame(message: bytes) -> bytes:
    return b"\x00" + struct.pack(">I", len(message)) + message


def _messages(body: bytes) -> int:
    count = 0
    while len(body) >= 5:
        flag, length = struct.unpack(">BI", body[:5])
        body = body[5 + length :]
        count += 0 if flag & 0x80 else 1
    return count


async def _direct_unary(
    address: str, request: bytes, metadata: tuple[tuple[str, str], ...], calls: int
) -> float:
    async with grpc.aio.insecure_channel(address) as channel:
        stub = table_pb2_grpc.TableServiceStub(channel)
        req = table_pb2.GetTableRequest.FromString(request)
        for _ in range(20):
            await stub.GetTable(req, metadata=metadata)
        began = time.perf_counter()
        for _ in range(calls):
            await stub.GetTable(req, metadata=metadata)
        return (time.perf_counter() - began) / calls


class _Http1:
    """A lean HTTP/1.1 keep-alive client (so the figures are the edge's, not a client
    library's): one POST at a time, the chunked gRPC-Web body read frame by frame."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, base: str) -> _Http1:
        url = urlsplit(base)
        return cls(*await asyncio.open_connection(url.hostname, url.port))

    async def post(self, path: str, body: bytes, token: str) -> AsyncIterator[bytes]:
        self.writer.write(
            (
                f"POST {path} HTTP/1.1\r\nhost: edge\r\ncontent-type: application/grpc-web+proto"
                f"\r\nx-grpc-web: 1\r\nauthorization: Bearer {token}"
                f"\r\ncontent-length: {len(body)}\r\n\r\n"
            ).encode()
            + body
        )
        await self.writer.drain()
        head = await self.reader.readuntil(b"\r\n\r\n")
        assert b" 200 " in head.split(b"\r\n", 1)[0], head
        assert b"chunked" in head.lower(), head
        while True:
            size = int((await self.reader.readuntil(b"\r\n")).strip(), 16)
            chunk = await self.reader.readexactly(size + 2)
            if size == 0:
                return
            yield chunk[:-2]

    async def close(self) -> None:
        self.writer.close()
        await self.writer.wait_closed()


async def _edge_unary_lean(base: str, request: bytes, token: str, calls: int) -> float:
    client = await _Http1.open(base)
    body = _frame(request)
    path = "/kishpa.table.v1.TableService/GetTable"

    async def one() -> None:
        data = b"".join([c async for c in client.post(path, body, token)])
        assert _messages(data) == 1, data[-200:]

    try:
        for _ in range(20):
            await one()
        began = time.perf_counter()
        for _ in range(calls):
            await one()
        return (time.perf_counter() - began) / calls
    finally:
        await client.close()


async def _edge_unary(base: str, request: bytes, token: str, calls: int, *, http2: bool) -> float:
    headers = {**GRPC_WEB, "authorization": f"Bearer {token}"}
    body = _frame(request)
    async with httpx.AsyncClient(http1=not http2, http2=http2) as client:
        url = f"{base}/kishpa.table.v1.TableService/GetTable"
        for _ in range(20):
            await client.post(url, content=body, headers=headers)
        began = time.perf_counter()
        for _ in range(calls):
            reply = await client.post(url, content=body, headers=headers)
            assert _messages(reply.content) == 1, reply.content[-200:]
        return (time.perf_counter() - began) / calls


async def _direct_stream(
    address: str, table_id: str, metadata: tuple[tuple[str, str], ...]
) -> float:
    async with grpc.aio.insecure_channel(address) as channel:
        stub = table_pb2_grpc.TableServiceStub(channel)
        began = time.perf_counter()
        seen = 0
        async for _ in stub.WatchTable(
            table_pb2.WatchTableRequest(table_id=table_id), metadata=metadata
        ):
            seen += 1
            if seen == EVENTS:
                break
        return (time.perf_counter() - began) / EVENTS


async def _edge_stream(base: str, table_id: str, token: str) -> float:
    client = await _Http1.open(base)
    body = _frame(table_pb2.WatchTableRequest(table_id=table_id).SerializeToString())
    try:
        began = time.perf_counter()
        buffer = b""
        seen = 0
        path = "/kishpa.table.v1.TableService/WatchTable"
        async for chunk in client.post(path, body, token):
            buffer += chunk
            while len(buffer) >= 5:
                _, length = struct.unpack(">BI", buffer[:5])
                if len(buffer) < 5 + length:
                    break
                buffer = buffer[5 + length :]
                seen += 1
            if seen >= EVENTS:
                break
        return (time.perf_counter() - began) / EVENTS
    finally:
        await client.close()


def main(calls: int) -> None:
    """Start the table service and the edge, measure, stop them."""
    secret = secrets.token_urlsafe(48)
    table_port, edge_port = free_port(), free_port()
    env = {
        **os.environ,
        "REDIS_URL": urlunsplit(urlsplit(REDIS)._replace(path="/12")),
        "KISHPA_TOKEN_SECRET": secret,
        "KISHPA_SERVICE_SECRET": secrets.token_urlsafe(48),
        "KISHPA_GRPC_PORT": str(table_port),
        "KISHPA_METRICS_PORT": "0",
        "KISHPA_TABLE_ADDR": f"127.0.0.1:{table_port}",
        "KISHPA_EDGE_PORT": str(edge_port),
        "KISHPA_EDGE_HOST": "127.0.0.1",
        "KISHPA_LOG_LEVEL": "WARNING",
        "KISHPA_TABLE_ENQUEUE": "0",
        # The per-player rate limits would cap the measured rates, not the edge.
        "KISHPA_LIMIT_PLAYER_READS": "1000000/second",
        "KISHPA_LIMIT_PLAYER_WRITES": "1000000/second",
    }
    table = subprocess.Popen([KISHPA, "serve", "table"], env=env, stdout=subprocess.DEVNULL)
    edge = subprocess.Popen([KISHPA, "serve", "edge"], env=env, stdout=subprocess.DEVNULL)
    address, base = f"127.0.0.1:{table_port}", f"http://127.0.0.1:{edge_port}"
    try:
        unary, stream = asyncio.run(_measure(address, base, secret, calls))
    finally:
        for process in (edge, table):
            process.send_signal(signal.SIGTERM)
        for process in (edge, table):
            process.wait(timeout=30)
    _report(calls, unary, stream)


async def _measure(
    address: str, base: str, secret: str, calls: int
) -> tuple[list[float], list[float]]:
    await wait_until_serving(address, "", 60)
    async with httpx.AsyncClient() as client:
        for _ in range(200):
            try:
                if (await client.get(base + "/healthz")).status_code == 200:
                    break
            except httpx.TransportError:
                await asyncio.sleep(0.1)
    authority = TokenAuthority(secret)
    me, other = f"bench-{uuid.uuid4().hex[:8]}", f"bench-{uuid.uuid4().hex[:8]}"
    token = authority.issue_player_token(me, "Bench").token
    mine, theirs = (
        bearer_metadata(token),
        bearer_metadata(authority.issue_player_token(other, "Other").token),
    )
    async with grpc.aio.insecure_channel(address) as channel:
        stub = table_pb2_grpc.TableServiceStub(channel)
        settings = table_pb2.TableSettings(game=common_pb2.GAME_KISHPA, seats=2)
        created = await stub.CreateTable(
            table_pb2.CreateTableRequest(settings=settings), metadata=mine
        )
        table_id = created.table.table_id
        # A backlog to replay: joins and leaves of a second player.
        for n in range(EVENTS // 2):
            await stub.JoinTable(
                table_pb2.JoinTableRequest(table_id=table_id, request_id=f"j{n}"),
                metadata=theirs,
            )
            await stub.LeaveTable(
                table_pb2.LeaveTableRequest(table_id=table_id, request_id=f"l{n}"),
                metadata=theirs,
            )
    request = table_pb2.GetTableRequest(table_id=table_id).SerializeToString()
    unary = [float("inf")] * 4
    stream = [float("inf")] * 2
    for _ in range(ROUNDS):
        per = calls // ROUNDS
        unary[0] = min(unary[0], await _direct_unary(address, request, mine, per))
        unary[1] = min(unary[1], await _edge_unary_lean(base, request, token, per))
        unary[2] = min(unary[2], await _edge_unary(base, request, token, per, http2=False))
        unary[3] = min(unary[3], await _edge_unary(base, request, token, per, http2=True))
        stream[0] = min(stream[0], await _direct_stream(address, table_id, mine))
        stream[1] = min(stream[1], await _edge_stream(base, table_id, token))
    return unary, stream


def _report(calls: int, unary: list[float], stream: list[float]) -> None:
    print(
        f"table service and edge as separate processes on loopback; {calls} GetTable calls "
        f"and {ROUNDS} replays of a {EVENTS}-event WatchTable backlog per variant, "
        f"{ROUNDS} interleaved rounds (best round)"
    )
    for name, seconds in (
        ("GetTable direct gRPC (baseline)", unary[0]),
        ("GetTable via edge, HTTP/1.1", unary[1]),
        ("  same, httpx client, HTTP/1.1", unary[2]),
        ("  same, httpx client, HTTP/2 (h2c)", unary[3]),
    ):
        print(
            f"  {name:34s} {1 / seconds:8.0f} calls/s  {seconds * 1e6:8.1f} us/call"
            f"  x{seconds / unary[0]:.2f} of direct"
        )
    for name, seconds in (
        ("WatchTable direct gRPC (baseline)", stream[0]),
        ("WatchTable via edge, HTTP/1.1", stream[1]),
    ):
        print(
            f"  {name:34s} {1 / seconds:8.0f} events/s {seconds * 1e6:8.1f} us/event"
            f"  x{seconds / stream[0]:.2f} of direct"
        )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1000)
