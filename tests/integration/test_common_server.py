"""A real grpc.aio server built by services.common.server, called over loopback.

The probe service is defined here from generated messages (the health protos) so the test
needs no service of the project; it exercises auth, error mapping, streaming, health,
reflection and metrics exactly as every Kishpa service gets them.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
import redis.asyncio
import structlog
import structlog.testing
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from prometheus_client import CollectorRegistry
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from games.kishpa.errors import IllegalMoveError, TileNotationError
from services.common.auth import (
    Player,
    TokenAuthority,
    bearer_interceptors,
    bearer_metadata,
    current_caller,
    current_player,
)
from services.common.errors import INTERNAL_MESSAGE, NotFound, error_reason, validating
from services.common.health_client import check_health, wait_until_serving
from services.common.metrics import GrpcMetrics
from services.common.server import KishpaServer, ServiceRegistration, create_server
from services.common.settings import load_settings
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration

TOKEN_KEY = "t" * 40
SERVICE_KEY = "v" * 40
PROBE = "kishpa.test.v1.ProbeService"
Msg = health_pb2.HealthCheckRequest  # a generated message with one string field


def unused_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _name(caller: Any) -> str:
    if caller is None:
        return "anonymous"
    return caller.player_id if isinstance(caller, Player) else f"service:{caller.name}"


class Probe:
    """Methods that report the caller or raise what the request names."""

    async def Whoami(self, request: Msg, context: grpc.aio.ServicerContext[Msg, Msg]) -> Msg:
        await asyncio.sleep(0)  # the caller must survive a suspension
        structlog.get_logger("probe").info("probe.whoami")
        return Msg(service=_name(current_caller()))

    async def Fail(self, request: Msg, context: grpc.aio.ServicerContext[Msg, Msg]) -> Msg:
        current_player()
        match request.service:
            case "turn":
                raise IllegalMoveError("it is seat 2's turn", "NOT_YOUR_TURN")
            case "tile":
                raise TileNotationError("unknown tile Z9")
            case "table":
                raise NotFound("TABLE_NOT_FOUND", "no table named t-404")
            case "parse":
                with validating("seats"):
                    int("four")
            case "service-down":
                # A real call to another "service" that is not running.
                async with grpc.aio.insecure_channel(f"127.0.0.1:{unused_port()}") as channel:
                    await channel.unary_unary(f"/{PROBE}/Whoami")(b"", timeout=2)
            case "redis-down":
                # A real connection attempt to a port nothing listens on.
                client = redis.asyncio.Redis(
                    host="127.0.0.1", port=unused_port(), retry=Retry(NoBackoff(), 0)
                )
                try:
                    await client.ping()
                finally:
                    await client.aclose()
            case _:
                raise RuntimeError("db password is hunter2")
        return Msg()

    async def Count(self, request: Msg, context: Any) -> AsyncIterator[Msg]:
        player = current_player()
        for i in range(3):
            await asyncio.sleep(0)
            yield Msg(service=f"{player.player_id}:{i}")
        if request.service == "fail":
            raise IllegalMoveError("stream broke", "ROUND_OVER")


def add_probe(servicer: Probe, server: grpc.aio.Server) -> None:
    def unary(fn: Any) -> grpc.RpcMethodHandler[Any, Any]:
        return grpc.unary_unary_rpc_method_handler(
            fn, request_deserializer=Msg.FromString, response_serializer=Msg.SerializeToString
        )

    handlers = {
        "Whoami": unary(servicer.Whoami),
        "Fail": unary(servicer.Fail),
        "Count": grpc.unary_stream_rpc_method_handler(
            servicer.Count,
            request_deserializer=Msg.FromString,
            response_serializer=Msg.SerializeToString,
        ),
    }
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(PROBE, handlers),))


class Harness:
    def __init__(
        self, server: KishpaServer, registry: CollectorRegistry, logs: list[dict[str, Any]]
    ) -> None:
        self.server = server
        self.registry = registry
        self.logs = logs
        self.authority = TokenAuthority(TOKEN_KEY, SERVICE_KEY)
        self.channel = grpc.aio.insecure_channel(f"127.0.0.1:{server.port}")

    def unary(self, method: str) -> Any:
        return self.channel.unary_unary(
            f"/{PROBE}/{method}",
            request_serializer=Msg.SerializeToString,
            response_deserializer=Msg.FromString,
        )

    def player_metadata(self, player_id: str = "p-1") -> tuple[tuple[str, str], ...]:
        return bearer_metadata(self.authority.issue_player_token(player_id, "Dana").token)

    def handled(self, method: str, code: str) -> float:
        value = self.registry.get_sample_value(
            "kishpa_grpc_server_handled_total",
            {"grpc_service": PROBE, "grpc_method": method, "grpc_code": code},
        )
        return value or 0.0


@pytest.fixture
async def harness() -> AsyncIterator[Harness]:
    settings = load_settings(
        "probe", token_secret=TOKEN_KEY, service_secret=SERVICE_KEY, grpc_host="127.0.0.1"
    )
    registry = CollectorRegistry()
    server = create_server(
        [ServiceRegistration(PROBE, Probe(), add_probe)],
        settings,
        address="127.0.0.1:0",
        metrics=GrpcMetrics(registry),
    )
    await server.start()
    # Captured log entries (not rendered): what the server logged during the test.
    with structlog.testing.capture_logs(
        processors=[structlog.contextvars.merge_contextvars]
    ) as logs:
        h = Harness(server, registry, logs)
        try:
            yield h
        finally:
            await h.channel.close()
            await server.stop(None)


async def _code_and_reason(call: Any) -> tuple[grpc.StatusCode, str | None, str]:
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await call
    return info.value.code(), error_reason(info.value), info.value.details() or ""


async def test_missing_token_is_unauthenticated(harness: Harness) -> None:
    code, reason, details = await _code_and_reason(harness.unary("Whoami")(Msg()))
    assert (code, reason) == (grpc.StatusCode.UNAUTHENTICATED, "TOKEN_MISSING")
    assert "authorization" in details


async def test_expired_token_is_unauthenticated(harness: Harness) -> None:
    stale = TokenAuthority(TOKEN_KEY, clock=lambda: 1_000_000_000.0)
    token = stale.issue_player_token("p-1", "Dana").token
    call = harness.unary("Whoami")(Msg(), metadata=bearer_metadata(token))
    code, reason, _ = await _code_and_reason(call)
    assert (code, reason) == (grpc.StatusCode.UNAUTHENTICATED, "TOKEN_EXPIRED")


async def test_forged_token_is_unauthenticated(harness: Harness) -> None:
    forged = TokenAuthority("f" * 40).issue_player_token("p-1", "Dana").token
    call = harness.unary("Whoami")(Msg(), metadata=bearer_metadata(forged))
    code, reason, _ = await _code_and_reason(call)
    assert (code, reason) == (grpc.StatusCode.UNAUTHENTICATED, "TOKEN_INVALID")


async def test_malformed_authorization_is_unauthenticated(harness: Harness) -> None:
    call = harness.unary("Whoami")(Msg(), metadata=(("authorization", "Token abc"),))
    code, _, _ = await _code_and_reason(call)
    assert code is grpc.StatusCode.UNAUTHENTICATED


async def test_player_and_service_callers_are_identified(harness: Harness) -> None:
    reply = await harness.unary("Whoami")(Msg(), metadata=harness.player_metadata("p-77"))
    assert reply.service == "p-77"
    service_token = harness.authority.issue_service_token("worker").token
    reply = await harness.unary("Whoami")(Msg(), metadata=bearer_metadata(service_token))
    assert reply.service == "service:worker"


async def test_log_lines_of_a_call_name_the_caller_not_the_token(harness: Harness) -> None:
    metadata = harness.player_metadata("p-31")
    await harness.unary("Whoami")(Msg(), metadata=metadata)
    entries = [e for e in harness.logs if e["event"] == "probe.whoami"]
    assert [e.get("caller") for e in entries] == ["p-31"]
    token = metadata[0][1].removeprefix("Bearer ")
    assert token not in repr(harness.logs)


async def test_client_interceptors_attach_the_token(harness: Harness) -> None:
    token = harness.authority.issue_player_token("p-9", "Noa").token
    async with grpc.aio.insecure_channel(
        f"127.0.0.1:{harness.server.port}", interceptors=bearer_interceptors(lambda: token)
    ) as channel:
        whoami = channel.unary_unary(
            f"/{PROBE}/Whoami",
            request_serializer=Msg.SerializeToString,
            response_deserializer=Msg.FromString,
        )
        assert (await whoami(Msg())).service == "p-9"


@pytest.mark.parametrize(
    ("what", "code", "reason"),
    [
        ("turn", grpc.StatusCode.FAILED_PRECONDITION, "NOT_YOUR_TURN"),
        ("tile", grpc.StatusCode.INVALID_ARGUMENT, "MALFORMED_TILE"),
        ("table", grpc.StatusCode.NOT_FOUND, "TABLE_NOT_FOUND"),
        ("parse", grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT"),
        ("redis-down", grpc.StatusCode.UNAVAILABLE, "DEPENDENCY_UNAVAILABLE"),
        ("service-down", grpc.StatusCode.UNAVAILABLE, "DEPENDENCY_UNAVAILABLE"),
    ],
)
async def test_domain_errors_map_to_code_and_reason(
    harness: Harness, what: str, code: grpc.StatusCode, reason: str
) -> None:
    call = harness.unary("Fail")(Msg(service=what), metadata=harness.player_metadata())
    assert (await _code_and_reason(call))[:2] == (code, reason)


async def test_service_caller_of_player_method_is_permission_denied(harness: Harness) -> None:
    token = harness.authority.issue_service_token("worker").token
    call = harness.unary("Fail")(Msg(service="turn"), metadata=bearer_metadata(token))
    code, reason, _ = await _code_and_reason(call)
    assert (code, reason) == (grpc.StatusCode.PERMISSION_DENIED, "PLAYER_REQUIRED")


async def test_unexpected_error_is_internal_without_leaking(harness: Harness) -> None:
    call = harness.unary("Fail")(Msg(service="bug"), metadata=harness.player_metadata())
    code, reason, details = await _code_and_reason(call)
    assert (code, reason, details) == (grpc.StatusCode.INTERNAL, "INTERNAL", INTERNAL_MESSAGE)
    assert "hunter2" not in details
    logged = [e for e in harness.logs if e["event"] == "rpc.unexpected_error"]
    assert len(logged) == 1
    assert logged[0]["method"] == f"/{PROBE}/Fail"
    assert logged[0]["error_type"] == "RuntimeError"


async def test_unreachable_dependency_is_logged_as_a_warning(harness: Harness) -> None:
    call = harness.unary("Fail")(Msg(service="service-down"), metadata=harness.player_metadata())
    assert (await _code_and_reason(call))[0] is grpc.StatusCode.UNAVAILABLE
    logged = [e for e in harness.logs if e["event"] == "rpc.dependency_unavailable"]
    assert [e["log_level"] for e in logged] == ["warning"]


async def test_redis_away_is_logged_once_as_an_outage_not_per_call(harness: Harness) -> None:
    from services.common.outage import ENDED, REDIS, STARTED

    REDIS.answered()  # whatever an earlier test left open is over
    for _ in range(3):
        call = harness.unary("Fail")(Msg(service="redis-down"), metadata=harness.player_metadata())
        assert (await _code_and_reason(call))[0] is grpc.StatusCode.UNAVAILABLE
    REDIS.answered()
    logged = [e for e in harness.logs if e["event"] in (STARTED, ENDED)]
    assert [(e["event"], e["log_level"]) for e in logged][-2:] == [
        (STARTED, "warning"),
        (ENDED, "warning"),
    ]
    assert not [e for e in harness.logs if e["event"] == "rpc.dependency_unavailable"]
    assert not [e for e in harness.logs if "exc_info" in e or "exception" in e]


async def test_streams_pass_through_auth_and_error_mapping(harness: Harness) -> None:
    count = harness.channel.unary_stream(
        f"/{PROBE}/Count",
        request_serializer=Msg.SerializeToString,
        response_deserializer=Msg.FromString,
    )
    replies = [m.service async for m in count(Msg(), metadata=harness.player_metadata("p-5"))]
    assert replies == ["p-5:0", "p-5:1", "p-5:2"]

    seen: list[str] = []

    async def read_all() -> None:
        async for message in count(Msg(service="fail"), metadata=harness.player_metadata("p-5")):
            seen.append(message.service)

    with pytest.raises(grpc.aio.AioRpcError) as info:
        await read_all()
    assert len(seen) == 3
    assert info.value.code() is grpc.StatusCode.FAILED_PRECONDITION
    assert error_reason(info.value) == "ROUND_OVER"

    async def read_anonymously() -> None:
        async for _ in count(Msg()):
            pass

    with pytest.raises(grpc.aio.AioRpcError) as info:
        await read_anonymously()
    assert info.value.code() is grpc.StatusCode.UNAUTHENTICATED


async def test_metrics_count_calls_by_method_and_code(harness: Harness) -> None:
    whoami = harness.unary("Whoami")
    for _ in range(3):
        await whoami(Msg(), metadata=harness.player_metadata())
    with pytest.raises(grpc.aio.AioRpcError):
        await whoami(Msg())
    with pytest.raises(grpc.aio.AioRpcError):
        await harness.unary("Fail")(Msg(service="table"), metadata=harness.player_metadata())
    # A refusal is counted as its call ends on the server, which may be just after the
    # client has read it.
    await wait_until(
        lambda: (
            harness.handled("Fail", "NOT_FOUND") == 1
            and harness.handled("Whoami", "UNAUTHENTICATED") == 1
        ),
        timeout=5,
        message="both refusals counted",
    )
    assert harness.handled("Whoami", "OK") == 3
    assert harness.handled("Whoami", "UNAUTHENTICATED") == 1
    assert harness.handled("Fail", "NOT_FOUND") == 1
    count = harness.registry.get_sample_value(
        "kishpa_grpc_server_handling_seconds_count",
        {"grpc_service": PROBE, "grpc_method": "Whoami"},
    )
    assert count == 4
    in_flight = harness.registry.get_sample_value(
        "kishpa_grpc_server_in_flight", {"grpc_service": PROBE, "grpc_method": "Whoami"}
    )
    assert in_flight == 0


async def test_health_is_public_and_serving(harness: Harness) -> None:
    health = health_pb2_grpc.HealthStub(harness.channel)
    for name in ("", PROBE):
        reply = await health.Check(health_pb2.HealthCheckRequest(service=name))
        assert reply.status == health_pb2.HealthCheckResponse.SERVING
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await health.Check(health_pb2.HealthCheckRequest(service="kishpa.nope.v1.Nope"))
    assert info.value.code() is grpc.StatusCode.NOT_FOUND


async def test_health_turns_not_serving_when_shutdown_starts(harness: Harness) -> None:
    health = health_pb2_grpc.HealthStub(harness.channel)
    watch = health.Watch(health_pb2.HealthCheckRequest(service=PROBE))
    first = await watch.read()
    assert first.status == health_pb2.HealthCheckResponse.SERVING
    stopping = asyncio.create_task(harness.server.stop(grace=5))
    second = await asyncio.wait_for(watch.read(), timeout=5)
    assert second.status == health_pb2.HealthCheckResponse.NOT_SERVING
    watch.cancel()
    await stopping


async def test_reflection_lists_the_services(harness: Harness) -> None:
    stub = reflection_pb2_grpc.ServerReflectionStub(harness.channel)

    async def requests() -> AsyncIterator[reflection_pb2.ServerReflectionRequest]:
        yield reflection_pb2.ServerReflectionRequest(list_services="")

    async for reply in stub.ServerReflectionInfo(requests()):
        names = {s.name for s in reply.list_services_response.service}
        break
    assert {PROBE, "grpc.health.v1.Health", "grpc.reflection.v1alpha.ServerReflection"} <= names


async def test_a_taken_port_is_refused(harness: Harness) -> None:
    settings = load_settings("probe", token_secret=TOKEN_KEY)
    with pytest.raises(RuntimeError, match="could not bind"):
        create_server([], settings, address=f"127.0.0.1:{harness.server.port}")


async def test_health_client_waits_for_serving(harness: Harness) -> None:
    address = f"127.0.0.1:{harness.server.port}"
    await wait_until_serving(address, PROBE, deadline_seconds=5)
    assert await check_health(harness.channel, PROBE) == health_pb2.HealthCheckResponse.SERVING
    with pytest.raises(TimeoutError):
        await wait_until_serving(f"127.0.0.1:{unused_port()}", deadline_seconds=0.3)


async def test_a_burst_of_thousands_of_streams_is_accepted(harness: Harness) -> None:
    """Thousands of streams opened at once (every watcher of a restarted table process comes
    back together) are all accepted: grpc's default refuses calls at random, with CANCELLED,
    once more than 1,000 wait to be picked up."""
    channels = [
        grpc.aio.insecure_channel(
            f"127.0.0.1:{harness.server.port}", options=[("grpc.use_local_subchannel_pool", 1)]
        )
        for _ in range(6)
    ]
    held: list[Any] = []  # the streams stay open until the end

    async def first_reply(i: int) -> str:
        call = health_pb2_grpc.HealthStub(channels[i % len(channels)]).Watch(
            health_pb2.HealthCheckRequest(service=PROBE)
        )
        held.append(call)
        try:
            async for reply in call:
                return health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)
        except grpc.aio.AioRpcError as exc:
            return exc.code().name
        return "ENDED"

    try:
        answers = await asyncio.wait_for(
            asyncio.gather(*(first_reply(i) for i in range(3000)), return_exceptions=True), 120
        )
        assert [a for a in answers if a != "SERVING"] == []
    finally:
        for call in held:
            call.cancel()
        for channel in channels:
            await channel.close()
