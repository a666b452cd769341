"""Abuse limits against real servers and Redis: guest logins per address and per device,
the starting grant once per device, per-player rates per RPC family, concurrent streams.
Every refusal is RESOURCE_EXHAUSTED with retry information and changes nothing."""

from __future__ import annotations

import asyncio
import hashlib
import uuid
from typing import Any

import grpc
import pytest
from google.protobuf.duration_pb2 import Duration
from google.rpc import error_details_pb2, status_pb2

from kishpa.auth.v1 import auth_pb2
from kishpa.common.v1 import common_pb2
from kishpa.table.v1 import table_pb2
from kishpa.wallet.v1 import wallet_pb2
from services.common.auth import bearer_metadata
from services.common.errors import STATUS_DETAILS_KEY, error_info, error_reason
from shared import keys as table_keys
from tests.integration.edge.conftest import LogCapture, Stack

pytestmark = pytest.mark.integration

KISHPA = common_pb2.GAME_KISHPA


def retry_delay_ms(error: grpc.aio.AioRpcError) -> int:
    """The RetryInfo delay a refusal carries (and ErrorInfo's retry_after_ms agrees)."""
    for key, value in error.trailing_metadata() or ():
        if key == STATUS_DETAILS_KEY:
            status = status_pb2.Status.FromString(value)  # type: ignore[arg-type]
            for detail in status.details:
                retry = error_details_pb2.RetryInfo()
                if detail.Unpack(retry):
                    info = error_info(error)
                    assert info is not None
                    delay = retry.retry_delay.ToMilliseconds()
                    assert info.metadata["retry_after_ms"] == str(delay)
                    return delay
    raise AssertionError("no RetryInfo")


async def login(stack: Stack, device: str = "") -> auth_pb2.LoginResponse:
    response: auth_pb2.LoginResponse = await stack.auth_stub.Login(
        auth_pb2.LoginRequest(display_name="Guest", device_id=device), timeout=10
    )
    return response


async def balance(stack: Stack, login_response: auth_pb2.LoginResponse) -> int:
    reply = await stack.wallet_stub.GetBalance(
        wallet_pb2.GetBalanceRequest(), metadata=bearer_metadata(login_response.token)
    )
    return int(reply.balance.tokens)


@pytest.mark.parametrize(
    "stack",
    [{"limit_logins_per_address": "3/minute", "limit_exempt_loopback": False}],
    indirect=True,
)
async def test_guest_logins_are_limited_per_client_address(stack: Stack, logs: LogCapture) -> None:
    for n in range(3):
        await login(stack, f"dev-{n}-{uuid.uuid4().hex}")
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await login(stack, "another-" + uuid.uuid4().hex)
    assert info.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
    assert error_reason(info.value) == "RATE_LIMITED"
    assert 0 < retry_delay_ms(info.value) <= 60_000
    assert logs.tracebacks() == []


@pytest.mark.parametrize("stack", [{"limit_logins_per_device": "2/hour"}], indirect=True)
async def test_guest_logins_are_limited_per_device(stack: Stack, logs: LogCapture) -> None:
    device = "phone-" + uuid.uuid4().hex
    await login(stack, device)
    await login(stack, device)
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await login(stack, device)
    assert info.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
    assert error_reason(info.value) == "RATE_LIMITED"
    retry_delay_ms(info.value)
    await login(stack, "other-" + uuid.uuid4().hex)  # another device is not affected
    assert logs.tracebacks() == []


async def test_the_starting_grant_is_given_once_per_device(stack: Stack) -> None:
    device = "tablet-" + uuid.uuid4().hex
    first = await login(stack, device)
    assert await balance(stack, first) == 2000
    second = await login(stack, device)  # a new guest on the same device
    assert second.player_id != first.player_id
    assert await balance(stack, second) == 0
    # Opening that wallet again (as settlement does) never grants it later.
    opened = await stack.wallet_stub.OpenWallet(
        wallet_pb2.OpenWalletRequest(player_id=second.player_id), metadata=stack.service()
    )
    assert (opened.balance.tokens, opened.created) == (0, False)
    other = await login(stack, "tablet-" + uuid.uuid4().hex)
    assert await balance(stack, other) == 2000
    # A player cannot ask for a grant-less wallet (only the login's service may).
    _, md = stack.player()
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await stack.wallet_stub.OpenWallet(
            wallet_pb2.OpenWalletRequest(without_starting_grant=True), metadata=md
        )
    assert info.value.code() is grpc.StatusCode.PERMISSION_DENIED


@pytest.mark.parametrize(
    "stack",
    [{"limit_player_writes": "3/minute", "limit_player_reads": "100/minute"}],
    indirect=True,
)
async def test_player_writes_are_limited_per_family_and_a_refusal_creates_nothing(
    stack: Stack, logs: LogCapture
) -> None:
    player_id, md = stack.player()
    settings = table_pb2.TableSettings(game=KISHPA, seats=2, turn_time=Duration(seconds=600))
    views = []
    for n in range(3):
        reply = await stack.table_stub.CreateTable(
            table_pb2.CreateTableRequest(settings=settings, request_id=f"w{n}"), metadata=md
        )
        stack.tables.add(reply.table.table_id)
        views.append(reply.table)
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await stack.table_stub.CreateTable(
            table_pb2.CreateTableRequest(settings=settings, request_id="w3"), metadata=md
        )
    assert info.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
    assert error_reason(info.value) == "RATE_LIMITED"
    assert retry_delay_ms(info.value) > 0
    # Nothing was written for the refused request: the table it would have made is absent.
    digest = hashlib.sha256(f"kishpa/table\0{player_id}\0w3".encode()).digest()
    assert not await stack.redis.exists(table_keys.state("t" + digest[:12].hex()))
    # Reads are another family, and another player has his own budget.
    await stack.table_stub.GetTable(
        table_pb2.GetTableRequest(table_id=views[0].table_id), metadata=md
    )
    _, other = stack.player()
    reply = await stack.table_stub.CreateTable(
        table_pb2.CreateTableRequest(settings=settings, request_id="w0"), metadata=other
    )
    stack.tables.add(reply.table.table_id)
    assert logs.tracebacks() == []


@pytest.mark.parametrize("stack", [{"limit_streams_per_player": 2}], indirect=True)
async def test_concurrent_streams_are_limited_per_player(stack: Stack, logs: LogCapture) -> None:
    _, md = stack.player()
    view = (
        await stack.table_stub.CreateTable(
            table_pb2.CreateTableRequest(
                settings=table_pb2.TableSettings(game=KISHPA, seats=2), request_id="s"
            ),
            metadata=md,
        )
    ).table
    stack.tables.add(view.table_id)

    def watch() -> Any:
        return stack.table_stub.WatchTable(
            table_pb2.WatchTableRequest(table_id=view.table_id), metadata=md
        )

    open_streams = [watch(), watch()]
    for call in open_streams:
        await call.read()  # each stream is open and delivering
    third = watch()
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await asyncio.wait_for(third.read(), 10)
    assert info.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
    assert error_reason(info.value) == "TOO_MANY_STREAMS"
    open_streams[0].cancel()
    # The slot is given back when a stream ends: a new one opens (within a deadline).
    async with asyncio.timeout(10):
        while True:
            again = watch()
            try:
                await again.read()
                break
            except grpc.aio.AioRpcError as exc:
                if error_reason(exc) != "TOO_MANY_STREAMS":
                    raise
                await asyncio.sleep(0.05)
    again.cancel()
    open_streams[1].cancel()
    assert logs.tracebacks() == []
