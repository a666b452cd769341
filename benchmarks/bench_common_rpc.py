"""Cost of the shared server plumbing (metrics, auth, validation, rate limits, error mapping)
per unary RPC.

Runs in one process on loopback: a bare ``grpc.aio`` server is the baseline; the same
handler behind ``services.common.server.create_server`` is measured on a public method
(no token check), on an authenticated one (a JWT verified per call), on a ``kishpa.*`` method
whose request the validation layer checks field by field (``TableService/GetTable``), and on
that method with the Redis-backed rate limits as well (``REDIS_URL``, default the local
Redis; its counters go under a key prefix of this run and are deleted). Prints calls per
second and each variant's time per call as a ratio to the baseline of the same run.

Then the same plumbing around a server-streaming call (``TableService/WatchTable``'s shape:
authenticated and validated, each message a ``WatchTableResponse`` with one event): a bare
server, then ``create_server`` with its interceptors' stream wrappers merged into one
generator (``services.common.handlers.MERGE_STREAM_LAYERS``, the default) and with one
generator per interceptor (the former way), alternated round by round in the same process.

    .venv/bin/python benchmarks/bench_common_rpc.py [calls] [stream messages]
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from typing import Any

import grpc
from grpc_health.v1 import health_pb2
from limits import parse
from prometheus_client import CollectorRegistry

from kishpa.table.v1 import table_pb2
from services.common import handlers
from services.common.auth import TokenAuthority, bearer_metadata
from services.common.limits import LimitConfig, Limiter
from services.common.metrics import GrpcMetrics
from services.common.server import ServiceRegistration, create_server
from services.common.settings import load_settings

SERVICE = "kishpa.bench.v1.EchoService"
Msg = health_pb2.HealthCheckRequest
KEY = "b" * 40
ROUNDS = 5


async def _echo(request: Msg, context: Any) -> Msg:
    return request


CHECKED_SERVICE = "kishpa.table.v1.TableService"
Checked = table_pb2.GetTableRequest


async def _echo_checked(request: Checked, context: Any) -> Checked:
    return request


def _add_checked(servicer: Any, server: grpc.aio.Server) -> None:
    handler = grpc.unary_unary_rpc_method_handler(
        _echo_checked,
        request_deserializer=Checked.FromString,
        response_serializer=Checked.SerializeToString,
    )
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(CHECKED_SERVICE, {"GetTable": handler}),)
    )


async def _time_checked(port: int, calls: int, metadata: Any) -> float:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        call = channel.unary_unary(
            f"/{CHECKED_SERVICE}/GetTable",
            request_serializer=Checked.SerializeToString,
            response_deserializer=Checked.FromString,
        )
        request = Checked(table_id="t0123456789abcdef01234567")
        for _ in range(50):
            await call(request, metadata=metadata)
        began = time.perf_counter()
        for _ in range(calls):
            await call(request, metadata=metadata)
        return (time.perf_counter() - began) / calls


def _add(servicer: Any, server: grpc.aio.Server) -> None:
    handler = grpc.unary_unary_rpc_method_handler(
        _echo, request_deserializer=Msg.FromString, response_serializer=Msg.SerializeToString
    )
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(SERVICE, {"Public": handler, "Private": handler}),)
    )


async def _time_calls(port: int, method: str, calls: int, metadata: Any = None) -> float:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        call = channel.unary_unary(
            f"/{SERVICE}/{method}",
            request_serializer=Msg.SerializeToString,
            response_deserializer=Msg.FromString,
        )
        for _ in range(50):  # warm up the connection
            await call(Msg(service="x"), metadata=metadata)
        began = time.perf_counter()
        for _ in range(calls):
            await call(Msg(service="x"), metadata=metadata)
        return (time.perf_counter() - began) / calls


async def main(calls: int) -> None:
    bare = grpc.aio.server()
    _add(None, bare)
    bare_port = bare.add_insecure_port("127.0.0.1:0")
    await bare.start()

    settings = load_settings("bench", token_secret=KEY)
    authority = TokenAuthority(KEY)
    kishpa = create_server(
        [ServiceRegistration(SERVICE, None, _add)],
        settings,
        address="127.0.0.1:0",
        public_methods={f"/{SERVICE}/Public"},
        authority=authority,
        metrics=GrpcMetrics(CollectorRegistry()),
    )
    await kishpa.start()
    checked = create_server(
        [ServiceRegistration(CHECKED_SERVICE, None, _add_checked)],
        settings,
        address="127.0.0.1:0",
        authority=authority,
        metrics=GrpcMetrics(CollectorRegistry()),
    )
    await checked.start()
    prefix = f"kishpa:bench-limits:{os.getpid()}"
    limiter = Limiter(
        os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"),
        LimitConfig(
            parse("1000000/second"),
            parse("1000000/second"),
            parse("1000000/second"),
            parse("1000000/second"),
            16,
            key_prefix=prefix,
        ),
    )
    limited = create_server(
        [ServiceRegistration(CHECKED_SERVICE, None, _add_checked)],
        settings,
        address="127.0.0.1:0",
        authority=authority,
        metrics=GrpcMetrics(CollectorRegistry()),
        limiter=limiter,
    )
    await limited.start()
    token = bearer_metadata(authority.issue_player_token("p-bench", "Bench").token)
    variants = [
        (bare_port, "Public", None),
        (bare_port, "Public", token),
        (kishpa.port, "Public", None),
        (kishpa.port, "Private", token),
        (checked.port, "", token),
        (limited.port, "", token),
    ]
    best = [float("inf")] * len(variants)
    try:
        # Interleaved rounds, best of each: the machine is shared, so noise only adds time.
        for _ in range(ROUNDS):
            for i, (port, method, metadata) in enumerate(variants):
                share = calls // ROUNDS
                took = (
                    await _time_calls(port, method, share, metadata)
                    if method
                    else await _time_checked(port, share, metadata)
                )
                best[i] = min(best[i], took)
    finally:
        await kishpa.stop(None)
        await checked.stop(None)
        await limited.stop(None)
        await bare.stop(None)
        async for key in limiter.redis.scan_iter(match=f"*{prefix}*"):
            await limiter.redis.delete(key)
        await limiter.close()
    baseline, bare_token, public, private, validated, rate_limited = best
    print(
        f"unary calls, sequential, {calls} per variant in {ROUNDS} interleaved rounds "
        "(best round), one process over loopback"
    )
    for name, seconds in (
        ("bare grpc.aio server (baseline)", baseline),
        ("bare, token sent but not checked", bare_token),
        ("create_server, public method", public),
        ("create_server, token verified", private),
        ("+ validation (a kishpa.* request)", validated),
        ("+ validation + Redis rate limits", rate_limited),
    ):
        print(
            f"  {name:34s} {1 / seconds:8.0f} calls/s  {seconds * 1e6:7.1f} us/call"
            f"  x{seconds / baseline:.2f} of baseline"
        )


STREAM_SERVICE = "kishpa.table.v1.TableService"
STREAM_PER_CALL = 200


async def _watch(request: table_pb2.WatchTableRequest, context: Any) -> Any:
    event = table_pb2.TableEvent(
        event_id="1700000000000-0", round=1, seat=2, discarded=table_pb2.Discarded()
    )
    message = table_pb2.WatchTableResponse(event=event)
    for _ in range(STREAM_PER_CALL):
        yield message


def _add_watch(servicer: Any, server: grpc.aio.Server) -> None:
    handler = grpc.unary_stream_rpc_method_handler(
        _watch,
        request_deserializer=table_pb2.WatchTableRequest.FromString,
        response_serializer=table_pb2.WatchTableResponse.SerializeToString,
    )
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(STREAM_SERVICE, {"WatchTable": handler}),)
    )


async def _time_stream(port: int, messages: int, metadata: Any) -> float:
    """Seconds per streamed message over ``messages`` (calls of ``STREAM_PER_CALL``)."""
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        call = channel.unary_stream(
            f"/{STREAM_SERVICE}/WatchTable",
            request_serializer=table_pb2.WatchTableRequest.SerializeToString,
            response_deserializer=table_pb2.WatchTableResponse.FromString,
        )
        request = table_pb2.WatchTableRequest(table_id="t0123456789abcdef01234567")

        async def one_call() -> int:
            got = 0
            async for _ in call(request, metadata=metadata):
                got += 1
            return got

        await one_call()  # warm up the connection
        calls = max(1, messages // STREAM_PER_CALL)
        began = time.perf_counter()
        for _ in range(calls):
            assert await one_call() == STREAM_PER_CALL
        return (time.perf_counter() - began) / (calls * STREAM_PER_CALL)


async def streams(messages: int) -> None:
    """Streamed messages per second: bare, merged stream wrappers, one per interceptor."""
    bare = grpc.aio.server()
    _add_watch(None, bare)
    bare_port = bare.add_insecure_port("127.0.0.1:0")
    await bare.start()
    authority = TokenAuthority(KEY)
    server = create_server(
        [ServiceRegistration(STREAM_SERVICE, None, _add_watch)],
        load_settings("bench", token_secret=KEY),
        address="127.0.0.1:0",
        authority=authority,
        metrics=GrpcMetrics(CollectorRegistry()),
    )
    await server.start()
    token = bearer_metadata(authority.issue_player_token("p-bench", "Bench").token)
    # (port, merge the wrappers?): the flag is read as each call's handler is wrapped.
    variants = [(bare_port, True), (server.port, True), (server.port, False)]
    best = [float("inf")] * len(variants)
    try:
        for _ in range(ROUNDS):
            for i, (port, merged) in enumerate(variants):
                handlers.MERGE_STREAM_LAYERS = merged
                best[i] = min(best[i], await _time_stream(port, messages // ROUNDS, token))
    finally:
        handlers.MERGE_STREAM_LAYERS = True
        await server.stop(None)
        await bare.stop(None)
    baseline, merged_s, layered_s = best
    print(
        f"server-streaming messages, {messages} per variant ({STREAM_PER_CALL} per call) in "
        f"{ROUNDS} interleaved rounds (best round), one process over loopback"
    )
    for name, seconds in (
        ("bare grpc.aio server (baseline)", baseline),
        ("create_server, one generator per layer", layered_s),
        ("create_server, layers merged (default)", merged_s),
    ):
        print(
            f"  {name:40s} {1 / seconds:8.0f} msgs/s  {seconds * 1e6:7.1f} us/msg"
            f"  x{seconds / baseline:.2f} of baseline"
        )
    print(f"  merged / one per layer: x{merged_s / layered_s:.2f} time per message")


def verify_cost(calls: int) -> None:
    """Token verification alone: a full HS256 check against the verified-token cache."""
    authority = TokenAuthority(KEY)
    token = authority.issue_player_token("p-bench", "Bench").token
    began = time.perf_counter()
    for _ in range(calls):
        TokenAuthority(KEY).verify(token)  # a fresh authority: nothing cached
    full = (time.perf_counter() - began) / calls
    authority.verify(token)
    began = time.perf_counter()
    for _ in range(calls):
        authority.verify(token)
    cached = (time.perf_counter() - began) / calls
    print(f"token verification alone, {calls} calls each")
    print(f"  full HS256 verification (baseline)  {full * 1e6:7.1f} us/call  x1.00")
    print(
        f"  verified-token cache hit            {cached * 1e6:7.1f} us/call  x{cached / full:.3f}"
    )


if __name__ == "__main__":
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 3000
    stream_messages = int(sys.argv[2]) if len(sys.argv) > 2 else 50_000
    asyncio.run(main(count))
    asyncio.run(streams(stream_messages))
    verify_cost(count)
