"""Outgoing calls of the matchmaking service: the table service and the wallet.

Both are called with a short-lived service credential. Errors the table service returns
for a player's request (full table, game started...) are turned into this service's own
errors, with the reasons the player's client knows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import grpc

from kishpa.table.v1 import table_pb2, table_pb2_grpc
from kishpa.wallet.v1 import wallet_pb2, wallet_pb2_grpc
from services.common.auth import ServiceCredentials
from services.common.errors import FailedPrecondition, NotFound, error_reason

SERVICE_NAME = "matchmaking"
CALL_TIMEOUT_S = 10.0


@dataclass(frozen=True, slots=True)
class SeatedPlayer:
    """A player matchmaking seats, with what the table shows of him and his shuffle seed."""

    player_id: str
    display_name: str = ""
    client_seed: str = ""
    will_contribute: bool = False
    """His client contributes to every deal: the table's deals wait for him
    (docs/fairness.md)."""


@dataclass(frozen=True, slots=True)
class CreatedTable:
    """A table the table service created: its id and the players in seat order."""

    table_id: str
    players: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class TableFacts:
    """What matchmaking needs to know of a live table: public facts, never a hand."""

    table_id: str
    closed: bool
    seats: int
    players: tuple[str, ...]
    """The seated players in seat order."""

    def seat_of(self, player_id: str) -> int | None:
        """The player's seat, or None when he does not sit here."""
        try:
            return self.players.index(player_id)
        except ValueError:
            return None


class TableGateway:
    """Creates tables, seats players and reads tables through the table service's RPCs.

    Matchmaking never reads the table service's Redis keys: ``GetTable`` with the service
    credential answers with a spectator's view (public facts only).
    """

    def __init__(self, channel: grpc.aio.Channel, credentials: ServiceCredentials) -> None:
        self._stub = table_pb2_grpc.TableServiceStub(channel)
        self._credentials = credentials

    async def table(self, table_id: str) -> TableFacts | None:
        """The table's public facts, or None if it is gone."""
        try:
            response = await self._stub.GetTable(
                table_pb2.GetTableRequest(table_id=table_id),
                metadata=self._credentials.metadata(),
                timeout=CALL_TIMEOUT_S,
            )
        except grpc.aio.AioRpcError as exc:
            if exc.code() == grpc.StatusCode.NOT_FOUND:
                return None
            raise
        view = response.table
        return TableFacts(
            table_id=view.table_id,
            closed=view.status == table_pb2.TABLE_STATUS_CLOSED,
            seats=view.settings.seats,
            players=tuple(
                s.player_id for s in sorted(view.seats, key=lambda s: s.seat) if s.player_id
            ),
        )

    async def create_table(
        self,
        players: Sequence[SeatedPlayer],
        settings: table_pb2.TableSettings,
        *,
        request_id: str,
        auto_start: bool = True,
    ) -> CreatedTable:
        """Create a table seating ``players`` in order (the first is its creator).

        ``request_id`` makes it idempotent: a retry after a crash finds the same table.
        """
        response = await self._stub.CreateTable(
            table_pb2.CreateTableRequest(
                settings=settings,
                request_id=request_id,
                players=[
                    table_pb2.SeatedPlayer(
                        player_id=p.player_id,
                        display_name=p.display_name,
                        client_seed=p.client_seed,
                        will_contribute=p.will_contribute,
                    )
                    for p in players
                ],
                auto_start=auto_start,
            ),
            metadata=self._credentials.metadata(),
            timeout=CALL_TIMEOUT_S,
        )
        view = response.table
        return CreatedTable(view.table_id, tuple(s.player_id for s in view.seats if s.player_id))

    async def join_table(self, table_id: str, player: SeatedPlayer, *, request_id: str) -> int:
        """Seat ``player`` at a waiting table; returns his seat.

        NOT_FOUND when the table is gone, FAILED_PRECONDITION (TABLE_FULL, GAME_STARTED)
        when it takes nobody more. A player already seated there gets his seat back.
        """
        player_id = player.player_id
        try:
            response = await self._stub.JoinTable(
                table_pb2.JoinTableRequest(
                    table_id=table_id,
                    player_id=player_id,
                    display_name=player.display_name,
                    client_seed=player.client_seed,
                    will_contribute=player.will_contribute,
                    request_id=request_id,
                ),
                metadata=self._credentials.metadata(),
                timeout=CALL_TIMEOUT_S,
            )
            view = response.table
        except grpc.aio.AioRpcError as exc:
            reason = error_reason(exc)
            if reason == "ALREADY_SEATED":
                table = await self.table(table_id)
                taken = None if table is None else table.seat_of(player_id)
                if taken is None:
                    raise
                return taken
            if reason in ("GAME_STARTED", "NOT_PLAYING", "TABLE_CLOSED"):
                # A table that filled up started by itself: to the player it is "full".
                table = await self.table(table_id)
                if table is None or len(table.players) < table.seats:
                    raise FailedPrecondition(
                        "GAME_STARTED", "the game at that table has already started"
                    ) from None
                reason = "TABLE_FULL"
            if reason == "TABLE_FULL":
                raise FailedPrecondition("TABLE_FULL", "the table is full") from None
            if exc.code() == grpc.StatusCode.NOT_FOUND:
                raise NotFound("TABLE_NOT_FOUND", "the table of that invite has closed") from None
            raise
        for seat in view.seats:
            if seat.player_id == player_id:
                return int(seat.seat)
        raise FailedPrecondition("NOT_SEATED", "the table did not seat the player")


class WalletGateway:
    """Opens players' wallets through the wallet service."""

    def __init__(self, channel: grpc.aio.Channel, credentials: ServiceCredentials) -> None:
        self._stub = wallet_pb2_grpc.WalletServiceStub(channel)
        self._credentials = credentials

    async def open_wallet(self, player_id: str, *, grant: bool = True) -> int:
        """Open (or find) the player's wallet (without the starting tokens when not
        ``grant``); returns his balance in tokens."""
        response = await self._stub.OpenWallet(
            wallet_pb2.OpenWalletRequest(player_id=player_id, without_starting_grant=not grant),
            metadata=self._credentials.metadata(),
            timeout=CALL_TIMEOUT_S,
        )
        return int(response.balance.tokens)

    async def wallet_exists(self, player_id: str) -> bool | None:
        """Whether the player's wallet was opened; None when the wallet cannot say now."""
        try:
            await self._stub.GetBalance(
                wallet_pb2.GetBalanceRequest(account=f"player:{player_id}"),
                metadata=self._credentials.metadata(),
                timeout=CALL_TIMEOUT_S,
            )
        except grpc.aio.AioRpcError as exc:
            return False if exc.code() == grpc.StatusCode.NOT_FOUND else None
        return True
