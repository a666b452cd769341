"""The starting grant once per device when the wallet's answer to Login gets lost.

Between the matchmaking service and the real wallet (SQLite) sits a real gRPC server that
forwards every wallet call and, while told to, *loses the answer*: the wallet acted, the
caller gets UNAVAILABLE. The ledger, read directly, says how many opening grants the
device's players got; the expected count (one) is the rule, not the code's answer.

A second lossy server sits between the client (the SDK) and the matchmaking service and
loses a Login's own answer: the login happened, the SDK retries it with the same
``request_id``, and must end up with the player (and the grant) the first call made.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest
import sqlalchemy as sa

from kishpa.auth.v1 import auth_pb2, auth_pb2_grpc
from kishpa.wallet.v1 import wallet_pb2_grpc
from sdk.client import KishpaClient
from sdk.retry import RetryPolicy
from services.common.settings import load_settings
from services.matchmaking.server import MatchmakingServer, create_matchmaking_server
from services.wallet.migrate import upgrade
from services.wallet.server import create_wallet_server
from tests.conftest import TEST_REDIS_URL

pytestmark = pytest.mark.integration

SECRETS = {"token_secret": "t" * 40, "service_secret": "s" * 40}
STARTING_GRANT = 2000  # docs/wallet.md: a new wallet starts with 2,000 tokens


class LossyWallet(wallet_pb2_grpc.WalletServiceServicer):
    """Forwards OpenWallet/GetBalance to the real wallet; loses ``lose`` answers of
    OpenWallet after the wallet acted."""

    def __init__(self, channel: grpc.aio.Channel) -> None:
        self._real = wallet_pb2_grpc.WalletServiceStub(channel)
        self.lose = 0
        self.forwarded = 0
        self.down = False

    @staticmethod
    def _md(context: Any) -> Any:
        return [(k, v) for k, v in context.invocation_metadata() if k == "authorization"]

    async def OpenWallet(self, request: Any, context: Any) -> Any:
        if self.down:  # the wallet never sees the request
            await context.abort(grpc.StatusCode.UNAVAILABLE, "wallet down")
        reply = await self._real.OpenWallet(request, metadata=self._md(context), timeout=10)
        self.forwarded += 1
        if self.lose > 0:
            self.lose -= 1
            await context.abort(grpc.StatusCode.UNAVAILABLE, "connection reset (answer lost)")
        return reply

    async def GetBalance(self, request: Any, context: Any) -> Any:
        try:
            return await self._real.GetBalance(request, metadata=self._md(context), timeout=10)
        except grpc.aio.AioRpcError as exc:
            await context.abort(exc.code(), exc.details() or "")


@pytest.fixture
async def setup(tmp_path: Path) -> AsyncIterator[tuple[MatchmakingServer, LossyWallet, str]]:
    url = f"sqlite:///{tmp_path / 'wallet.sqlite3'}"
    upgrade(url)
    base = {"grpc_port": 0, "metrics_port": 0, "redis_url": TEST_REDIS_URL, **SECRETS}
    wallet = create_wallet_server(
        load_settings("wallet", **base, database_url=url), address="127.0.0.1:0"
    )
    await wallet.start()
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{wallet.port}")
    lossy = LossyWallet(channel)
    proxy = grpc.aio.server()
    wallet_pb2_grpc.add_WalletServiceServicer_to_server(lossy, proxy)
    proxy_port = proxy.add_insecure_port("127.0.0.1:0")
    await proxy.start()
    mm = create_matchmaking_server(
        load_settings(
            "matchmaking",
            **base,
            wallet_addr=f"127.0.0.1:{proxy_port}",
            limits_key_prefix=f"kishpa:test-grant:{uuid.uuid4().hex[:10]}",
        ),
        address="127.0.0.1:0",
        key_prefix=f"i26-grant-{uuid.uuid4().hex[:8]}",
        sweeper=False,
    )
    await mm.start()
    try:
        yield mm, lossy, url
    finally:
        await mm.stop(0)
        await proxy.stop(0)
        await channel.close()
        await wallet.stop(0)


def grants(url: str) -> dict[str, int]:
    """Opening grants per account, read from the ledger's postings (a fresh ledger)."""
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        rows = conn.execute(
            sa.text(
                "SELECT to_account, SUM(amount) FROM postings WHERE reason = 'opening_grant' "
                "GROUP BY to_account"
            )
        ).all()
    engine.dispose()
    return {account: int(total) for account, total in rows}


async def login(mm: MatchmakingServer, device: str) -> tuple[str, str]:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{mm.port}") as ch:
        try:
            reply = await auth_pb2_grpc.AuthServiceStub(ch).Login(
                auth_pb2.LoginRequest(display_name="Guest", device_id=device), timeout=20
            )
        except grpc.aio.AioRpcError as exc:
            return "", exc.code().name
    return reply.player_id, "OK"


async def test_a_lost_answer_is_asked_again_and_the_grant_is_given_once(
    setup: tuple[MatchmakingServer, LossyWallet, str],
) -> None:
    mm, lossy, url = setup
    device = uuid.uuid4().hex
    lossy.lose = 1  # the wallet grants, the answer is lost once
    first, outcome = await login(mm, device)
    assert outcome == "OK"
    second, outcome = await login(mm, device)
    assert outcome == "OK"
    assert grants(url) == {f"player:{first}": STARTING_GRANT}
    assert second != first


async def test_answers_lost_until_login_fails_never_grant_twice(
    setup: tuple[MatchmakingServer, LossyWallet, str],
) -> None:
    mm, lossy, url = setup
    device = uuid.uuid4().hex
    lossy.lose = 2  # the first answer and the retry's: the login fails
    failed, outcome = await login(mm, device)
    assert (failed, outcome) == ("", "UNAVAILABLE")
    assert lossy.forwarded == 2  # the wallet acted (the grant was given) all the same
    second, outcome = await login(mm, device)
    assert outcome == "OK"
    granted = grants(url)
    # The device's grant went to the player whose answer was lost, never to a second one.
    assert list(granted.values()) == [STARTING_GRANT]
    assert f"player:{second}" not in granted


async def test_a_login_that_failed_before_the_wallet_acted_leaves_the_grant(
    setup: tuple[MatchmakingServer, LossyWallet, str],
) -> None:
    mm, lossy, url = setup
    device = uuid.uuid4().hex
    lossy.down = True
    _, outcome = await login(mm, device)
    assert outcome == "UNAVAILABLE"
    lossy.down = False
    player, outcome = await login(mm, device)
    assert outcome == "OK"
    assert grants(url) == {f"player:{player}": STARTING_GRANT}


class LossyLogin(auth_pb2_grpc.AuthServiceServicer):
    """Forwards Login to the real matchmaking service; loses ``lose`` answers after the
    service answered (the client sees UNAVAILABLE, as when a connection drops)."""

    def __init__(self, channel: grpc.aio.Channel) -> None:
        self._real = auth_pb2_grpc.AuthServiceStub(channel)
        self.lose = 0
        self.answered: list[auth_pb2.LoginResponse] = []
        self.request_ids: list[str] = []

    async def Login(self, request: Any, context: Any) -> Any:
        self.request_ids.append(request.request_id)
        try:
            reply = await self._real.Login(request, timeout=20)
        except grpc.aio.AioRpcError as exc:
            await context.abort(exc.code(), exc.details() or "")
        self.answered.append(reply)
        if self.lose > 0:
            self.lose -= 1
            await context.abort(grpc.StatusCode.UNAVAILABLE, "connection reset (answer lost)")
        return reply


@pytest.fixture
async def lossy_login(
    setup: tuple[MatchmakingServer, LossyWallet, str],
) -> AsyncIterator[tuple[LossyLogin, str]]:
    mm, _, _ = setup
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{mm.port}")
    lossy = LossyLogin(channel)
    proxy = grpc.aio.server()
    auth_pb2_grpc.add_AuthServiceServicer_to_server(lossy, proxy)
    port = proxy.add_insecure_port("127.0.0.1:0")
    await proxy.start()
    try:
        yield lossy, f"127.0.0.1:{port}"
    finally:
        await proxy.stop(0)
        await channel.close()


def ledger(url: str) -> tuple[list[str], int]:
    """The player accounts the wallet holds, and the sum of every account's balance."""
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        players = conn.execute(
            sa.text("SELECT id FROM accounts WHERE id LIKE 'player:%' ORDER BY id")
        ).scalars()
        total = conn.execute(sa.text("SELECT COALESCE(SUM(balance), 0) FROM accounts")).scalar()
        found = list(players)
    engine.dispose()
    return found, int(total or 0)


FAST_RETRY = RetryPolicy(budget_s=10.0, first_delay_s=0.05, max_delay_s=0.2)


async def test_a_login_whose_answer_is_lost_is_retried_into_the_same_player(
    setup: tuple[MatchmakingServer, LossyWallet, str],
    lossy_login: tuple[LossyLogin, str],
) -> None:
    _, _, url = setup
    lossy, addr = lossy_login
    lossy.lose = 1  # the service minted the guest and opened his wallet; the answer is lost
    async with KishpaClient(addr, addr, retry=FAST_RETRY, tls_from_env=False) as client:
        session = await client.login("Guest")
    assert len(lossy.request_ids) == 2
    assert lossy.request_ids[0] == lossy.request_ids[1] != ""  # one id for the attempt
    first_minted = lossy.answered[0].player_id
    assert session.player_id == first_minted
    assert grants(url) == {f"player:{first_minted}": STARTING_GRANT}
    players, total = ledger(url)
    assert players == [f"player:{first_minted}"]
    assert total == 0


async def test_a_login_request_id_is_checked_and_kept_to_one_request(
    setup: tuple[MatchmakingServer, LossyWallet, str],
) -> None:
    mm, _, url = setup
    async with grpc.aio.insecure_channel(f"127.0.0.1:{mm.port}") as ch:
        stub = auth_pb2_grpc.AuthServiceStub(ch)
        for bad in ("has space", "x" * 65, "caf\u00e9"):
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await stub.Login(
                    auth_pb2.LoginRequest(display_name="Guest", request_id=bad), timeout=10
                )
            assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert "request_id" in (refused.value.details() or "")
        assert ledger(url) == ([], 0)  # refused: nothing minted, no wallet opened
        device, rid = uuid.uuid4().hex, uuid.uuid4().hex
        first = await stub.Login(
            auth_pb2.LoginRequest(display_name="Ann", device_id=device, request_id=rid),
            timeout=10,
        )
        again = await stub.Login(
            auth_pb2.LoginRequest(display_name="Ann", device_id=device, request_id=rid),
            timeout=10,
        )
        assert again.player_id == first.player_id
        with pytest.raises(grpc.aio.AioRpcError) as reused:
            await stub.Login(
                auth_pb2.LoginRequest(display_name="Bob", device_id=device, request_id=rid),
                timeout=10,
            )
        assert reused.value.code() == grpc.StatusCode.ALREADY_EXISTS
        other_device = await stub.Login(
            auth_pb2.LoginRequest(display_name="Ann", device_id="d2", request_id=rid),
            timeout=10,
        )
        assert other_device.player_id != first.player_id  # ids are scoped per device
    assert grants(url) == {
        f"player:{first.player_id}": STARTING_GRANT,
        f"player:{other_device.player_id}": STARTING_GRANT,
    }
