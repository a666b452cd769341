"""The starting grant once per device when the wallet's answer to Login gets lost.

Between the matchmaking service and the real wallet (SQLite) sits a real gRPC server that
forwards every wallet call and, while told to, *loses the answer*: the wallet acted, the
caller gets UNAVAILABLE. The ledger, read directly, says how many opening grants the
device's players got; the expected count (one) is the rule, not the code's answer.
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
