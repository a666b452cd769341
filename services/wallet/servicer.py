"""The gRPC face of the wallet: converts proto <-> domain, authorises, and runs the ledger
off the event loop. It holds no ledger logic."""

from __future__ import annotations

import asyncio
import contextvars
import functools
import json
from collections.abc import AsyncIterator, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import grpc
from google.protobuf.duration_pb2 import Duration
from google.protobuf.timestamp_pb2 import Timestamp
from prometheus_client import Counter
from sqlalchemy import Engine

from kishpa.wallet.v1 import wallet_pb2, wallet_pb2_grpc
from services.common.auth import (
    Admin,
    Player,
    Service,
    current_caller,
    current_player,
    require_service,
)
from services.common.errors import (
    InvalidArgument,
    PermissionDenied,
    Unauthenticated,
    failure_of,
)
from services.common.logging import get_logger
from services.wallet import finance, periods, runs
from services.wallet.accounts import Reason, ils, player_account
from services.wallet.batch import Posting
from services.wallet.group_commit import GroupCommitter
from services.wallet.ledger import BatchResult, Ledger, Transfer, TransferFilter

T = TypeVar("T")
_log = get_logger(__name__)

BATCHES = Counter(
    "kishpa_wallet_batches",
    "Ledger batches answered, by kind (apply, open, load) and outcome (applied, replayed, "
    "refused: ApplyBatches only).",
    ("kind", "outcome"),
)
BANK_LOADS = Counter(
    "kishpa_wallet_bank_loads", "Automatic 50-token bank loads recorded to cover a player's debt."
)
Context = grpc.aio.ServicerContext[Any, Any]


def _count(kind: str, result: BatchResult) -> None:
    BATCHES.labels(kind, "replayed" if result.replayed else "applied").inc()
    if result.replayed:
        return
    loads = [p for p in result.applied if p.reason == Reason.BANK_LOAD]
    if loads:
        BANK_LOADS.inc(len(loads))
        # Finance wants to see every automatic load; they are rare.
        _log.info(
            "wallet.bank_loads",
            batch_id=result.batch_id,
            accounts=sorted({p.to_account for p in loads}),
            loads=len(loads),
        )


def _caller() -> Player | Service | Admin:
    caller = current_caller()
    if caller is None:
        raise Unauthenticated(
            "TOKEN_MISSING", "this call needs a player token or a service credential"
        )
    return caller


def _own_account(player: Player) -> str:
    return player_account(player.player_id)


REASON_PREFIX = "TRANSFER_REASON_"
# ApplyBatches: at most this many batches a call (a group's transaction stays short).
MAX_BATCHES_PER_CALL = 256


def reason_enum(reason: str) -> wallet_pb2.TransferReason.ValueType:
    """The wire enum of a ledger reason (``bowl_contribution``); unspecified if unknown."""
    try:
        return wallet_pb2.TransferReason.Value(REASON_PREFIX + reason.upper())
    except ValueError:
        return wallet_pb2.TRANSFER_REASON_UNSPECIFIED


def reason_text(reason: wallet_pb2.TransferReason.ValueType) -> str:
    """The ledger reason of a wire enum; ``""`` for unspecified or unknown values (which the
    ledger refuses in a posting and reads as "any" in a filter)."""
    if reason == wallet_pb2.TRANSFER_REASON_UNSPECIFIED:
        return ""
    try:
        return wallet_pb2.TransferReason.Name(reason).removeprefix(REASON_PREFIX).lower()
    except ValueError:
        return ""


def _duration(ms: int) -> Duration:
    duration = Duration()
    duration.FromMilliseconds(ms)
    return duration


def _timestamp(ms: int) -> Timestamp:
    stamp = Timestamp()
    stamp.FromMilliseconds(ms)
    return stamp


def _balance(account: str, tokens: int) -> wallet_pb2.Balance:
    return wallet_pb2.Balance(account=account, tokens=tokens, ils=ils(tokens))


def _posting_pb(p: Posting) -> wallet_pb2.Posting:
    return wallet_pb2.Posting(
        from_account=p.from_account,
        to_account=p.to_account,
        amount=p.amount,
        reason=reason_enum(p.reason),
        table_id=p.table_id,
        round=p.round,
        phase=p.phase,
    )


def _posting(pb: wallet_pb2.Posting) -> Posting:
    return Posting(
        pb.from_account,
        pb.to_account,
        pb.amount,
        reason_text(pb.reason),
        pb.table_id,
        pb.round,
        pb.phase,
    )


def _balances_pb(balances: Mapping[str, int]) -> list[wallet_pb2.Balance]:
    return [_balance(a, v) for a, v in sorted(balances.items())]


def _transfer_pb(t: Transfer) -> wallet_pb2.Transfer:
    return wallet_pb2.Transfer(
        transfer_id=t.transfer_id,
        batch_id=t.batch_id,
        seq=t.seq,
        posting=_posting_pb(t.posting),
        create_time=_timestamp(t.created_ms),
        effective_time=_timestamp(t.effective_ms or t.created_ms),
    )


ExportChunk = tuple[wallet_pb2.ExportTransfersResponse, int, str]
_REASON_ENUMS = {reason.value: reason_enum(reason.value) for reason in Reason}


def _transfer_chunk(
    engine: Engine, filters: finance.ExportFilter, cursor: str, size: int
) -> ExportChunk:
    """A chunk of Transfer messages; (message, rows, cursor after it)."""
    transfers, cursor = finance.export_page(engine, filters, cursor, size)
    chunk = wallet_pb2.ExportTransfersResponse(
        transfers=[_transfer_pb(t) for t in transfers], cursor=cursor
    )
    return chunk, len(transfers), cursor


def _column_chunk(
    engine: Engine, filters: finance.ExportFilter, cursor: str, size: int
) -> ExportChunk:
    """A chunk as columns, straight from the rows: no object per posting."""
    rows, cursor = finance.export_rows(engine, filters, cursor, size)
    chunk = wallet_pb2.ExportTransfersResponse(cursor=cursor)
    if rows:
        (
            ids,
            batches,
            seqs,
            times,
            sources,
            targets,
            amounts,
            reasons,
            tables,
            rounds,
            phases,
            effective,
        ) = zip(*rows, strict=True)
        chunk.columns.transfer_id.extend(ids)
        chunk.columns.batch_id.extend(batches)
        chunk.columns.seq.extend(seqs)
        chunk.columns.create_time_ms.extend(times)
        chunk.columns.from_account.extend(sources)
        chunk.columns.to_account.extend(targets)
        chunk.columns.amount.extend(amounts)
        unspecified = wallet_pb2.TRANSFER_REASON_UNSPECIFIED
        chunk.columns.reason.extend([_REASON_ENUMS.get(r, unspecified) for r in reasons])
        chunk.columns.table_id.extend([t or "" for t in tables])
        chunk.columns.round.extend([r or 0 for r in rounds])
        chunk.columns.phase.extend([p or "" for p in phases])
        chunk.columns.effective_time_ms.extend(effective)
    return chunk, len(rows), cursor


class WalletServicer(wallet_pb2_grpc.WalletServiceServicer):
    """kishpa.wallet.v1.WalletService over a :class:`Ledger`."""

    def __init__(
        self,
        ledger: Ledger,
        executor: ThreadPoolExecutor,
        committer: GroupCommitter | None = None,
    ) -> None:
        self._ledger = ledger
        self._executor = executor
        # ApplyBatch calls share transactions through it; None: one transaction each.
        self._committer = committer

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        # The ledger blocks on the database; keep the event loop free for other calls.
        loop = asyncio.get_running_loop()
        # In the call's context: its trace span (and log fields) follow into the thread.
        context = contextvars.copy_context()
        return await loop.run_in_executor(self._executor, context.run, fn, *args)

    async def OpenWallet(
        self, request: wallet_pb2.OpenWalletRequest, context: Context
    ) -> wallet_pb2.OpenWalletResponse:
        """Open a wallet (the caller's own, or any player's for a service)."""
        caller = _caller()
        player_id = request.player_id
        if isinstance(caller, Player):
            if player_id and player_id != caller.player_id:
                raise PermissionDenied("NOT_YOUR_WALLET", "a player may open only his own wallet")
            player_id = caller.player_id
        elif not player_id:
            raise InvalidArgument("MISSING_PLAYER_ID", "a service must name the player_id")
        if request.without_starting_grant and not isinstance(caller, Service):
            raise PermissionDenied("SERVICE_REQUIRED", "only a service may open without a grant")
        account = player_account(player_id)
        tokens, created = await self._run(
            functools.partial(
                self._ledger.open_wallet, player_id, grant=not request.without_starting_grant
            )
        )
        BATCHES.labels("open", "applied" if created else "replayed").inc()
        return wallet_pb2.OpenWalletResponse(balance=_balance(account, tokens), created=created)

    async def GetBalance(
        self, request: wallet_pb2.GetBalanceRequest, context: Context
    ) -> wallet_pb2.GetBalanceResponse:
        """Read one account: a player his own wallet only; a service any account."""
        caller = _caller()
        account = request.account
        if isinstance(caller, Player):
            own = _own_account(caller)
            if account and account != own:
                raise PermissionDenied("NOT_YOUR_WALLET", "a player may read only his own wallet")
            account = own
        elif not account:
            raise InvalidArgument("MISSING_ACCOUNT", "a service must name the account")
        tokens = await self._run(self._ledger.balance, account)
        return wallet_pb2.GetBalanceResponse(balance=_balance(account, tokens))

    async def LoadTokens(
        self, request: wallet_pb2.LoadTokensRequest, context: Context
    ) -> wallet_pb2.LoadTokensResponse:
        """Load 50 tokens into the calling player's wallet (idempotent per request_id)."""
        player = current_player()
        result: BatchResult = await self._run(
            self._ledger.load_tokens, player.player_id, request.request_id
        )
        _count("load", result)
        account = _own_account(player)
        loaded = sum(p.amount for p in result.applied if p.to_account == account)
        return wallet_pb2.LoadTokensResponse(
            balance=_balance(account, result.balances[account]),
            loaded=loaded,
            batch_id=result.batch_id,
        )

    async def ListTransfers(
        self, request: wallet_pb2.ListTransfersRequest, context: Context
    ) -> wallet_pb2.ListTransfersResponse:
        """History, newest first: a player sees his own postings; a service any."""
        caller = _caller()
        account = request.account
        if isinstance(caller, Player):
            own = _own_account(caller)
            if account and account != own:
                raise PermissionDenied("NOT_YOUR_WALLET", "a player may list only his own wallet")
            account = own
        if request.page_size < 0:
            raise InvalidArgument("INVALID_PAGE_SIZE", "page_size must not be negative")
        filters = TransferFilter(
            account, request.table_id, request.round, reason_text(request.reason)
        )
        if request.round < 0:
            raise InvalidArgument("INVALID_ROUND", "round must not be negative")
        transfers, token = await self._run(
            self._ledger.list_transfers, filters, request.page_size, request.page_token
        )
        return wallet_pb2.ListTransfersResponse(
            transfers=[_transfer_pb(t) for t in transfers], next_page_token=token
        )

    async def ApplyBatch(
        self, request: wallet_pb2.ApplyBatchRequest, context: Context
    ) -> wallet_pb2.ApplyBatchResponse:
        """Apply an atomic, idempotent batch (service credential only)."""
        require_service()
        postings = [_posting(p) for p in request.postings]
        result: BatchResult
        if self._committer is not None:
            result = await asyncio.wrap_future(self._committer.submit(request.request_id, postings))
        else:
            result = await self._run(self._ledger.apply_batch, request.request_id, postings)
        _count("apply", result)
        return _batch_response(result)

    async def ApplyBatches(
        self, request: wallet_pb2.ApplyBatchesRequest, context: Context
    ) -> wallet_pb2.ApplyBatchesResponse:
        """Apply many batches in one call (service credential only), each on its own terms."""
        require_service()
        if not 0 < len(request.batches) <= MAX_BATCHES_PER_CALL:
            raise InvalidArgument(
                "INVALID_BATCH_COUNT", f"send 1 to {MAX_BATCHES_PER_CALL} batches a call"
            )
        batches = [(b.request_id, [_posting(p) for p in b.postings]) for b in request.batches]
        outcomes = await self._run(self._ledger.apply_group, batches)
        return wallet_pb2.ApplyBatchesResponse(outcomes=[_outcome_pb(o) for o in outcomes])

    # --- finance (who may call: services/common/access.py, the worker and finance) ----

    async def ExportTransfers(
        self, request: wallet_pb2.ExportTransfersRequest, context: Context
    ) -> AsyncIterator[wallet_pb2.ExportTransfersResponse]:
        """Stream a period's postings in commit order, a chunk per message, with cursors."""
        if request.chunk_size < 0:
            raise InvalidArgument("INVALID_CHUNK_SIZE", "chunk_size must not be negative")
        filters = finance.ExportFilter(
            _ms(request.since),
            _ms(request.until),
            request.account,
            request.table_id,
            reason_text(request.reason),
        )
        cursor = request.cursor
        read = _column_chunk if request.columns else _transfer_chunk
        # One chunk is read and built ahead (in a thread) while gRPC sends the previous one;
        # memory stays two chunks.
        page = self._run(read, self._ledger.engine, filters, cursor, request.chunk_size)
        while True:
            chunk, rows, cursor = await page
            if cursor:
                page = self._run(read, self._ledger.engine, filters, cursor, request.chunk_size)
            if rows or not cursor:
                yield chunk
            if not cursor:
                return

    async def GetReasonTotals(
        self, request: wallet_pb2.GetReasonTotalsRequest, context: Context
    ) -> wallet_pb2.GetReasonTotalsResponse:
        """Totals per reason over a period."""
        totals = await self._run(
            finance.reason_totals, self._ledger.engine, _ms(request.since), _ms(request.until)
        )
        return wallet_pb2.GetReasonTotalsResponse(totals=[_reason_total_pb(t) for t in totals])

    async def GetBalancesAsOf(
        self, request: wallet_pb2.GetBalancesAsOfRequest, context: Context
    ) -> wallet_pb2.GetBalancesAsOfResponse:
        """Balances at a past moment."""
        as_of = await self._run(
            finance.balances_as_of, self._ledger.engine, _ms(request.as_of), list(request.accounts)
        )
        return wallet_pb2.GetBalancesAsOfResponse(
            balances=[_balance(a, v) for a, v in as_of.balances.items()],
            kinds=[_kind_total_pb(k) for k in as_of.kinds],
        )

    async def GetPeriodSummary(
        self, request: wallet_pb2.GetPeriodSummaryRequest, context: Context
    ) -> wallet_pb2.GetPeriodSummaryResponse:
        """A period's close: opening, movements by reason, closing."""
        summary = await self._run(
            finance.period_summary, self._ledger.engine, _ms(request.since), _ms(request.until)
        )
        return wallet_pb2.GetPeriodSummaryResponse(
            opening_outstanding=summary.opening_outstanding,
            closing_outstanding=summary.closing_outstanding,
            movements=[_reason_total_pb(t) for t in summary.movements],
            opening=[_kind_total_pb(k) for k in summary.opening],
            closing=[_kind_total_pb(k) for k in summary.closing],
            closed=summary.closed,
            closes=[closed_period_pb(c) for c in summary.closes],
        )

    async def GetTableLedger(
        self, request: wallet_pb2.GetTableLedgerRequest, context: Context
    ) -> wallet_pb2.GetTableLedgerResponse:
        """The ledger's side of one table (its bowl, pot and batches)."""
        if not request.table_id:
            raise InvalidArgument("MISSING_TABLE_ID", "table_id is required")
        held = await self._run(
            finance.table_ledger, self._ledger.engine, request.table_id, tuple(request.rounds)
        )
        return wallet_pb2.GetTableLedgerResponse(
            bowl=held.bowl,
            pot=held.pot,
            batches=[
                wallet_pb2.LedgerBatch(
                    batch_id=b.batch_id,
                    request_id=b.request_id,
                    transfers=[_transfer_pb(t) for t in b.transfers],
                )
                for b in held.batches
            ],
        )

    async def ListTableAccounts(
        self, request: wallet_pb2.ListTableAccountsRequest, context: Context
    ) -> wallet_pb2.ListTableAccountsResponse:
        """Bowls and pots that hold tokens."""
        if request.page_size < 0:
            raise InvalidArgument("INVALID_PAGE_SIZE", "page_size must not be negative")
        rows, token = await self._run(
            finance.table_accounts, self._ledger.engine, request.page_size, request.page_token
        )
        return wallet_pb2.ListTableAccountsResponse(
            balances=[_balance(a, v) for a, v in rows], next_page_token=token
        )

    async def ListReconciliationRuns(
        self, request: wallet_pb2.ListReconciliationRunsRequest, context: Context
    ) -> wallet_pb2.ListReconciliationRunsResponse:
        """Reconciliation runs, newest first."""
        if request.page_size < 0:
            raise InvalidArgument("INVALID_PAGE_SIZE", "page_size must not be negative")
        found, token = await self._run(
            runs.list_runs,
            self._ledger.engine,
            request.kind,
            request.page_size,
            request.page_token,
        )
        return wallet_pb2.ListReconciliationRunsResponse(
            runs=[run_pb(r) for r in found], next_page_token=token
        )

    async def GetAccountStatement(
        self, request: wallet_pb2.GetAccountStatementRequest, context: Context
    ) -> AsyncIterator[wallet_pb2.GetAccountStatementResponse]:
        """One account's postings with running balances, in chunks."""
        if not request.account:
            raise InvalidArgument("MISSING_ACCOUNT", "account is required")
        if request.chunk_size < 0:
            raise InvalidArgument("INVALID_CHUNK_SIZE", "chunk_size must not be negative")
        since = _ms(request.since) if request.HasField("since") else 0
        until = _ms(request.until) if request.HasField("until") else 0
        chunks = await self._run(
            _statement_chunks,
            self._ledger.engine,
            request.account,
            since,
            until,
            request.chunk_size,
        )
        for chunk in chunks:
            yield chunk

    async def ListAccounts(
        self, request: wallet_pb2.ListAccountsRequest, context: Context
    ) -> wallet_pb2.ListAccountsResponse:
        """Every account with its balance, by id."""
        if request.page_size < 0:
            raise InvalidArgument("INVALID_PAGE_SIZE", "page_size must not be negative")
        rows, token = await self._run(
            finance.list_accounts,
            self._ledger.engine,
            request.kind,
            request.page_size,
            request.page_token,
        )
        return wallet_pb2.ListAccountsResponse(
            accounts=[
                wallet_pb2.AccountSummary(
                    account=r.account,
                    kind=r.kind,
                    balance=_balance(r.account, r.balance),
                    create_time=_timestamp(r.created_ms),
                )
                for r in rows
            ],
            next_page_token=token,
        )

    async def ListClosedPeriods(
        self, request: wallet_pb2.ListClosedPeriodsRequest, context: Context
    ) -> wallet_pb2.ListClosedPeriodsResponse:
        """The closed months, oldest first."""
        found = await self._run(periods.closed_periods, self._ledger.engine)
        return wallet_pb2.ListClosedPeriodsResponse(periods=[closed_period_pb(c) for c in found])

    async def RecordReconciliationRun(
        self, request: wallet_pb2.RecordReconciliationRunRequest, context: Context
    ) -> wallet_pb2.RecordReconciliationRunResponse:
        """Store a run made outside the wallet (the drift check; service only)."""
        require_service()
        pb = request.run
        try:
            result = json.loads(pb.result_json or "{}")
        except ValueError:
            raise InvalidArgument("INVALID_RUN", "result_json is not JSON") from None
        if not isinstance(result, dict):
            raise InvalidArgument("INVALID_RUN", "result_json must be a JSON object")
        run = runs.Run(
            pb.kind,
            pb.scope,
            pb.source,
            _ms(pb.start_time),
            pb.duration.ToMilliseconds(),
            pb.ok,
            pb.discrepancies,
            result,
            chain_seq=pb.chain_seq if pb.chain_hash else None,
            chain_hash=pb.chain_hash,
        )
        if pb.chain_hash and (len(pb.chain_hash) != 64 or pb.chain_seq < 0):
            raise InvalidArgument("INVALID_RUN", "chain_hash must be 64 hex digits, chain_seq >= 0")
        identity = caller_identity(_caller())
        run_id = await self._run(runs.record_run, self._ledger.engine, run, identity)
        return wallet_pb2.RecordReconciliationRunResponse(run_id=run_id)


def _batch_response(result: BatchResult) -> wallet_pb2.ApplyBatchResponse:
    return wallet_pb2.ApplyBatchResponse(
        batch_id=result.batch_id,
        applied=[_posting_pb(p) for p in result.applied],
        balances=_balances_pb(result.balances),
        replayed=result.replayed,
    )


def _outcome_pb(outcome: BatchResult | Exception) -> wallet_pb2.ApplyBatchOutcome:
    """A batch's outcome: its result, or the refusal ApplyBatch would have answered. An
    unexpected error (a bug) fails the whole call, as it would fail ApplyBatch."""
    if isinstance(outcome, BatchResult):
        _count("apply", outcome)
        return wallet_pb2.ApplyBatchOutcome(result=_batch_response(outcome))
    failure = failure_of(outcome)
    if failure is None:
        raise outcome
    BATCHES.labels("apply", "refused").inc()
    return wallet_pb2.ApplyBatchOutcome(
        refusal=wallet_pb2.BatchRefusal(
            code=failure.code.value[0], reason=failure.reason, message=failure.message
        )
    )


def _ms(stamp: Timestamp) -> int:
    """Milliseconds of a timestamp (0 when unset)."""
    return int(stamp.ToMilliseconds())


def _reason_total_pb(t: finance.ReasonTotal) -> wallet_pb2.ReasonTotal:
    return wallet_pb2.ReasonTotal(
        reason=reason_enum(t.reason),
        postings=t.postings,
        tokens=t.tokens,
        from_bank=t.from_bank,
        to_bank=t.to_bank,
    )


def _kind_total_pb(k: finance.KindTotal) -> wallet_pb2.KindTotal:
    return wallet_pb2.KindTotal(kind=k.kind, tokens=k.tokens, accounts=k.accounts)


def closed_period_pb(c: periods.ClosedPeriod) -> wallet_pb2.ClosedPeriod:
    """A closed month on the wire."""
    return wallet_pb2.ClosedPeriod(
        month=c.month,
        since=_timestamp(c.since_ms),
        until=_timestamp(c.until_ms),
        close_time=_timestamp(c.closed_ms),
        closed_by=c.closed_by,
        chain_seq=c.chain_seq,
        chain_hash=c.chain_hash,
    )


def _statement_chunks(
    engine: Engine, account: str, since_ms: int, until_ms: int, size: int
) -> list[wallet_pb2.GetAccountStatementResponse]:
    """The whole statement as response chunks (read on one snapshot)."""
    chunks = []
    unspecified = wallet_pb2.TRANSFER_REASON_UNSPECIFIED
    for head, lines in finance.statement(engine, account, since_ms, until_ms, size):
        chunk = wallet_pb2.GetAccountStatementResponse(
            account=head.account, opening_balance=head.opening, closed=head.closed
        )
        add = chunk.lines.add
        # Fields set in place: a Timestamp message per time would double the cost of a line.
        for x in lines:
            pb = add(
                transfer_id=x.transfer_id,
                batch_id=x.batch_id,
                seq=x.seq,
                reason=_REASON_ENUMS.get(x.reason, unspecified),
                table_id=x.table_id,
                phase=x.phase,
                counterparty=x.counterparty,
                amount=x.amount,
                balance=x.balance,
            )
            pb.effective_time.seconds, millis = divmod(x.effective_ms, 1000)
            pb.effective_time.nanos = millis * 1_000_000
            pb.posted_time.seconds, millis = divmod(x.posted_ms, 1000)
            pb.posted_time.nanos = millis * 1_000_000
            if x.round is not None:
                pb.round = x.round
        chunks.append(chunk)
    chunks[-1].closing_balance = head.closing
    chunks[-1].last = True
    return chunks


def caller_identity(caller: Player | Service | Admin) -> str:
    """Who a caller is, as recorded (``service:worker``, ``admin:<subject>``)."""
    if isinstance(caller, Service):
        return f"service:{caller.name}"
    if isinstance(caller, Admin):
        return f"admin:{caller.admin_id}"
    return f"player:{caller.player_id}"


def run_pb(r: runs.Run) -> wallet_pb2.ReconciliationRun:
    """A run on the wire."""
    return wallet_pb2.ReconciliationRun(
        run_id=r.run_id,
        kind=r.kind,
        scope=r.scope,
        source=r.source,
        start_time=_timestamp(r.started_ms),
        duration=_duration(r.duration_ms),
        ok=r.ok,
        discrepancies=r.discrepancies,
        result_json=json.dumps(r.result, sort_keys=True),
        identity=r.identity,
        chain_seq=r.chain_seq or 0,
        chain_hash=r.chain_hash,
    )
