"""The SDK retries an unreachable server for its budget, says it is reconnecting, and
`kishpa play` shows "reconnecting…" instead of an error while it does."""

from __future__ import annotations

import socket
import time

import grpc
import pytest
from google.rpc import error_details_pb2, status_pb2
from rich.console import Console

from cli.play.kishpa_ui import KishpaUI
from cli.play.session import RECONNECTING, PlaySession
from sdk import KishpaClient, KishpaError, RetryPolicy
from sdk.errors import STATUS_DETAILS_KEY

pytestmark = pytest.mark.unit


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port  # closed again: nothing listens there


async def test_a_call_to_an_unreachable_server_is_retried_for_the_budget_then_fails() -> None:
    addr = f"127.0.0.1:{_closed_port()}"
    seen: list[bool] = []
    client = KishpaClient(
        addr, addr, retry=RetryPolicy(budget_s=1.5, first_delay_s=0.05, max_delay_s=0.2),
        on_reconnecting=seen.append,
    )  # fmt: skip
    started = time.monotonic()
    async with client:
        with pytest.raises(KishpaError) as failed:
            await client.login("Ann")
    took = time.monotonic() - started
    assert failed.value.code == grpc.StatusCode.UNAVAILABLE
    assert 1.0 <= took <= 4.0, took  # it kept trying for about its budget, then gave up
    assert seen == [True]  # told once that it is reconnecting
    assert client.reconnects == 1


async def test_no_retry_fails_at_once() -> None:
    addr = f"127.0.0.1:{_closed_port()}"
    client = KishpaClient(addr, addr, retry=RetryPolicy(budget_s=0.0, attempts=1))
    started = time.monotonic()
    async with client:
        with pytest.raises(KishpaError):
            await client.login("Ann")
    assert time.monotonic() - started < 1.0
    assert client.reconnects == 0


async def test_the_play_session_shows_reconnecting_and_reconnected() -> None:
    console = Console(record=True, width=80)
    client = KishpaClient("127.0.0.1:1", "127.0.0.1:1")
    PlaySession(client, console, "t1", {}, KishpaUI())
    client._set_reconnecting(True)
    client._set_reconnecting(True)  # said once per outage
    client._set_reconnecting(False)
    text = console.export_text()
    assert text.count(RECONNECTING) == 1
    assert "Reconnected." in text
    assert RECONNECTING == "reconnecting…"


def _rate_limited(retry_after_ms: int) -> grpc.aio.AioRpcError:
    """A refusal as the services send it: RESOURCE_EXHAUSTED with ErrorInfo RATE_LIMITED."""
    info = error_details_pb2.ErrorInfo(
        reason="RATE_LIMITED", metadata={"retry_after_ms": str(retry_after_ms)}
    )
    status = status_pb2.Status(code=grpc.StatusCode.RESOURCE_EXHAUSTED.value[0])
    status.details.add().Pack(info)
    trailers = grpc.aio.Metadata((STATUS_DETAILS_KEY, status.SerializeToString()))
    return grpc.aio.AioRpcError(
        grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.aio.Metadata(), trailers, "slow down"
    )


async def test_a_rate_limited_call_waits_as_told_then_is_sent_again_without_reconnecting() -> None:
    seen: list[bool] = []
    # The policy's own pauses are 1 ms: only the server's 300 ms explains the wait.
    client = KishpaClient(
        "127.0.0.1:1", "127.0.0.1:1", on_reconnecting=seen.append,
        retry=RetryPolicy(budget_s=5, first_delay_s=0.001, max_delay_s=0.001),
    )  # fmt: skip
    answers: list[BaseException | str] = [_rate_limited(300), "answer"]

    async def method(request: object, **_: object) -> str:
        answer = answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return answer

    started = time.monotonic()
    assert await client._call(method, "request", authenticated=False) == "answer"
    assert time.monotonic() - started >= 0.3
    assert (seen, client.reconnects) == ([], 0)  # a rate limit is not an outage
