"""Audited administration through real servers: the wallet (PostgreSQL and SQLite) hosting
AdminService, a real table service on Redis, and the real settlement function.

Every admin action must leave a wallet batch of its own reason and an audit entry naming it;
players and services are refused; a closed table's refunds give each player back exactly his
bowl contributions (computed independently by the rules from the round's phase record) and
the ledger still reconciles; the audit log refuses UPDATE and DELETE in the database itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import grpc
import pytest
import sqlalchemy as sa

from devkit.postgres import temporary_postgres_database
from kishpa.admin.v1 import admin_pb2, admin_pb2_grpc
from kishpa.common.v1 import common_pb2
from kishpa.table.v1 import table_pb2, table_pb2_grpc
from kishpa.wallet.v1 import wallet_pb2, wallet_pb2_grpc
from sdk import table_settings
from services.common.auth import ServiceCredentials, TokenAuthority, bearer_metadata
from services.common.errors import error_reason
from services.common.redis_client import sync_client
from services.common.settings import load_settings
from services.table.server import TableServer, create_table_server
from services.wallet.migrate import upgrade
from services.wallet.reconcile import reconcile_url
from services.wallet.server import WalletServer, create_wallet_server
from shared import keys
from shared.phase_record import PhaseRef, parse_phase_record
from tests.conftest import TEST_DATABASE_URL, TEST_REDIS_URL
from tests.reference_settlement import kishpa_phase
from workers.archive_write import archive_store
from workers.settlement import settle
from workers.wallet_client import WalletClient

pytestmark = pytest.mark.integration

SECRETS = {"token_secret": "t" * 40, "service_secret": "s" * 40}
REDIS_URL = os.environ.get("TEST_TABLE_REDIS_URL") or urlunsplit(
    urlsplit(TEST_REDIS_URL)._replace(path="/11")
)


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def wallet_db(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path_factory.mktemp('admin') / 'wallet.sqlite3'}"
        upgrade(url)
        yield url
        return
    with temporary_postgres_database(TEST_DATABASE_URL) as url:
        upgrade(url)
        yield url


class Stack:
    """A wallet and a table service that know each other, and everyone's credentials."""

    def __init__(self, wallet: WalletServer, table: TableServer, authority: TokenAuthority):
        self.wallet = wallet
        self.table = table
        self.authority = authority
        self.channels: list[grpc.aio.Channel] = []

    def channel(self, port: int) -> grpc.aio.Channel:
        ch = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
        self.channels.append(ch)
        return ch

    @property
    def admin(self) -> admin_pb2_grpc.AdminServiceAsyncStub:
        return admin_pb2_grpc.AdminServiceStub(self.channel(self.wallet.port))

    @property
    def wallets(self) -> wallet_pb2_grpc.WalletServiceAsyncStub:
        return wallet_pb2_grpc.WalletServiceStub(self.channel(self.wallet.port))

    @property
    def tables(self) -> table_pb2_grpc.TableServiceAsyncStub:
        return table_pb2_grpc.TableServiceStub(self.channel(self.table.port))

    def operator(self, name: str = "ops-ann") -> Any:
        return bearer_metadata(
            self.authority.issue_admin_token(name, name, roles=("support", "finance", "ops")).token
        )

    def player(self, player_id: str) -> Any:
        return bearer_metadata(self.authority.issue_player_token(player_id, player_id).token)

    def service(self, name: str = "worker") -> Any:
        return bearer_metadata(self.authority.issue_service_token(name).token)


@pytest.fixture
async def stack(wallet_db: str) -> AsyncIterator[Stack]:
    table_settings = load_settings(
        "table", redis_url=REDIS_URL, grpc_port=0, metrics_port=0, **SECRETS
    )
    table = create_table_server(table_settings, address="127.0.0.1:0", timers=False)
    await table.start()
    wallet_settings = load_settings(
        "wallet",
        database_url=wallet_db,
        table_addr=f"127.0.0.1:{table.port}",
        grpc_port=0,
        metrics_port=0,
        **SECRETS,
    )
    wallet = create_wallet_server(wallet_settings, address="127.0.0.1:0")
    await wallet.start()
    built = Stack(wallet, table, TokenAuthority.from_settings(wallet_settings))
    try:
        yield built
    finally:
        for ch in built.channels:
            await ch.close()
        await wallet.stop(1)
        await table.stop(0)


def ids(n: int) -> list[str]:
    suffix = uuid.uuid4().hex[:8]
    return [f"adm{i}-{suffix}" for i in range(n)]


async def refused(call: Any) -> tuple[grpc.StatusCode, str | None]:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call
    return caught.value.code(), error_reason(caught.value)


async def open_wallet(stack: Stack, player: str) -> None:
    await stack.wallets.OpenWallet(
        wallet_pb2.OpenWalletRequest(player_id=player), metadata=stack.service()
    )


async def balance(stack: Stack, account: str) -> int:
    reply = await stack.wallets.GetBalance(
        wallet_pb2.GetBalanceRequest(account=account), metadata=stack.service()
    )
    return int(reply.balance.tokens)


async def test_credit_and_debit_are_batches_with_audit_entries_and_players_are_refused(
    stack: Stack, wallet_db: str
) -> None:
    (player,) = ids(1)
    await open_wallet(stack, player)
    admin, ops = stack.admin, stack.operator()
    credit = await admin.CreditPlayer(
        admin_pb2.CreditPlayerRequest(
            player_id=player,
            amount=120,
            reason="lost tokens in outage",
            ticket="INC-7",
            request_id="credit-1",
        ),
        metadata=ops,
    )
    assert credit.balance == 2120
    debit = await admin.DebitPlayer(
        admin_pb2.DebitPlayerRequest(
            player_id=player,
            amount=20,
            reason="double credit",
            ticket="INC-7",
            request_id="debit-1",
        ),
        metadata=ops,
    )
    assert debit.balance == 2100
    # A replay answers the first entry and moves nothing.
    again = await admin.CreditPlayer(
        admin_pb2.CreditPlayerRequest(
            player_id=player,
            amount=120,
            reason="lost tokens in outage",
            ticket="INC-7",
            request_id="credit-1",
        ),
        metadata=ops,
    )
    assert again.entry.entry_id == credit.entry.entry_id
    assert again.balance == 2100

    # Each entry names its batch; each batch is one posting of the admin reason.
    transfers = await admin.ListPlayerTransfers(
        admin_pb2.ListPlayerTransfersRequest(player_id=player), metadata=ops
    )
    assert transfers.balance == 2100
    by_batch = {t.batch_id: t.posting for t in transfers.transfers}
    for entry, reason, source, target in (
        (credit.entry, wallet_pb2.TRANSFER_REASON_ADMIN_CREDIT, "bank", f"player:{player}"),
        (debit.entry, wallet_pb2.TRANSFER_REASON_ADMIN_DEBIT, f"player:{player}", "bank"),
    ):
        posting = by_batch[entry.batch_id]
        assert (posting.reason, posting.from_account, posting.to_account) == (
            reason,
            source,
            target,
        )
        assert posting.amount == entry.amount
        assert entry.admin_id == "ops-ann"
        assert entry.ticket == "INC-7"
    audit = await admin.ListAuditEntries(
        admin_pb2.ListAuditEntriesRequest(player_id=player), metadata=ops
    )
    assert [e.action for e in audit.entries] == [
        admin_pb2.ADMIN_ACTION_DEBIT,
        admin_pb2.ADMIN_ACTION_CREDIT,
    ]

    # Refusals change nothing and write nothing.
    too_much = admin.DebitPlayer(
        admin_pb2.DebitPlayerRequest(
            player_id=player, amount=5000, reason="r", ticket="T", request_id="debit-2"
        ),
        metadata=ops,
    )
    assert await refused(too_much) == (grpc.StatusCode.FAILED_PRECONDITION, "INSUFFICIENT_FUNDS")
    no_ticket = admin.CreditPlayer(
        admin_pb2.CreditPlayerRequest(player_id=player, amount=1, reason="r", request_id="c-3"),
        metadata=ops,
    )
    assert await refused(no_ticket) == (grpc.StatusCode.INVALID_ARGUMENT, "MISSING_TICKET")
    for md in (stack.player(player), stack.service()):
        for call in (
            admin.CreditPlayer(
                admin_pb2.CreditPlayerRequest(
                    player_id=player, amount=1, reason="r", ticket="T", request_id="c-4"
                ),
                metadata=md,
            ),
            admin.DebitPlayer(
                admin_pb2.DebitPlayerRequest(
                    player_id=player, amount=1, reason="r", ticket="T", request_id="d-4"
                ),
                metadata=md,
            ),
            admin.CloseTable(
                admin_pb2.CloseTableRequest(
                    table_id="t-x", reason="r", ticket="T", request_id="x-4"
                ),
                metadata=md,
            ),
            admin.ListPlayerTables(
                admin_pb2.ListPlayerTablesRequest(player_id=player), metadata=md
            ),
            admin.ListPlayerTransfers(
                admin_pb2.ListPlayerTransfersRequest(player_id=player), metadata=md
            ),
            admin.ListAuditEntries(admin_pb2.ListAuditEntriesRequest(), metadata=md),
        ):
            assert await refused(call) == (grpc.StatusCode.PERMISSION_DENIED, "ADMIN_REQUIRED")
    # A service cannot post the admin reasons through ApplyBatch either.
    sneaky = stack.wallets.ApplyBatch(
        wallet_pb2.ApplyBatchRequest(
            request_id="sneaky-" + player,
            postings=[
                wallet_pb2.Posting(
                    from_account="bank",
                    to_account=f"player:{player}",
                    amount=5,
                    reason=wallet_pb2.TRANSFER_REASON_ADMIN_CREDIT,
                )
            ],
        ),
        metadata=stack.service(),
    )
    assert (await refused(sneaky))[0] == grpc.StatusCode.INVALID_ARGUMENT
    assert await balance(stack, f"player:{player}") == 2100
    audit = await admin.ListAuditEntries(
        admin_pb2.ListAuditEntriesRequest(player_id=player), metadata=ops
    )
    assert len(audit.entries) == 2
    assert reconcile_url(wallet_db).ok

    # The log is append-only in the database itself.
    engine = sa.create_engine(wallet_db)
    try:
        for statement in ("UPDATE admin_audit SET amount = 0", "DELETE FROM admin_audit"):
            with pytest.raises(sa.exc.DBAPIError), engine.begin() as conn:
                conn.execute(sa.text(statement))
    finally:
        engine.dispose()


async def test_closing_a_stuck_table_refunds_the_bowl_to_who_paid_it_and_reconciles(
    stack: Stack, wallet_db: str, tmp_path: Path
) -> None:
    players = ids(3)
    tables = stack.tables
    created = await tables.CreateTable(
        table_pb2.CreateTableRequest(
            settings=table_settings(
                common_pb2.GAME_KISHPA, 3, turn_seconds=600, reveal_window_seconds=600
            ),
            request_id=uuid.uuid4().hex,
        ),
        metadata=stack.player(players[0]),
    )
    table_id = created.table.table_id
    sync = sync_client(REDIS_URL)  # one node, or the cluster under --redis-cluster
    wallet = WalletClient(
        f"127.0.0.1:{stack.wallet.port}", ServiceCredentials(stack.authority, "worker")
    )
    try:
        for p in players[1:]:
            await tables.JoinTable(
                table_pb2.JoinTableRequest(table_id=table_id, request_id=uuid.uuid4().hex),
                metadata=stack.player(p),
            )
        view = (
            await tables.StartGame(
                table_pb2.StartGameRequest(table_id=table_id, request_id=uuid.uuid4().hex),
                metadata=stack.player(players[0]),
            )
        ).table
        if view.round.phase == table_pb2.ROUND_PHASE_START_REVEAL:  # nobody holds a joker
            for p in players:
                # Not eligible, or the window already closed: refused, and that is fine.
                with contextlib.suppress(grpc.aio.AioRpcError):
                    await tables.DeclineReveal(
                        table_pb2.DeclineRevealRequest(
                            table_id=table_id, request_id=uuid.uuid4().hex
                        ),
                        metadata=stack.player(p),
                    )
        # Round 1's start phase is recorded; the real settlement function settles it.
        ref = PhaseRef(table_id, 1, "start")
        raw = sync.hget(keys.outbox(table_id), ref.field)
        assert raw is not None
        record = parse_phase_record(raw)
        # The settlement writes its round archive (a file of the test's own).
        archive = archive_store(f"sqlite:///{tmp_path / 'archive.sqlite3'}")
        outcome = await asyncio.to_thread(
            settle, sync, wallet, ref, now_ms=lambda: int(time.time() * 1000), archive=archive
        )
        assert outcome.outcome == "settled"
        # Who paid the bowl, from the rules by the tests' reference (no code shared with the
        # game or the wallet's refund code): each player's bowl contribution.
        contributions = kishpa_phase("start", record.record).by_reason["bowl_contribution"]
        paid = {p: -m for p, m in contributions.items() if p != "bowl"}
        assert sorted(paid) == sorted(players)
        assert sum(paid.values()) == contributions["bowl"] > 0
        bowl = f"bowl:{table_id}"
        assert await balance(stack, bowl) == sum(paid.values())
        before = {p: await balance(stack, f"player:{p}") for p in players}

        # A watcher will see the close.
        watch = tables.WatchTable(
            table_pb2.WatchTableRequest(table_id=table_id, after_event_id=view.last_event_id),
            metadata=stack.player(players[1]),
        )
        ops = stack.operator("ops-ben")
        request = admin_pb2.CloseTableRequest(
            table_id=table_id, reason="stuck after outage", ticket="INC-9", request_id="close-1"
        )
        closed = await stack.admin.CloseTable(request, metadata=ops)
        refunds = {r.player_id: r.amount for r in closed.refunds}
        assert refunds == paid
        assert {r.from_account for r in closed.refunds} == {bowl}
        assert await balance(stack, bowl) == 0
        for p in players:
            assert await balance(stack, f"player:{p}") == before[p] + paid.get(p, 0)
        actions = [e.action for e in closed.entries]
        assert actions == [admin_pb2.ADMIN_ACTION_CLOSE_TABLE, admin_pb2.ADMIN_ACTION_REFUND]
        refund_entry = closed.entries[1]
        assert refund_entry.amount == sum(paid.values())
        assert refund_entry.batch_id > 0
        assert json.loads(refund_entry.details_json)["refunds"]
        transfers = await stack.admin.ListPlayerTransfers(
            admin_pb2.ListPlayerTransfersRequest(player_id=players[0], table_id=table_id),
            metadata=ops,
        )
        refund_postings = [
            t
            for t in transfers.transfers
            if t.posting.reason == wallet_pb2.TRANSFER_REASON_ADMIN_REFUND
        ]
        assert [t.batch_id for t in refund_postings] == [refund_entry.batch_id]
        assert reconcile_url(wallet_db).ok

        # The table is closed for everyone, with the reason.
        got = await tables.GetTable(
            table_pb2.GetTableRequest(table_id=table_id), metadata=stack.player(players[0])
        )
        assert got.table.status == table_pb2.TABLE_STATUS_CLOSED
        async for message in watch:
            if message.event.WhichOneof("event") == "table_closed":
                closing = message.event.table_closed
                assert closing.by_operator
                assert closing.reason == "stuck after outage"
                assert closing.closed_by == "ops-ben"
                break
        watch.cancel()

        # Again (a retry, or another operator): same answer, nothing moves twice.
        again = await stack.admin.CloseTable(request, metadata=ops)
        assert [e.entry_id for e in again.entries] == [e.entry_id for e in closed.entries]
        other = await stack.admin.CloseTable(
            admin_pb2.CloseTableRequest(
                table_id=table_id, reason="again", ticket="INC-9", request_id="close-2"
            ),
            metadata=ops,
        )
        assert {r.player_id: r.amount for r in other.refunds} == paid  # the same single batch
        assert other.entries[1].batch_id == refund_entry.batch_id
        assert await balance(stack, bowl) == 0
        for p in players:
            assert await balance(stack, f"player:{p}") == before[p] + paid.get(p, 0)
        listed = await stack.admin.ListPlayerTables(
            admin_pb2.ListPlayerTablesRequest(player_id=players[2]), metadata=ops
        )
        assert [t.table_id for t in listed.tables] == [table_id]
        audit = await stack.admin.ListAuditEntries(
            admin_pb2.ListAuditEntriesRequest(table_id=table_id), metadata=ops
        )
        assert len(audit.entries) == 4  # close + refund, twice (close-1 replayed nothing)
        assert reconcile_url(wallet_db).ok
    finally:
        wallet.close()
        sync.delete(
            *(
                k(table_id)
                for k in (keys.state, keys.events, keys.requests, keys.outbox, keys.settled)
            ),
            keys.balances(table_id),
        )
        sync.zrem(keys.unsettled(table_id), table_id)
        sync.close()


async def test_the_admin_command_line(stack: Stack) -> None:
    (player,) = ids(1)
    await open_wallet(stack, player)
    env = {
        **os.environ,
        "KISHPA_WALLET_ADDR": f"127.0.0.1:{stack.wallet.port}",
        "KISHPA_SERVICE_SECRET": SECRETS["service_secret"],
    }
    base = [sys.executable, "-m", "cli.main", "admin", "--as", "ops-cli"]

    async def run(*argv: str) -> tuple[int, str]:
        proc = await asyncio.create_subprocess_exec(
            *base, *argv, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
        )
        out, _ = await asyncio.wait_for(proc.communicate(), timeout=60)
        return int(proc.returncode or 0), out.decode()

    code, out = await run(
        "credit", "--player", player, "--amount", "7", "--reason", "goodwill", "--ticket", "T-1"
    )
    assert code == 0, out
    assert f"balance of {player}: 2007" in out
    code, out = await run("--json", "audit", "--player", player)
    assert code == 0, out
    entries = json.loads(out)["entries"]
    assert [(e["admin_id"], e["action"], e["amount"]) for e in entries] == [
        ("ops-cli", "ADMIN_ACTION_CREDIT", "7")
    ]
    code, out = await run("transfers", "--player", player)
    assert code == 0, out
    assert "admin_credit" in out
    code, out = await run(
        "debit", "--player", player, "--amount", "99999", "--reason", "x", "--ticket", "T-2"
    )
    assert code == 1, out
    assert "INSUFFICIENT_FUNDS" in out
