"""The workers' wallet client sends the batches of concurrent callers together (one
ApplyBatches call) and answers each caller as ApplyBatch would have, refusals included; an
older wallet without ApplyBatches gets one ApplyBatch a batch. Real wallet servers on
loopback, PostgreSQL and SQLite."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import grpc
import pytest

from devkit.postgres import temporary_postgres_database
from games.ledger import Posting
from kishpa.wallet.v1 import wallet_pb2, wallet_pb2_grpc
from services.common.auth import ServiceCredentials, TokenAuthority
from services.common.errors import error_reason
from services.common.settings import load_settings
from services.wallet.migrate import upgrade
from services.wallet.server import WalletServer, create_wallet_server
from tests.conftest import TEST_DATABASE_URL
from workers.settlement import PERMANENT_GRPC_CODES
from workers.wallet_client import WalletClient, _Waiting

pytestmark = pytest.mark.integration

SECRETS = {"token_secret": "t" * 40, "service_secret": "s" * 40}


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def wallet_db(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path_factory.mktemp('wc') / 'wallet.sqlite3'}"
        upgrade(url)
        yield url
        return
    with temporary_postgres_database(TEST_DATABASE_URL) as url:
        upgrade(url)
        yield url


@pytest.fixture
async def wallet(wallet_db: str) -> AsyncIterator[tuple[WalletServer, WalletClient]]:
    settings = load_settings("wallet", database_url=wallet_db, **SECRETS)
    server = create_wallet_server(settings, address="127.0.0.1:0")
    await server.start()
    authority = TokenAuthority.from_settings(settings)
    client = WalletClient(f"127.0.0.1:{server.port}", ServiceCredentials(authority, "worker"))
    try:
        yield server, client
    finally:
        client.close()
        await server.stop(1)


def _players(client: WalletClient, n: int) -> list[str]:
    ids = [f"wc{uuid.uuid4().hex[:10]}" for _ in range(n)]
    client.open_wallets(ids)
    return [f"player:{p}" for p in ids]


def _request(key: str, *postings: Posting) -> wallet_pb2.ApplyBatchRequest:
    return wallet_pb2.ApplyBatchRequest(
        request_id=key,
        postings=[
            wallet_pb2.Posting(
                from_account=p.from_account,
                to_account=p.to_account,
                amount=p.amount,
                reason=wallet_pb2.TransferReason.Value("TRANSFER_REASON_" + p.reason.upper()),
            )
            for p in postings
        ],
    )


async def test_one_call_for_a_group_answers_each_batch_and_raises_each_refusal(
    wallet: tuple[WalletServer, WalletClient],
) -> None:
    _, client = wallet
    a, b = await asyncio.to_thread(_players, client, 2)
    table = uuid.uuid4().hex[:10]
    group = [
        _Waiting(_request(f"g1:{table}", Posting(a, b, 10, "win"))),
        _Waiting(_request(f"g2:{table}", Posting(f"bowl:{table}", a, 5, "bowl_win"))),
        _Waiting(_request(f"g3:{table}", Posting(b, a, 4, "win"))),
    ]
    await asyncio.to_thread(client._send, group)
    first, refused, last = group
    assert first.response is not None
    assert {x.account: x.tokens for x in first.response.balances} == {a: 1990, b: 2010}
    assert last.response is not None
    assert {x.account: x.tokens for x in last.response.balances} == {a: 1994, b: 2006}
    # The refusal is the error ApplyBatch would have raised: the settlement task's checks
    # (a grpc.Call, a permanent code, the ErrorInfo reason) see it the same way.
    error = refused.error
    assert isinstance(error, grpc.RpcError)
    assert isinstance(error, grpc.Call)
    assert error.code() is grpc.StatusCode.FAILED_PRECONDITION
    assert error.code() in PERMANENT_GRPC_CODES
    assert error_reason(error) == "INSUFFICIENT_FUNDS"
    assert all(w.done.is_set() for w in group)
    assert await asyncio.to_thread(client.balance, a) == 1994


async def test_concurrent_callers_each_get_their_own_answer(
    wallet: tuple[WalletServer, WalletClient],
) -> None:
    _, client = wallet
    players = await asyncio.to_thread(_players, client, 4)
    table = uuid.uuid4().hex[:10]

    def pay(i: int) -> Any:
        j = i % 30  # callers 30-35 repeat keys 0-5 with the same postings
        src, dst = players[j % 4], players[(j + 1) % 4]
        try:
            return client.apply_batch(f"c:{table}:{j}", [Posting(src, dst, 1, "win")])
        except grpc.RpcError as exc:
            return exc

    def short() -> Any:
        try:
            return client.apply_batch(
                f"s:{table}", [Posting(f"bowl:{table}", players[0], 1, "bowl_win")]
            )
        except grpc.RpcError as exc:
            return exc

    # 36 callers at once: keys 0-5 are sent twice (same postings), plus one refusal.
    results = await asyncio.gather(
        *(asyncio.to_thread(pay, i) for i in range(36)), asyncio.to_thread(short)
    )
    *paid, refused = results
    assert isinstance(refused, grpc.RpcError)
    assert error_reason(refused) == "INSUFFICIENT_FUNDS"
    assert [r for r in paid if isinstance(r, BaseException)] == []
    assert len({r.batch_id for r in paid}) == 30
    assert sum(not r.replayed for r in paid) == 30
    # Key j (0..29) moves 1 from seat j % 4 to seat (j + 1) % 4: seats 0..3 pay 8, 8, 7, 7
    # and receive 7, 8, 8, 7.
    balances = [await asyncio.to_thread(client.balance, p) for p in players]
    assert balances == [1999, 2000, 2001, 2000]


class OldWallet(wallet_pb2_grpc.WalletServiceServicer):
    """A wallet from before ApplyBatches: it answers ApplyBatch only (and counts calls)."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    async def ApplyBatch(self, request: Any, context: Any) -> Any:
        self.calls.append(request.request_id)
        return wallet_pb2.ApplyBatchResponse(batch_id=len(self.calls))


async def test_an_older_wallet_gets_one_apply_batch_a_batch() -> None:
    old = OldWallet()
    server = grpc.aio.server()
    wallet_pb2_grpc.add_WalletServiceServicer_to_server(old, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    authority = TokenAuthority("t" * 40, "s" * 40)
    client = WalletClient(f"127.0.0.1:{port}", ServiceCredentials(authority, "worker"))
    try:
        group = [
            _Waiting(_request(f"o{i}", Posting("bank", "player:x", 1, "win"))) for i in range(3)
        ]
        await asyncio.to_thread(client._send, group)
        assert [w.response.batch_id for w in group if w.response] == [1, 2, 3]
        assert old.calls == ["o0", "o1", "o2"]
        # It remembers: the next group goes one by one straight away.
        again = [
            _Waiting(_request(f"p{i}", Posting("bank", "player:x", 1, "win"))) for i in range(2)
        ]
        await asyncio.to_thread(client._send, again)
        assert old.calls[3:] == ["p0", "p1"]
    finally:
        client.close()
        await server.stop(0)
