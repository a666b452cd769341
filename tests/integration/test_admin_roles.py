"""Operator roles, two-person approval and one request-id rule, on a real wallet server
(PostgreSQL and SQLite): balances and the audit log are read back through the RPCs and
checked against amounts written here."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Iterator

import grpc
import pytest

from devkit.postgres import temporary_postgres_database
from kishpa.admin.v1 import admin_pb2, admin_pb2_grpc
from kishpa.wallet.v1 import wallet_pb2, wallet_pb2_grpc
from services.common.auth import TokenAuthority, bearer_metadata
from services.common.errors import error_reason
from services.common.settings import load_settings
from services.wallet.migrate import upgrade
from services.wallet.server import create_wallet_server
from tests.conftest import TEST_DATABASE_URL

pytestmark = pytest.mark.integration

SECRETS = {"token_secret": "t" * 40, "service_secret": "s" * 40}
THRESHOLD = 500
START = 2000  # a new wallet's starting tokens (docs/wallet.md)


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def wallet_db(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path_factory.mktemp('roles') / 'wallet.sqlite3'}"
        upgrade(url)
        yield url
        return
    with temporary_postgres_database(TEST_DATABASE_URL) as url:
        upgrade(url)
        yield url


class Ops:
    def __init__(self, channel: grpc.aio.Channel, authority: TokenAuthority) -> None:
        self.admin = admin_pb2_grpc.AdminServiceStub(channel)
        self.wallet = wallet_pb2_grpc.WalletServiceStub(channel)
        self.authority = authority

    def as_(self, operator: str, *roles: str) -> object:
        return bearer_metadata(self.authority.issue_admin_token(operator, roles=roles).token)

    async def new_player(self) -> str:
        player = f"p{uuid.uuid4().hex[:12]}"
        md = bearer_metadata(self.authority.issue_service_token("worker").token)
        await self.wallet.OpenWallet(wallet_pb2.OpenWalletRequest(player_id=player), metadata=md)
        return player

    async def balance(self, player: str) -> int:
        reply = await self.admin.ListPlayerTransfers(
            admin_pb2.ListPlayerTransfersRequest(player_id=player),
            metadata=self.as_("reader", "support"),
        )
        return int(reply.balance)

    async def audit(self, **filters: str) -> list[admin_pb2.AuditEntry]:
        reply = await self.admin.ListAuditEntries(
            admin_pb2.ListAuditEntriesRequest(page_size=100, **filters),
            metadata=self.as_("reader", "support"),
        )
        return list(reply.entries)


@pytest.fixture
async def ops(wallet_db: str) -> AsyncIterator[Ops]:
    settings = load_settings(
        "wallet",
        database_url=wallet_db,
        grpc_port=0,
        metrics_port=0,
        admin_approval_threshold=THRESHOLD,
        **SECRETS,  # type: ignore[arg-type]
    )
    server = create_wallet_server(settings, address="127.0.0.1:0")
    await server.start()
    async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
        yield Ops(channel, TokenAuthority.from_settings(settings))
    await server.stop(1)


async def refused(call: object) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await call  # type: ignore[misc]
    return info.value.code(), error_reason(info.value)


def credit(player: str, amount: int, rid: str) -> admin_pb2.CreditPlayerRequest:
    return admin_pb2.CreditPlayerRequest(
        player_id=player, amount=amount, reason="goodwill", ticket="T-9", request_id=rid
    )


async def test_roles_decide_and_every_refusal_is_audited(ops: Ops) -> None:
    player = await ops.new_player()
    denied = grpc.StatusCode.PERMISSION_DENIED
    for operator, role in (("sue", "support"), ("otto", "ops")):
        call = ops.admin.CreditPlayer(
            credit(player, 5, f"r-{operator}"), metadata=ops.as_(operator, role)
        )
        assert await refused(call) == (denied, "ROLE_REQUIRED")
    close = admin_pb2.CloseTableRequest(table_id="t1", reason="x", ticket="T", request_id="c")
    call = ops.admin.CloseTable(close, metadata=ops.as_("fin", "finance"))
    assert await refused(call) == (denied, "ROLE_REQUIRED")
    reply = await ops.admin.CreditPlayer(
        credit(player, 5, "ok-1"), metadata=ops.as_("fin", "finance")
    )
    assert reply.balance == START + 5
    assert await ops.balance(player) == START + 5
    refusals = [e for e in await ops.audit() if e.action == admin_pb2.ADMIN_ACTION_REFUSED]
    seen = {
        (e.admin_id, json.loads(e.details_json)["rpc"], json.loads(e.details_json)["reason"])
        for e in refusals
    }
    assert {
        ("sue", "CreditPlayer", "ROLE_REQUIRED"),
        ("otto", "CreditPlayer", "ROLE_REQUIRED"),
        ("fin", "CloseTable", "ROLE_REQUIRED"),
    } <= seen


async def test_a_large_credit_waits_for_a_second_operator(ops: Ops) -> None:
    player = await ops.new_player()
    rid = uuid.uuid4().hex
    asked = await ops.admin.CreditPlayer(
        credit(player, THRESHOLD + 1, rid), metadata=ops.as_("ann", "finance")
    )
    assert asked.pending_approval
    assert asked.entry.action == admin_pb2.ADMIN_ACTION_REQUESTED
    assert await ops.balance(player) == START  # nothing moved
    # Asked again (a retry): still waiting, still nothing moved.
    again = await ops.admin.CreditPlayer(
        credit(player, THRESHOLD + 1, rid), metadata=ops.as_("ann", "finance")
    )
    assert again.pending_approval
    assert again.entry.entry_id == asked.entry.entry_id
    approve = admin_pb2.ApproveAdjustmentRequest(request_id=rid, reason="checked", ticket="T-10")
    call = ops.admin.ApproveAdjustment(approve, metadata=ops.as_("ann", "finance"))
    assert await refused(call) == (grpc.StatusCode.PERMISSION_DENIED, "SAME_OPERATOR")
    call = ops.admin.ApproveAdjustment(approve, metadata=ops.as_("bob", "support"))
    assert await refused(call) == (grpc.StatusCode.PERMISSION_DENIED, "ROLE_REQUIRED")
    assert await ops.balance(player) == START
    done = await ops.admin.ApproveAdjustment(approve, metadata=ops.as_("bob", "finance"))
    assert done.balance == START + THRESHOLD + 1
    assert done.entry.action == admin_pb2.ADMIN_ACTION_CREDIT
    # Approved twice (a retry): the first answer, tokens moved once.
    twice = await ops.admin.ApproveAdjustment(approve, metadata=ops.as_("bob", "finance"))
    assert twice.entry.entry_id == done.entry.entry_id
    assert await ops.balance(player) == START + THRESHOLD + 1
    entries = await ops.audit(player_id=player)
    kinds = [(e.admin_id, admin_pb2.AdminAction.Name(e.action)) for e in reversed(entries)]
    assert kinds == [
        ("ann", "ADMIN_ACTION_REQUESTED"),
        ("ann", "ADMIN_ACTION_CREDIT"),
        ("bob", "ADMIN_ACTION_APPROVED"),
    ]
    assert json.loads(entries[1].details_json)["approved_by"] == "bob"
    refusals = [
        json.loads(e.details_json)
        for e in await ops.audit()
        if e.action == admin_pb2.ADMIN_ACTION_REFUSED
    ]
    assert {"SAME_OPERATOR", "ROLE_REQUIRED"} <= {r["reason"] for r in refusals}


async def test_a_request_id_is_one_request_across_admin_rpcs(ops: Ops) -> None:
    player = await ops.new_player()
    finance = ops.as_("fay", "finance", "ops")
    rid = uuid.uuid4().hex
    await ops.admin.CreditPlayer(credit(player, 7, rid), metadata=finance)
    conflict = (grpc.StatusCode.ALREADY_EXISTS, "IDEMPOTENCY_KEY_REUSED")
    debit = admin_pb2.DebitPlayerRequest(
        player_id=player, amount=7, reason="oops", ticket="T-9", request_id=rid
    )
    assert await refused(ops.admin.DebitPlayer(debit, metadata=finance)) == conflict
    other_body = credit(player, 8, rid)
    assert await refused(ops.admin.CreditPlayer(other_body, metadata=finance)) == conflict
    close = admin_pb2.CloseTableRequest(table_id="t9", reason="x", ticket="T", request_id=rid)
    assert await refused(ops.admin.CloseTable(close, metadata=finance)) == conflict
    assert await ops.balance(player) == START + 7  # the debit moved nothing
    same = await ops.admin.CreditPlayer(credit(player, 7, rid), metadata=finance)
    assert same.balance == START + 7  # the same request again: its first answer
