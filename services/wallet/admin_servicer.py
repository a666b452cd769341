"""kishpa.admin.v1 AdminService on the wallet: proto -> :mod:`services.wallet.admin` -> proto.

Only an :class:`~services.common.auth.Admin` caller gets past :func:`require_admin`. Closing
a table asks the table service (its ``CloseTable`` RPC, with the wallet's service
credential), then refunds from the ledger; both steps are written to the audit log.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import grpc
from google.protobuf.timestamp_pb2 import Timestamp

from kishpa.admin.v1 import admin_pb2, admin_pb2_grpc
from kishpa.table.v1 import table_pb2, table_pb2_grpc
from services.common.auth import (
    Admin,
    Caller,
    ServiceCredentials,
    TokenAuthority,
    current_caller,
    require_admin,
)
from services.common.errors import (
    Category,
    DomainError,
    FailedPrecondition,
    InvalidArgument,
    PermissionDenied,
    category_of,
)
from services.common.server import ServiceRegistration
from services.common.tls import ClientTls, reloading_aio_channel
from services.wallet.accounts import player_account
from services.wallet.admin import (
    APPROVED,
    CLOSE_TABLE,
    CREDIT,
    DEBIT,
    REFUND,
    REFUSED,
    REQUESTED,
    Administration,
    AuditEntry,
    Justification,
)
from services.wallet.ledger import TransferFilter
from services.wallet.servicer import _transfer_pb

T = TypeVar("T")
Context = grpc.aio.ServicerContext[Any, Any]
SERVICE_NAME = admin_pb2.DESCRIPTOR.services_by_name["AdminService"].full_name
CALLER_NAME = "wallet"
TABLE_CALL_TIMEOUT_S = 15.0
METHOD_PREFIX = f"/{SERVICE_NAME}/"
ACTIONS = {
    REQUESTED: admin_pb2.ADMIN_ACTION_REQUESTED,
    APPROVED: admin_pb2.ADMIN_ACTION_APPROVED,
    REFUSED: admin_pb2.ADMIN_ACTION_REFUSED,
    CREDIT: admin_pb2.ADMIN_ACTION_CREDIT,
    DEBIT: admin_pb2.ADMIN_ACTION_DEBIT,
    CLOSE_TABLE: admin_pb2.ADMIN_ACTION_CLOSE_TABLE,
    REFUND: admin_pb2.ADMIN_ACTION_REFUND,
}


def _stamp(ms: int) -> Timestamp:
    stamp = Timestamp()
    stamp.FromMilliseconds(ms)
    return stamp


def entry_pb(e: AuditEntry) -> admin_pb2.AuditEntry:
    """An audit entry on the wire."""
    return admin_pb2.AuditEntry(
        entry_id=e.entry_id,
        create_time=_stamp(e.created_ms),
        admin_id=e.admin_id,
        action=ACTIONS.get(e.action, admin_pb2.ADMIN_ACTION_UNSPECIFIED),
        player_id=e.player_id,
        table_id=e.table_id,
        amount=e.amount,
        reason=e.reason,
        ticket=e.ticket,
        request_id=e.request_id,
        batch_id=e.batch_id,
        details_json=json.dumps(e.details, sort_keys=True),
    )


def _why(reason: str, ticket: str, request_id: str) -> Justification:
    return Justification(require_admin().admin_id, reason, ticket, request_id)


class AdminServicer(admin_pb2_grpc.AdminServiceServicer):
    """The audited operator RPCs."""

    def __init__(
        self,
        admin: Administration,
        executor: ThreadPoolExecutor,
        authority: TokenAuthority,
        table_addr: str,
        *,
        tls: ClientTls | None = None,
    ) -> None:
        self._tls = tls
        self._admin = admin
        self._executor = executor
        self._credentials = ServiceCredentials(
            authority if authority.shared_service_key else None, CALLER_NAME
        )
        self._table_addr = table_addr
        self._channel: grpc.aio.Channel | None = None

    async def _run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        loop = asyncio.get_running_loop()
        context = contextvars.copy_context()
        return await loop.run_in_executor(self._executor, lambda: context.run(fn, *args, **kwargs))

    def _tables(self) -> table_pb2_grpc.TableServiceAsyncStub:
        if self._channel is None:  # made on first use, inside the serving event loop
            self._channel = reloading_aio_channel(self._table_addr, self._tls)
        return table_pb2_grpc.TableServiceStub(self._channel)

    async def aclose(self) -> None:
        """Close the channel to the table service."""
        if self._channel is not None:
            await self._channel.close()
            self._channel = None

    async def refused(self, method: str, caller: Caller, error: PermissionDenied) -> None:
        """The access table refused an operator: write it to the audit log."""
        if isinstance(caller, Admin) and method.startswith(METHOD_PREFIX):
            await self._record_refusal(caller.admin_id, method.removeprefix(METHOD_PREFIX), error)

    async def _record_refusal(self, admin_id: str, rpc: str, error: Exception) -> None:
        reason = getattr(error, "reason", "") or type(error).__name__
        message = getattr(error, "message", "") or str(error)
        await self._run(self._admin.record_refusal, admin_id, rpc, reason, message)

    @contextlib.asynccontextmanager
    async def _audited(self, rpc: str) -> AsyncIterator[None]:
        """Every refusal of an operator's call (his input, the rules, a reused request id)
        ends in the audit log; outages do not (nothing was refused)."""
        try:
            yield
        except (DomainError, ValueError) as exc:
            if category_of(exc) not in {None, Category.UNAVAILABLE, Category.CONTENDED}:
                caller = current_caller()
                if isinstance(caller, Admin):
                    await self._record_refusal(caller.admin_id, rpc, exc)
            raise

    async def CreditPlayer(
        self, request: admin_pb2.CreditPlayerRequest, context: Context
    ) -> admin_pb2.CreditPlayerResponse:
        async with self._audited("CreditPlayer"):
            why = _why(request.reason, request.ticket, request.request_id)
            done = await self._run(self._admin.credit, why, request.player_id, request.amount)
        return admin_pb2.CreditPlayerResponse(
            entry=entry_pb(done.entry), balance=done.balance, pending_approval=done.pending_approval
        )

    async def DebitPlayer(
        self, request: admin_pb2.DebitPlayerRequest, context: Context
    ) -> admin_pb2.DebitPlayerResponse:
        async with self._audited("DebitPlayer"):
            why = _why(request.reason, request.ticket, request.request_id)
            done = await self._run(self._admin.debit, why, request.player_id, request.amount)
        return admin_pb2.DebitPlayerResponse(
            entry=entry_pb(done.entry), balance=done.balance, pending_approval=done.pending_approval
        )

    async def ApproveAdjustment(
        self, request: admin_pb2.ApproveAdjustmentRequest, context: Context
    ) -> admin_pb2.ApproveAdjustmentResponse:
        async with self._audited("ApproveAdjustment"):
            done = await self._run(
                self._admin.approve,
                require_admin().admin_id,
                request.reason,
                request.ticket,
                request.request_id,
            )
        return admin_pb2.ApproveAdjustmentResponse(entry=entry_pb(done.entry), balance=done.balance)

    async def CloseTable(
        self, request: admin_pb2.CloseTableRequest, context: Context
    ) -> admin_pb2.CloseTableResponse:
        async with self._audited("CloseTable"):
            return await self._close_table(request)

    async def _close_table(
        self, request: admin_pb2.CloseTableRequest
    ) -> admin_pb2.CloseTableResponse:
        why = _why(request.reason, request.ticket, request.request_id)
        why.check()
        await self._run(self._admin.claim_close, why, request.table_id)
        if not request.table_id:
            raise InvalidArgument("BAD_TABLE_ID", "table_id is required")
        closed = await self._tables().CloseTable(
            table_pb2.CloseTableRequest(
                table_id=request.table_id,
                reason=why.reason,
                closed_by=why.admin_id,
                request_id=f"admin-{why.request_id}",
            ),
            metadata=self._credentials.metadata(),
            timeout=TABLE_CALL_TIMEOUT_S,
        )
        details = {
            "already_closed": closed.already_closed,
            "players": list(s.player_id for s in closed.table.seats if s.player_id),
            "round": closed.table.round.round,
        }
        close_entry = await self._run(self._admin.record_close, why, request.table_id, details)
        if closed.unsettled_phases:
            raise FailedPrecondition(
                "SETTLEMENT_PENDING",
                f"table {request.table_id} is closed; {closed.unsettled_phases} phase(s) of it "
                "are still settling: call CloseTable again (same request_id) to refund once "
                "they are settled",
            )
        refund_entry, postings = await self._run(self._admin.refund_table, why, request.table_id)
        return admin_pb2.CloseTableResponse(
            entries=[entry_pb(close_entry), entry_pb(refund_entry)],
            refunds=[
                admin_pb2.Refund(
                    player_id=p.to_account.removeprefix("player:"),
                    amount=p.amount,
                    from_account=p.from_account,
                )
                for p in postings
            ],
        )

    async def ListPlayerTables(
        self, request: admin_pb2.ListPlayerTablesRequest, context: Context
    ) -> admin_pb2.ListPlayerTablesResponse:
        require_admin()
        tables = await self._run(self._admin.player_tables, request.player_id)
        return admin_pb2.ListPlayerTablesResponse(
            tables=[
                admin_pb2.PlayerTable(
                    table_id=t.table_id,
                    rounds=t.rounds,
                    net=t.net,
                    first_time=_stamp(t.first_ms),
                    last_time=_stamp(t.last_ms),
                )
                for t in tables
            ]
        )

    async def ListPlayerTransfers(
        self, request: admin_pb2.ListPlayerTransfersRequest, context: Context
    ) -> admin_pb2.ListPlayerTransfersResponse:
        require_admin()
        if request.page_size < 0:
            raise InvalidArgument("INVALID_PAGE_SIZE", "page_size must not be negative")
        ledger = self._admin.ledger
        account = player_account(request.player_id)
        balance = await self._run(ledger.balance, account)
        transfers, token = await self._run(
            ledger.list_transfers,
            TransferFilter(account, request.table_id, 0, ""),
            request.page_size,
            request.page_token,
        )
        return admin_pb2.ListPlayerTransfersResponse(
            transfers=[_transfer_pb(t) for t in transfers], next_page_token=token, balance=balance
        )

    async def ListAuditEntries(
        self, request: admin_pb2.ListAuditEntriesRequest, context: Context
    ) -> admin_pb2.ListAuditEntriesResponse:
        require_admin()
        if request.page_size < 0:
            raise InvalidArgument("INVALID_PAGE_SIZE", "page_size must not be negative")
        entries, token = await self._run(
            self._admin.audit_entries,
            player_id=request.player_id,
            table_id=request.table_id,
            page_size=request.page_size,
            page_token=request.page_token,
        )
        return admin_pb2.ListAuditEntriesResponse(
            entries=[entry_pb(e) for e in entries], next_page_token=token
        )


def admin_registration(servicer: AdminServicer) -> ServiceRegistration:
    """The admin servicer, ready for ``create_server``."""
    return ServiceRegistration(
        SERVICE_NAME, servicer, admin_pb2_grpc.add_AdminServiceServicer_to_server
    )
