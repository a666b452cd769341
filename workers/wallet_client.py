"""The workers' gRPC client of the wallet: open wallets, apply a settlement batch, read balances.

Blocking calls on one channel per process (Celery tasks are synchronous; a channel is
thread-safe and reconnects by itself). Every call carries a service credential signed with
``KISHPA_SERVICE_SECRET`` and a deadline, so a stuck wallet surfaces as DEADLINE_EXCEEDED,
which the settlement task retries within its budget.

Batches of concurrent tasks travel together: while one task's call is on the wire, the
batches other threads hand in wait, and the next call carries all of them in one
``ApplyBatches`` (one RPC, one shared transaction in the wallet). The thread that sends
stops once its own batch is answered and hands the sending to the next waiting thread, so no
task waits on the others' calls for longer than its own. A batch alone still goes as
``ApplyBatch``. Each caller gets its own batch's answer, or its own refusal raised as the
``grpc.RpcError`` ``ApplyBatch`` would have raised (same code, details and ``ErrorInfo``), so
the settlement task cannot tell the difference. A wallet without ``ApplyBatches``
(``UNIMPLEMENTED``, during a rolling upgrade) gets one ``ApplyBatch`` a batch.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import grpc
from google.protobuf import any_pb2
from google.rpc import error_details_pb2, status_pb2

from games.ledger import Posting
from kishpa.wallet.v1 import wallet_pb2, wallet_pb2_grpc
from services.common.auth import ServiceCredentials
from services.common.settings import Settings
from services.common.tls import ClientTls, client_tls_from_settings, sync_channel

CALL_TIMEOUT_S = 10.0
REASON_PREFIX = "TRANSFER_REASON_"
"""Wire name of a ledger reason: the prefix plus the reason in capitals (``BOWL_WIN``)."""
# Reconnect quickly after the wallet restarts (gRPC's default backoff grows to two minutes).
CHANNEL_OPTIONS = (
    ("grpc.initial_reconnect_backoff_ms", 250),
    ("grpc.min_reconnect_backoff_ms", 250),
    ("grpc.max_reconnect_backoff_ms", 5000),
)
SERVICE_NAME = "worker"
# Batches one ApplyBatches call carries at most (the wallet takes 256).
MAX_BATCHES_PER_CALL = 64
_STATUS_DETAILS_KEY = "grpc-status-details-bin"
# Players whose wallets this process has opened; remembered so settling a round costs one
# OpenWallet per player per process, not per phase. Bounded: forgetting only costs a call.
_OPENED_LIMIT = 100_000


@dataclass(frozen=True, slots=True)
class BatchResult:
    """What the wallet answered to a batch: its id, balances after it, and whether replayed."""

    batch_id: str
    balances: Mapping[str, int]
    replayed: bool
    applied: tuple[Posting, ...] = ()
    """Every posting applied, in order, automatic bank loads included."""


class BatchRefused(grpc.RpcError, grpc.Call):
    """One batch of an ``ApplyBatches`` call refused: raised to its caller exactly as the
    ``ApplyBatch`` failure it stands for (code, details, the ``ErrorInfo`` reason)."""

    def __init__(self, refusal: wallet_pb2.BatchRefusal) -> None:
        super().__init__(refusal.message)
        self._code = grpc.StatusCode.UNKNOWN
        for code in grpc.StatusCode:
            if code.value[0] == refusal.code:
                self._code = code
        detail = any_pb2.Any()
        detail.Pack(error_details_pb2.ErrorInfo(reason=refusal.reason, domain="kishpa.dev"))
        status = status_pb2.Status(code=refusal.code, message=refusal.message, details=[detail])
        self._trailing = ((_STATUS_DETAILS_KEY, status.SerializeToString()),)
        self._details = refusal.message

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details

    def trailing_metadata(self) -> Any:
        return self._trailing

    def initial_metadata(self) -> Any:
        return ()

    def is_active(self) -> bool:
        return False

    def time_remaining(self) -> float:
        return 0.0

    def cancel(self) -> bool:
        return False

    def add_callback(self, callback: Any) -> bool:
        return False


@dataclass(slots=True)
class _Waiting:
    request: wallet_pb2.ApplyBatchRequest
    done: threading.Event = field(default_factory=threading.Event)
    response: wallet_pb2.ApplyBatchResponse | None = None
    error: BaseException | None = None
    promoted: bool = False  # woken to send the waiting batches, not answered


class WalletClient:
    """A blocking wallet client with the worker's service credential."""

    def __init__(
        self,
        address: str,
        credentials: ServiceCredentials,
        *,
        timeout_s: float = CALL_TIMEOUT_S,
        tls: ClientTls | None = None,
    ) -> None:
        self._timeout_s = timeout_s
        self._channel = sync_channel(address, tls, options=CHANNEL_OPTIONS)
        self._stub = wallet_pb2_grpc.WalletServiceStub(self._channel)
        self._credentials = credentials
        self._opened: set[str] = set()
        self._lock = threading.Lock()
        self._waiting: list[_Waiting] = []
        self._sending = False  # one thread at a time sends what is waiting
        self._batches_supported = True

    @classmethod
    def from_settings(
        cls, settings: Settings, *, timeout_s: float = CALL_TIMEOUT_S
    ) -> WalletClient:
        """A client of the wallet at ``KISHPA_WALLET_ADDR`` with a credential for ``worker``;
        every call gives up after ``timeout_s`` (DEADLINE_EXCEEDED)."""
        credentials = ServiceCredentials.for_process(settings, SERVICE_NAME)
        return cls(
            settings.wallet_addr,
            credentials,
            timeout_s=timeout_s,
            tls=client_tls_from_settings(settings),
        )

    def close(self) -> None:
        """Close the channel."""
        self._channel.close()

    def open_wallets(self, player_ids: Sequence[str]) -> None:
        """Open each player's wallet (idempotent: the starting grant is given only once)."""
        for player_id in player_ids:
            with self._lock:
                if player_id in self._opened:
                    continue
            self._stub.OpenWallet(
                wallet_pb2.OpenWalletRequest(player_id=player_id),
                metadata=self._credentials.metadata(),
                timeout=self._timeout_s,
            )
            with self._lock:
                if len(self._opened) >= _OPENED_LIMIT:
                    self._opened.clear()
                self._opened.add(player_id)

    def apply_batch(self, request_id: str, postings: Sequence[Posting]) -> BatchResult:
        """Apply ``postings`` as one atomic batch under the idempotency key ``request_id``
        (with the batches of concurrent callers, see the module docstring)."""
        request = wallet_pb2.ApplyBatchRequest(
            request_id=request_id,
            postings=[
                wallet_pb2.Posting(
                    from_account=p.from_account,
                    to_account=p.to_account,
                    amount=p.amount,
                    reason=wallet_pb2.TransferReason.Value(REASON_PREFIX + p.reason.upper()),
                    table_id=p.table_id,
                    round=p.round,
                    phase=p.phase,
                )
                for p in postings
            ],
        )
        response = self._apply_together(request)
        return BatchResult(
            batch_id=str(response.batch_id),
            balances={b.account: b.tokens for b in response.balances},
            replayed=response.replayed,
            applied=tuple(
                Posting(
                    from_account=p.from_account,
                    to_account=p.to_account,
                    amount=p.amount,
                    reason=wallet_pb2.TransferReason.Name(p.reason)
                    .removeprefix(REASON_PREFIX)
                    .lower(),
                    table_id=p.table_id,
                    round=p.round,
                    phase=p.phase,
                )
                for p in response.applied
            ),
        )

    def _apply_together(
        self, request: wallet_pb2.ApplyBatchRequest
    ) -> wallet_pb2.ApplyBatchResponse:
        """Hand the batch in and wait for its answer. The caller who finds nobody sending
        sends what waits until its own batch is answered, then hands the sending on to the
        next waiting caller: nobody serves the others for longer than its own call."""
        mine = _Waiting(request)
        with self._lock:
            self._waiting.append(mine)
            lead = not self._sending
            self._sending = True
        while True:
            if lead:
                self._lead(mine)
            mine.done.wait()
            with self._lock:
                if not mine.promoted:
                    break
                mine.promoted = False  # the sending was handed to this caller
                mine.done.clear()
            lead = True
        if mine.error is not None:
            raise mine.error
        assert mine.response is not None
        return mine.response

    def _lead(self, mine: _Waiting) -> None:
        try:
            while not mine.done.is_set():
                with self._lock:
                    group = self._waiting[:MAX_BATCHES_PER_CALL]
                    del self._waiting[:MAX_BATCHES_PER_CALL]
                if not group:  # cannot happen: this caller's batch waits until it is sent
                    raise RuntimeError("a batch was lost before it was sent")
                self._send(group)
            with self._lock:
                if self._waiting:
                    successor = self._waiting[0]
                    successor.promoted = True
                    successor.done.set()
                else:
                    self._sending = False
        except BaseException:
            with self._lock:
                self._sending = False
                left, self._waiting = self._waiting, []
            for waiting in left:  # nobody may wait forever on a sender that died
                waiting.error = RuntimeError("the wallet call carrying this batch failed")
                waiting.done.set()
            raise

    def _send(self, group: list[_Waiting]) -> None:
        """One call for ``group``; every member gets its answer or its error (never raises
        for a failed call: each caller raises its own)."""
        try:
            if len(group) > 1 and self._batches_supported:
                try:
                    reply = self._stub.ApplyBatches(
                        wallet_pb2.ApplyBatchesRequest(batches=[w.request for w in group]),
                        metadata=self._credentials.metadata(),
                        timeout=self._timeout_s,
                    )
                except grpc.RpcError as exc:
                    if not (
                        isinstance(exc, grpc.Call) and exc.code() == grpc.StatusCode.UNIMPLEMENTED
                    ):
                        raise
                    self._batches_supported = False  # an older wallet: one call a batch
                else:
                    for waiting, outcome in zip(group, reply.outcomes, strict=True):
                        if outcome.HasField("refusal"):
                            waiting.error = BatchRefused(outcome.refusal)
                        else:
                            waiting.response = outcome.result
                    return
            for waiting in group:
                try:
                    waiting.response = self._stub.ApplyBatch(
                        waiting.request,
                        metadata=self._credentials.metadata(),
                        timeout=self._timeout_s,
                    )
                except grpc.RpcError as exc:
                    waiting.error = exc
        except Exception as exc:  # the shared call failed: each caller sees that failure
            for waiting in group:
                if waiting.response is None and waiting.error is None:
                    waiting.error = exc
        finally:
            for waiting in group:
                if waiting.response is None and waiting.error is None:
                    waiting.error = RuntimeError("the wallet call carrying this batch failed")
                waiting.done.set()

    def balance(self, account: str) -> int:
        """The balance of one account, in tokens."""
        response = self._stub.GetBalance(
            wallet_pb2.GetBalanceRequest(account=account),
            metadata=self._credentials.metadata(),
            timeout=self._timeout_s,
        )
        return int(response.balance.tokens)
