"""kishpa.matchmaking.v1 MatchmakingService: proto -> use case -> proto, nothing else.

The player always comes from the token; errors are raised as ``ServiceError`` and mapped to
statuses (with a reason) by ``services.common.errors``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import grpc
from google.protobuf.timestamp_pb2 import Timestamp

from kishpa.matchmaking.v1 import matchmaking_pb2 as mm_pb2
from kishpa.matchmaking.v1 import matchmaking_pb2_grpc as mm_grpc
from services.common.auth import current_player
from services.common.errors import InvalidArgument
from services.common.games import GAME_ENUMS, GAMES
from services.matchmaking.service import Matchmaking, QueueState
from services.matchmaking.store import CANCELLED, EXPIRED, FORMING, MATCHED, WAITING

Context = grpc.aio.ServicerContext[Any, Any]

TICKET_STATES = {
    WAITING: mm_pb2.TICKET_STATE_WAITING,
    # Being seated is still "waiting" to the client: the next change is MATCHED (or back).
    FORMING: mm_pb2.TICKET_STATE_WAITING,
    MATCHED: mm_pb2.TICKET_STATE_MATCHED,
    CANCELLED: mm_pb2.TICKET_STATE_CANCELLED,
    EXPIRED: mm_pb2.TICKET_STATE_EXPIRED,
}
MAX_TICKET_ID = 64


def _timestamp(ms: int) -> Timestamp:
    stamp = Timestamp()
    stamp.FromMilliseconds(ms)
    return stamp


def ticket_message(state: QueueState) -> mm_pb2.QueueTicket:
    """The wire form of a ticket."""
    t = state.ticket
    matched = t.state == MATCHED
    return mm_pb2.QueueTicket(
        ticket_id=t.ticket_id,
        game=GAME_ENUMS.get(t.game, 0),  # type: ignore[arg-type]
        seats=t.seats,
        stake=t.stake,
        state=TICKET_STATES.get(t.state, mm_pb2.TICKET_STATE_UNSPECIFIED),
        players_waiting=state.players_waiting,
        table_id=t.table_id if matched else "",
        seat=t.seat if matched else None,
        create_time=_timestamp(t.created_ms),
        expire_time=_timestamp(t.expire_ms),
    )


def _ticket_id(value: str) -> str:
    if not value or len(value) > MAX_TICKET_ID:
        raise InvalidArgument("BAD_TICKET_ID", f"ticket_id must be 1-{MAX_TICKET_ID} characters")
    return value


class MatchmakingServicer(mm_grpc.MatchmakingServiceServicer):
    """The matchmaking RPCs over :class:`~services.matchmaking.service.Matchmaking`."""

    def __init__(self, matchmaking: Matchmaking) -> None:
        self.mm = matchmaking

    async def JoinQueue(
        self, request: mm_pb2.JoinQueueRequest, context: Context
    ) -> mm_pb2.JoinQueueResponse:
        player = current_player()
        state = await self.mm.join_queue(
            player.player_id,
            GAMES.get(request.game, ""),
            request.seats,
            request.stake,
            request.request_id,
            name=player.name,
            client_seed=request.client_seed,
            will_contribute=request.will_contribute,
        )
        return mm_pb2.JoinQueueResponse(ticket=ticket_message(state))

    async def CancelQueue(
        self, request: mm_pb2.CancelQueueRequest, context: Context
    ) -> mm_pb2.CancelQueueResponse:
        player = current_player()
        state = await self.mm.cancel(player.player_id, _ticket_id(request.ticket_id))
        return mm_pb2.CancelQueueResponse(ticket=ticket_message(state))

    async def WatchQueue(
        self, request: mm_pb2.WatchQueueRequest, context: Context
    ) -> AsyncIterator[mm_pb2.WatchQueueResponse]:
        player = current_player()
        async for state in self.mm.watch(player.player_id, _ticket_id(request.ticket_id)):
            yield mm_pb2.WatchQueueResponse(ticket=ticket_message(state))

    async def CreatePrivateTable(
        self, request: mm_pb2.CreatePrivateTableRequest, context: Context
    ) -> mm_pb2.CreatePrivateTableResponse:
        player = current_player()
        private = await self.mm.create_private(
            player.player_id,
            request.settings,
            request.request_id,
            name=player.name,
            client_seed=request.client_seed,
            will_contribute=request.will_contribute,
        )
        return mm_pb2.CreatePrivateTableResponse(
            invite_code=private.invite_code,
            table_id=private.table_id,
            expire_time=_timestamp(private.expire_ms),
        )

    async def JoinByCode(
        self, request: mm_pb2.JoinByCodeRequest, context: Context
    ) -> mm_pb2.JoinByCodeResponse:
        player = current_player()
        seating = await self.mm.join_by_code(
            player.player_id,
            request.invite_code,
            request.request_id,
            name=player.name,
            client_seed=request.client_seed,
            will_contribute=request.will_contribute,
        )
        return mm_pb2.JoinByCodeResponse(table_id=seating.table_id, seat=seating.seat)

    async def GetMyTable(
        self, request: mm_pb2.GetMyTableRequest, context: Context
    ) -> mm_pb2.GetMyTableResponse:
        player = current_player()
        seating = await self.mm.my_table(player.player_id)
        assert seating is not None  # my_table raises NOT_FOUND instead of answering None
        return mm_pb2.GetMyTableResponse(
            table_id=seating.table_id,
            seat=seating.seat,
            game=GAME_ENUMS.get(seating.game, 0),  # type: ignore[arg-type]
        )

    async def ListOffers(
        self, request: mm_pb2.ListOffersRequest, context: Context
    ) -> mm_pb2.ListOffersResponse:
        current_player()  # signed-in players only, like every call here
        turn_seconds, pause_ms = self.mm.timers()
        offers = []
        for game, stakes, seats in self.mm.offers():
            offer = mm_pb2.GameOffer(
                game=GAME_ENUMS.get(game, 0),  # type: ignore[arg-type]
                stakes=stakes,
                seats=seats,
            )
            offer.turn_time.FromSeconds(turn_seconds)
            offer.next_round_pause.FromMilliseconds(pause_ms)
            offers.append(offer)
        return mm_pb2.ListOffersResponse(offers=offers)
