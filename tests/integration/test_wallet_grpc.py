"""The wallet through its real gRPC server on loopback, on real PostgreSQL and real SQLite.

Each module run gets its own PostgreSQL database (created and dropped here) and its own
SQLite file; every test uses fresh player and table ids, so tests never see each other.
"""

from __future__ import annotations

import asyncio
import random
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import grpc
import pytest
from prometheus_client import REGISTRY

from devkit.postgres import temporary_postgres_database
from kishpa.wallet.v1 import wallet_pb2, wallet_pb2_grpc
from services.common.auth import TokenAuthority, bearer_metadata
from services.common.errors import error_reason
from services.common.settings import Settings, load_settings
from services.wallet.accounts import BANK
from services.wallet.batch import Posting, plan_batch
from services.wallet.migrate import upgrade
from services.wallet.reconcile import reconcile_url
from services.wallet.server import WalletServer, create_wallet_server
from tests.conftest import TEST_DATABASE_URL

pytestmark = pytest.mark.integration

SECRETS = {"token_secret": "t" * 40, "service_secret": "s" * 40}


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def wallet_db(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """A migrated, empty ledger database of each kind."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path_factory.mktemp('wallet') / 'nested' / 'wallet.sqlite3'}"
        upgrade(url)
        yield url
        return
    with temporary_postgres_database(TEST_DATABASE_URL) as url:
        upgrade(url)
        yield url


@pytest.fixture
def settings(wallet_db: str) -> Settings:
    return load_settings("wallet", database_url=wallet_db, **SECRETS)


@pytest.fixture
async def server(settings: Settings) -> AsyncIterator[WalletServer]:
    srv = create_wallet_server(settings, address="127.0.0.1:0")
    await srv.start()
    try:
        yield srv
    finally:
        await srv.stop(1)


@pytest.fixture
async def stub(server: WalletServer) -> AsyncIterator[wallet_pb2_grpc.WalletServiceStub]:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
        yield wallet_pb2_grpc.WalletServiceStub(channel)


@pytest.fixture
def authority(settings: Settings) -> TokenAuthority:
    return TokenAuthority.from_settings(settings)


@pytest.fixture
def svc(authority: TokenAuthority) -> tuple[tuple[str, str], ...]:
    return bearer_metadata(authority.issue_service_token("worker").token)


def uid(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:12]}"


def player_md(authority: TokenAuthority, player_id: str) -> tuple[tuple[str, str], ...]:
    return bearer_metadata(authority.issue_player_token(player_id, player_id).token)


def wire_reason(reason: str) -> Any:
    """The wire enum of a ledger reason; an unknown text becomes a number no value has."""
    try:
        return wallet_pb2.TransferReason.Value("TRANSFER_REASON_" + reason.upper())
    except ValueError:
        return 999


def text(reason: Any) -> str:
    """A wire reason as the ledger's text."""
    return wallet_pb2.TransferReason.Name(reason).removeprefix("TRANSFER_REASON_").lower()


def pb(
    src: str, dst: str, amount: int, reason: str, table: str = "", rnd: int = 0, phase: str = ""
) -> wallet_pb2.Posting:
    return wallet_pb2.Posting(
        from_account=src,
        to_account=dst,
        amount=amount,
        reason=wire_reason(reason),
        table_id=table,
        round=rnd,
        phase=phase,
    )


async def open_players(
    stub: wallet_pb2_grpc.WalletServiceStub, svc: tuple[tuple[str, str], ...], n: int
) -> list[str]:
    ids = [uid("p") for _ in range(n)]
    for p in ids:
        await stub.OpenWallet(wallet_pb2.OpenWalletRequest(player_id=p), metadata=svc)
    return ids


async def balance(
    stub: wallet_pb2_grpc.WalletServiceStub, svc: tuple[tuple[str, str], ...], account: str
) -> int:
    reply = await stub.GetBalance(wallet_pb2.GetBalanceRequest(account=account), metadata=svc)
    return reply.balance.tokens


async def expect_error(call: object, code: grpc.StatusCode, reason: str | None = None) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await call  # type: ignore[misc]
    assert info.value.code() == code, info.value.details()
    if reason is not None:
        assert error_reason(info.value) == reason


async def test_open_wallet_grants_2000_once_and_shows_ils(
    stub: wallet_pb2_grpc.WalletServiceStub, authority: TokenAuthority
) -> None:
    player = uid("p")
    md = player_md(authority, player)
    first = await stub.OpenWallet(wallet_pb2.OpenWalletRequest(), metadata=md)
    again = await stub.OpenWallet(wallet_pb2.OpenWalletRequest(player_id=player), metadata=md)
    assert (first.created, first.balance.tokens, first.balance.ils) == (True, 2000, 4000)
    assert (again.created, again.balance.tokens) == (False, 2000)
    got = await stub.GetBalance(wallet_pb2.GetBalanceRequest(), metadata=md)
    assert got.balance.account == f"player:{player}"
    history = await stub.ListTransfers(wallet_pb2.ListTransfersRequest(), metadata=md)
    assert [(text(t.posting.reason), t.posting.amount) for t in history.transfers] == [
        ("opening_grant", 2000)
    ]
    assert history.transfers[0].create_time.seconds > 1_700_000_000, "a real commit time"


async def test_load_tokens_is_idempotent_per_request_id(
    stub: wallet_pb2_grpc.WalletServiceStub, authority: TokenAuthority
) -> None:
    md = player_md(authority, uid("p"))
    await stub.OpenWallet(wallet_pb2.OpenWalletRequest(), metadata=md)
    a = await stub.LoadTokens(wallet_pb2.LoadTokensRequest(request_id="r1"), metadata=md)
    b = await stub.LoadTokens(wallet_pb2.LoadTokensRequest(request_id="r1"), metadata=md)
    c = await stub.LoadTokens(wallet_pb2.LoadTokensRequest(request_id="r2"), metadata=md)
    assert (a.loaded, a.balance.tokens) == (50, 2050)
    assert (b.batch_id, b.balance.tokens) == (a.batch_id, 2050)
    assert c.balance.tokens == 2100
    for bad in ("", "x" * 65):
        await expect_error(
            stub.LoadTokens(wallet_pb2.LoadTokensRequest(request_id=bad), metadata=md),
            grpc.StatusCode.INVALID_ARGUMENT,
        )
    # The longest player id with the longest request id still fits the key column.
    longest = "L" + uid("p").ljust(99, "x")
    md_long = player_md(authority, longest)
    await stub.OpenWallet(wallet_pb2.OpenWalletRequest(), metadata=md_long)
    reply = await stub.LoadTokens(
        wallet_pb2.LoadTokensRequest(request_id="r" * 64), metadata=md_long
    )
    assert reply.balance.tokens == 2050


async def test_batch_covers_player_shortfall_with_bank_loads_and_replays(
    stub: wallet_pb2_grpc.WalletServiceStub, svc: tuple[tuple[str, str], ...]
) -> None:
    a, b = await open_players(stub, svc, 2)
    table = uid("t")
    request = wallet_pb2.ApplyBatchRequest(
        request_id=f"kishpa:{table}:1:end",
        postings=[
            pb(f"player:{a}", f"bowl:{table}", 1, "bowl_contribution", table, 1, "end"),
            pb(f"player:{a}", f"player:{b}", 2100, "win", table, 1, "end"),
        ],
    )
    first = await stub.ApplyBatch(request, metadata=svc)
    loads = [p for p in first.applied if p.reason == wallet_pb2.TRANSFER_REASON_BANK_LOAD]
    # 1999 left after the bowl, 2100 owed: 101 short -> three 50-token loads.
    assert [(p.from_account, p.to_account, p.amount) for p in loads] == [
        (BANK, f"player:{a}", 50)
    ] * 3
    after = {x.account: x.tokens for x in first.balances}
    assert after[f"player:{a}"] == 49
    assert after[f"player:{b}"] == 4100
    assert after[f"bowl:{table}"] == 1
    assert REGISTRY.get_sample_value("kishpa_wallet_bank_loads_total") is not None
    loads_before = REGISTRY.get_sample_value("kishpa_wallet_bank_loads_total") or 0
    again = await stub.ApplyBatch(request, metadata=svc)
    # A replay records no new loads.
    assert REGISTRY.get_sample_value("kishpa_wallet_bank_loads_total") == loads_before
    assert again.replayed
    assert not first.replayed
    assert again.batch_id == first.batch_id
    assert list(again.applied) == list(first.applied)
    assert list(again.balances) == list(first.balances)
    assert await balance(stub, svc, f"player:{a}") == 49
    changed = wallet_pb2.ApplyBatchRequest(
        request_id=request.request_id, postings=request.postings[:1]
    )
    await expect_error(
        stub.ApplyBatch(changed, metadata=svc),
        grpc.StatusCode.ALREADY_EXISTS,
        "IDEMPOTENCY_KEY_REUSED",
    )
    assert await balance(stub, svc, f"player:{a}") == 49


async def test_concurrent_replays_apply_once(
    stub: wallet_pb2_grpc.WalletServiceStub, svc: tuple[tuple[str, str], ...]
) -> None:
    a, b = await open_players(stub, svc, 2)
    request = wallet_pb2.ApplyBatchRequest(
        request_id=uid("k"), postings=[pb(f"player:{a}", f"player:{b}", 7, "win")]
    )
    replies = await asyncio.gather(*(stub.ApplyBatch(request, metadata=svc) for _ in range(12)))
    assert len({r.batch_id for r in replies}) == 1
    assert sum(not r.replayed for r in replies) == 1
    assert await balance(stub, svc, f"player:{a}") == 1993
    assert await balance(stub, svc, f"player:{b}") == 2007


async def test_concurrent_batches_with_one_key_and_different_bodies_apply_one(
    stub: wallet_pb2_grpc.WalletServiceStub, svc: tuple[tuple[str, str], ...]
) -> None:
    a, b = await open_players(stub, svc, 2)
    key = uid("k")
    requests = [
        wallet_pb2.ApplyBatchRequest(
            request_id=key, postings=[pb(f"player:{a}", f"player:{b}", amount, "win")]
        )
        for amount in range(1, 9)
    ]
    outcomes = await asyncio.gather(
        *(stub.ApplyBatch(r, metadata=svc) for r in requests), return_exceptions=True
    )
    applied = [o for o in outcomes if isinstance(o, wallet_pb2.ApplyBatchResponse)]
    refused = [o for o in outcomes if isinstance(o, grpc.aio.AioRpcError)]
    assert len(applied) == 1
    assert len(refused) == 7
    assert {error_reason(e) for e in refused} == {"IDEMPOTENCY_KEY_REUSED"}
    moved = applied[0].applied[0].amount
    assert await balance(stub, svc, f"player:{b}") == 2000 + moved


async def test_bowl_shortfall_is_refused_and_changes_nothing(
    stub: wallet_pb2_grpc.WalletServiceStub, svc: tuple[tuple[str, str], ...]
) -> None:
    (a,) = await open_players(stub, svc, 1)
    table = uid("t")
    request = wallet_pb2.ApplyBatchRequest(
        request_id=uid("k"),
        postings=[
            pb(f"player:{a}", f"bowl:{table}", 2, "bowl_contribution", table, 1, "start"),
            pb(f"bowl:{table}", f"player:{a}", 3, "bowl_win", table, 1, "start"),
        ],
    )
    await expect_error(
        stub.ApplyBatch(request, metadata=svc),
        grpc.StatusCode.FAILED_PRECONDITION,
        "INSUFFICIENT_FUNDS",
    )
    assert await balance(stub, svc, f"player:{a}") == 2000
    assert await balance(stub, svc, f"bowl:{table}") == 0
    # The key was not consumed by the refusal: a corrected batch under it applies.
    fixed = wallet_pb2.ApplyBatchRequest(
        request_id=request.request_id, postings=request.postings[:1]
    )
    assert not (await stub.ApplyBatch(fixed, metadata=svc)).replayed


BAD_BATCHES = [
    ("missing key", "", [("player:A", "player:B", 1, "win")], grpc.StatusCode.INVALID_ARGUMENT),
    ("empty", "K", [], grpc.StatusCode.INVALID_ARGUMENT),
    ("zero", "K", [("player:A", "player:B", 0, "win")], grpc.StatusCode.INVALID_ARGUMENT),
    ("negative", "K", [("player:A", "player:B", -5, "win")], grpc.StatusCode.INVALID_ARGUMENT),
    ("overflow", "K", [("player:A", "player:B", 2**62, "win")], grpc.StatusCode.INVALID_ARGUMENT),
    ("same account", "K", [("player:A", "player:A", 1, "win")], grpc.StatusCode.INVALID_ARGUMENT),
    (
        "unknown account kind",
        "K",
        [("casino:x", "player:B", 1, "win")],
        grpc.StatusCode.INVALID_ARGUMENT,
    ),
    (
        "unknown reason",
        "K",
        [("player:A", "player:B", 1, "gift")],
        grpc.StatusCode.INVALID_ARGUMENT,
    ),
    (
        "unspecified reason",
        "K",
        [("player:A", "player:B", 1, "unspecified")],
        grpc.StatusCode.INVALID_ARGUMENT,
    ),
    (
        "reserved key",
        "wallet:open:A",
        [("player:A", "player:B", 1, "win")],
        grpc.StatusCode.INVALID_ARGUMENT,
    ),
    (
        "too many",
        "K",
        [("player:A", "player:B", 1, "win")] * 1001,
        grpc.StatusCode.INVALID_ARGUMENT,
    ),
    ("unopened player", "K", [("player:A", "player:NOBODY", 1, "win")], grpc.StatusCode.NOT_FOUND),
    # A valid posting first: the refusal of the second must undo nothing-yet-applied.
    (
        "late bad posting",
        "K",
        [("player:A", "player:B", 1, "win"), ("player:B", "player:NOBODY", 1, "win")],
        grpc.StatusCode.NOT_FOUND,
    ),
]


@pytest.mark.parametrize(
    ("name", "key", "rows", "code"), BAD_BATCHES, ids=[b[0] for b in BAD_BATCHES]
)
async def test_bad_batches_are_refused_and_change_nothing(
    stub: wallet_pb2_grpc.WalletServiceStub,
    svc: tuple[tuple[str, str], ...],
    name: str,
    key: str,
    rows: list[tuple[str, str, int, str]],
    code: grpc.StatusCode,
) -> None:
    a, b = await open_players(stub, svc, 2)
    names = {"A": a, "B": b, "NOBODY": uid("ghost")}
    key = key.replace("A", a) if key.startswith("wallet:") else (key and uid(key))
    postings = []
    for src, dst, amount, reason in rows:
        for short, real in names.items():
            src, dst = src.replace(f":{short}", f":{real}"), dst.replace(f":{short}", f":{real}")
        postings.append(pb(src, dst, amount, reason))
    before = await stub.ListTransfers(wallet_pb2.ListTransfersRequest(page_size=500), metadata=svc)
    await expect_error(
        stub.ApplyBatch(
            wallet_pb2.ApplyBatchRequest(request_id=key, postings=postings), metadata=svc
        ),
        code,
    )
    after = await stub.ListTransfers(wallet_pb2.ListTransfersRequest(page_size=500), metadata=svc)
    assert list(after.transfers) == list(before.transfers)
    assert (await balance(stub, svc, f"player:{a}"), await balance(stub, svc, f"player:{b}")) == (
        2000,
        2000,
    )


async def test_credentials_are_enforced(
    stub: wallet_pb2_grpc.WalletServiceStub,
    authority: TokenAuthority,
    svc: tuple[tuple[str, str], ...],
) -> None:
    a, b = await open_players(stub, svc, 2)
    md_a = player_md(authority, a)
    batch = wallet_pb2.ApplyBatchRequest(
        request_id=uid("k"), postings=[pb(f"player:{b}", f"player:{a}", 500, "win")]
    )
    await expect_error(stub.ApplyBatch(batch), grpc.StatusCode.UNAUTHENTICATED)
    await expect_error(stub.ApplyBatch(batch, metadata=md_a), grpc.StatusCode.PERMISSION_DENIED)
    forged = TokenAuthority("x" * 40, "y" * 40).issue_service_token("worker").token
    await expect_error(
        stub.ApplyBatch(batch, metadata=bearer_metadata(forged)), grpc.StatusCode.UNAUTHENTICATED
    )
    await expect_error(
        stub.GetBalance(wallet_pb2.GetBalanceRequest(account=f"player:{b}"), metadata=md_a),
        grpc.StatusCode.PERMISSION_DENIED,
    )
    await expect_error(
        stub.OpenWallet(wallet_pb2.OpenWalletRequest(player_id=uid("p")), metadata=md_a),
        grpc.StatusCode.PERMISSION_DENIED,
    )
    await expect_error(
        stub.ListTransfers(wallet_pb2.ListTransfersRequest(account=f"player:{b}"), metadata=md_a),
        grpc.StatusCode.PERMISSION_DENIED,
    )
    await expect_error(
        stub.LoadTokens(wallet_pb2.LoadTokensRequest(request_id="r"), metadata=svc),
        grpc.StatusCode.PERMISSION_DENIED,
    )
    await expect_error(
        stub.GetBalance(
            wallet_pb2.GetBalanceRequest(account=f"player:{uid('ghost')}"), metadata=svc
        ),
        grpc.StatusCode.NOT_FOUND,
    )
    assert (await balance(stub, svc, f"player:{a}"), await balance(stub, svc, f"player:{b}")) == (
        2000,
        2000,
    )


async def test_list_transfers_filters_and_pages(
    stub: wallet_pb2_grpc.WalletServiceStub, svc: tuple[tuple[str, str], ...]
) -> None:
    a, b = await open_players(stub, svc, 2)
    table = uid("t")
    for rnd in (1, 2, 3):
        await stub.ApplyBatch(
            wallet_pb2.ApplyBatchRequest(
                request_id=f"kishpa:{table}:{rnd}:end",
                postings=[
                    pb(f"player:{a}", f"bowl:{table}", 1, "bowl_contribution", table, rnd, "end"),
                    pb(f"player:{b}", f"player:{a}", 2, "win", table, rnd, "end"),
                ],
            ),
            metadata=svc,
        )
    seen: list[int] = []
    token = ""
    while True:
        page = await stub.ListTransfers(
            wallet_pb2.ListTransfersRequest(table_id=table, page_size=4, page_token=token),
            metadata=svc,
        )
        seen.extend(t.transfer_id for t in page.transfers)
        token = page.next_page_token
        if not token:
            break
    assert len(seen) == 6
    assert seen == sorted(seen, reverse=True)
    by_round = await stub.ListTransfers(
        wallet_pb2.ListTransfersRequest(table_id=table, round=2), metadata=svc
    )
    assert {t.posting.round for t in by_round.transfers} == {2}
    assert len(by_round.transfers) == 2
    wins = await stub.ListTransfers(
        wallet_pb2.ListTransfersRequest(
            account=f"player:{b}", reason=wallet_pb2.TRANSFER_REASON_WIN
        ),
        metadata=svc,
    )
    assert len(wins.transfers) == 3
    await expect_error(
        stub.ListTransfers(wallet_pb2.ListTransfersRequest(page_token="garbage!"), metadata=svc),
        grpc.StatusCode.INVALID_ARGUMENT,
    )


async def test_32_concurrent_clients_match_a_serial_replay(
    server: WalletServer, svc: tuple[tuple[str, str], ...], wallet_db: str
) -> None:
    address = f"127.0.0.1:{server.port}"
    async with grpc.aio.insecure_channel(address) as channel:
        players = await open_players(wallet_pb2_grpc.WalletServiceStub(channel), svc, 6)
    tables = [uid("t") for _ in range(2)]
    accounts = [f"player:{p}" for p in players] + [f"bowl:{t}" for t in tables]
    acked: list[tuple[int, list[Posting], wallet_pb2.ApplyBatchResponse]] = []
    refused: list[str] = []

    async def client(n: int) -> None:
        rng = random.Random(n)
        async with grpc.aio.insecure_channel(address) as channel:
            stub = wallet_pb2_grpc.WalletServiceStub(channel)
            for i in range(6):
                postings = []
                for _ in range(rng.randint(1, 4)):
                    src, dst = rng.sample(accounts, 2)
                    reason = "bowl_win" if src.startswith("bowl:") else "win"
                    postings.append(Posting(src, dst, rng.randint(1, 900), reason))
                request = wallet_pb2.ApplyBatchRequest(
                    request_id=f"c{n}-{i}-{players[0]}",
                    postings=[
                        pb(p.from_account, p.to_account, p.amount, p.reason) for p in postings
                    ],
                )
                try:
                    reply = await stub.ApplyBatch(request, metadata=svc)
                except grpc.aio.AioRpcError as exc:
                    refused.append(error_reason(exc) or exc.details() or "")
                    continue
                acked.append((reply.batch_id, postings, reply))

    await asyncio.gather(*(client(n) for n in range(32)))
    # Only a bowl may refuse to pay; players are loaded from the bank instead.
    assert set(refused) <= {"INSUFFICIENT_FUNDS"}
    assert len(acked) > 32
    # Batches on overlapping accounts commit in batch-id order: replay them serially.
    expected = {a: (2000 if a.startswith("player:") else 0) for a in accounts}
    for _, postings, reply in sorted(acked, key=lambda x: x[0]):
        plan = plan_batch(postings, {a: expected[a] for a in expected})
        assert [(p.from_account, p.to_account, p.amount, p.reason) for p in plan.applied] == [
            (p.from_account, p.to_account, p.amount, text(p.reason)) for p in reply.applied
        ]
        expected = {a: plan.balances[a] for a in expected}
        for b in reply.balances:
            if b.account != BANK:
                assert b.tokens == expected[b.account]
    async with grpc.aio.insecure_channel(address) as channel:
        stub = wallet_pb2_grpc.WalletServiceStub(channel)
        actual = {a: await balance(stub, svc, a) for a in accounts}
    assert actual == expected
    report = await asyncio.to_thread(reconcile_url, wallet_db)
    assert report.ok, report.discrepancies


async def test_apply_batches_answers_each_batch_and_a_refusal_spares_the_others(
    stub: wallet_pb2_grpc.WalletServiceStub,
    authority: TokenAuthority,
    svc: tuple[tuple[str, str], ...],
) -> None:
    a, b = await open_players(stub, svc, 2)
    table = uid("t")
    good = wallet_pb2.ApplyBatchRequest(
        request_id=uid("m"), postings=[pb(f"player:{a}", f"player:{b}", 30, "win", table, 1)]
    )
    short = wallet_pb2.ApplyBatchRequest(  # a never-used bowl holds nothing
        request_id=uid("m"), postings=[pb(f"bowl:{table}", f"player:{a}", 5, "bowl_win", table)]
    )
    admin = wallet_pb2.ApplyBatchRequest(
        request_id=uid("m"), postings=[pb(f"player:{a}", f"player:{b}", 1, "admin_debit")]
    )
    later = wallet_pb2.ApplyBatchRequest(
        request_id=uid("m"), postings=[pb(f"player:{b}", f"player:{a}", 5, "win", table, 2)]
    )
    request = wallet_pb2.ApplyBatchesRequest(batches=[good, short, admin, later])
    reply = await stub.ApplyBatches(request, metadata=svc)
    first, refused, forbidden, last = reply.outcomes
    assert {x.account: x.tokens for x in first.result.balances} == {
        f"player:{a}": 1970,
        f"player:{b}": 2030,
    }
    assert not first.HasField("refusal")
    assert not refused.HasField("result")
    assert refused.refusal.code == grpc.StatusCode.FAILED_PRECONDITION.value[0]
    assert refused.refusal.reason == "INSUFFICIENT_FUNDS"
    assert forbidden.refusal.code == grpc.StatusCode.INVALID_ARGUMENT.value[0]
    assert forbidden.refusal.reason == "ADMIN_REASON"
    assert {x.account: x.tokens for x in last.result.balances} == {
        f"player:{a}": 1975,
        f"player:{b}": 2025,
    }
    # The whole call again: the applied ones replay, the refused ones are refused again.
    again = await stub.ApplyBatches(request, metadata=svc)
    assert again.outcomes[0].result.replayed
    assert again.outcomes[0].result.batch_id == first.result.batch_id
    assert again.outcomes[1].refusal.reason == "INSUFFICIENT_FUNDS"
    assert again.outcomes[3].result.replayed
    # ApplyBatch sees the same ledger: a batch applied through ApplyBatches replays there.
    assert (await stub.ApplyBatch(later, metadata=svc)).replayed
    assert await balance(stub, svc, f"player:{a}") == 1975


async def test_apply_batches_needs_a_service_and_one_to_256_batches(
    stub: wallet_pb2_grpc.WalletServiceStub,
    authority: TokenAuthority,
    svc: tuple[tuple[str, str], ...],
) -> None:
    a, b = await open_players(stub, svc, 2)
    one = wallet_pb2.ApplyBatchRequest(
        request_id=uid("n"), postings=[pb(f"player:{a}", f"player:{b}", 1, "win")]
    )
    await expect_error(
        stub.ApplyBatches(
            wallet_pb2.ApplyBatchesRequest(batches=[one]), metadata=player_md(authority, a)
        ),
        grpc.StatusCode.PERMISSION_DENIED,
    )
    await expect_error(
        stub.ApplyBatches(wallet_pb2.ApplyBatchesRequest(), metadata=svc),
        grpc.StatusCode.INVALID_ARGUMENT,
        "INVALID_BATCH_COUNT",
    )
    await expect_error(
        stub.ApplyBatches(wallet_pb2.ApplyBatchesRequest(batches=[one] * 257), metadata=svc),
        grpc.StatusCode.INVALID_ARGUMENT,
        "INVALID_BATCH_COUNT",
    )
    assert await balance(stub, svc, f"player:{a}") == 2000  # nothing applied
