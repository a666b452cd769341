"""Players' wallet balances, read when they sit down, so a table's first view is right.

The views show each seat's balance from the table's balances hash, which the settlement
workers write after every settled phase. Before a table's first settlement that hash had
nothing, and every seat read 0 although its player holds his tokens; so when players are
seated the table service reads their balances from the wallet (``GetBalance`` with its
service credential) and seeds the hash with them, never over a settlement's value.

Best effort: a wallet that cannot be reached within the short timeout leaves the seat at
0 until the first settlement (logged), it never refuses the seating.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence

import grpc
import structlog

from kishpa.wallet.v1 import wallet_pb2, wallet_pb2_grpc
from services.common.auth import ServiceCredentials

log = structlog.get_logger("kishpa.table")

BalanceSource = Callable[[Sequence[str]], Awaitable[Mapping[str, int]]]
"""Player ids -> their wallet balances in tokens (players without a wallet are left out)."""

SERVICE_NAME = "table"
CALL_TIMEOUT_S = 2.0


class WalletBalances:
    """A :data:`BalanceSource` over the wallet service's gRPC API."""

    def __init__(self, channel: grpc.aio.Channel, credentials: ServiceCredentials) -> None:
        self._stub = wallet_pb2_grpc.WalletServiceStub(channel)
        self._credentials = credentials

    async def __call__(self, players: Sequence[str]) -> Mapping[str, int]:
        out: dict[str, int] = {}
        for player in players:
            try:
                response = await self._stub.GetBalance(
                    wallet_pb2.GetBalanceRequest(account=f"player:{player}"),
                    metadata=self._credentials.metadata(),
                    timeout=CALL_TIMEOUT_S,
                )
            except grpc.aio.AioRpcError as exc:
                if exc.code() != grpc.StatusCode.NOT_FOUND:
                    log.warning("wallet_balance_unavailable", player=player, code=exc.code().name)
                continue
            out[player] = int(response.balance.tokens)
        return out
