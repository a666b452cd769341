"""AuthService over a real server: guest login (public), refresh (needs the token)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import grpc
import pytest
from prometheus_client import CollectorRegistry

from kishpa.auth.v1 import auth_pb2, auth_pb2_grpc
from services.common.auth import Player, TokenAuthority, bearer_metadata
from services.common.auth_service import auth_registration
from services.common.errors import error_reason
from services.common.metrics import GrpcMetrics
from services.common.server import create_server
from services.common.settings import load_settings

pytestmark = pytest.mark.integration

TOKEN_KEY = "k" * 40


@pytest.fixture
async def stub() -> AsyncIterator[auth_pb2_grpc.AuthServiceStub]:
    settings = load_settings("probe", token_secret=TOKEN_KEY)
    authority = TokenAuthority(TOKEN_KEY, token_ttl_seconds=600)
    server = create_server(
        [auth_registration(authority)],
        settings,
        address="127.0.0.1:0",
        authority=authority,
        metrics=GrpcMetrics(CollectorRegistry()),
    )
    await server.start()
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{server.port}")
    try:
        yield auth_pb2_grpc.AuthServiceStub(channel)
    finally:
        await channel.close()
        await server.stop(None)


async def test_guest_login_needs_no_token_and_returns_a_valid_one(
    stub: auth_pb2_grpc.AuthServiceStub,
) -> None:
    reply = await stub.Login(auth_pb2.LoginRequest(display_name="  Dana  "))
    assert reply.display_name == "Dana"
    assert reply.player_id
    assert 590 <= reply.expire_time.seconds - time.time() <= 600
    assert TokenAuthority(TOKEN_KEY).verify(reply.token) == Player(reply.player_id, "Dana")
    other = await stub.Login(auth_pb2.LoginRequest(display_name="Dana"))
    assert other.player_id != reply.player_id


@pytest.mark.parametrize("name", ["", "   ", "x" * 33, "bad\u202ename", "new\nline"])
async def test_bad_display_name_is_invalid_argument(
    stub: auth_pb2_grpc.AuthServiceStub, name: str
) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await stub.Login(auth_pb2.LoginRequest(display_name=name))
    assert info.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert error_reason(info.value) == "INVALID_DISPLAY_NAME"


async def test_refresh_keeps_the_player(stub: auth_pb2_grpc.AuthServiceStub) -> None:
    login = await stub.Login(auth_pb2.LoginRequest(display_name="Avi"))
    fresh = await stub.RefreshToken(
        auth_pb2.RefreshTokenRequest(), metadata=bearer_metadata(login.token)
    )
    assert TokenAuthority(TOKEN_KEY).verify(fresh.token) == Player(login.player_id, "Avi")


async def test_refresh_without_token_is_unauthenticated(
    stub: auth_pb2_grpc.AuthServiceStub,
) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await stub.RefreshToken(auth_pb2.RefreshTokenRequest())
    assert info.value.code() is grpc.StatusCode.UNAUTHENTICATED


async def test_refresh_of_expired_token_is_unauthenticated(
    stub: auth_pb2_grpc.AuthServiceStub,
) -> None:
    old = TokenAuthority(TOKEN_KEY, clock=lambda: time.time() - 7200).issue_player_token("p", "A")
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await stub.RefreshToken(auth_pb2.RefreshTokenRequest(), metadata=bearer_metadata(old.token))
    assert info.value.code() is grpc.StatusCode.UNAUTHENTICATED
    assert error_reason(info.value) == "TOKEN_EXPIRED"
