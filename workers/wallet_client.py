"""The workers' gRPC client of the wallet: open wallets, apply a settlement batch, read balances.

Blocking calls on one channel per process (Celery tasks are synchronous; a channel is
thread-safe and reconnects by itself). Every call carries a service credential signed with
``KISHPA_SERVICE_SECRET`` and a deadline, so a stuck wallet surfaces as DEADLINE_EXCEEDED,
which the settlement task retries within its budget.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from games.ledger import Posting
from kishpa.wallet.v1 import wallet_pb2, wallet_pb2_grpc
from services.common.auth import ServiceCredentials, TokenAuthority
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

    @classmethod
    def from_settings(
        cls, settings: Settings, *, timeout_s: float = CALL_TIMEOUT_S
    ) -> WalletClient:
        """A client of the wallet at ``KISHPA_WALLET_ADDR`` with a credential for ``worker``;
        every call gives up after ``timeout_s`` (DEADLINE_EXCEEDED)."""
        authority = TokenAuthority.from_settings(settings)
        credentials = ServiceCredentials(authority, SERVICE_NAME)
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
        """Apply ``postings`` (between wallet accounts: ``player:<id>``, ``bowl:<table>``,
        ``pot:<table>``, ``bank``) as one atomic batch under the idempotency key ``request_id``."""
        response = self._stub.ApplyBatch(
            wallet_pb2.ApplyBatchRequest(
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
            ),
            metadata=self._credentials.metadata(),
            timeout=self._timeout_s,
        )
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

    def balance(self, account: str) -> int:
        """The balance of one account, in tokens."""
        response = self._stub.GetBalance(
            wallet_pb2.GetBalanceRequest(account=account),
            metadata=self._credentials.metadata(),
            timeout=self._timeout_s,
        )
        return int(response.balance.tokens)
