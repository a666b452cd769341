"""kishpa.table.v1 HistoryService: players' games and tables' rounds from the round archive.

A player sees only his own games and the rounds he sat in; a service caller names the
player (ListPlayerGames) and sees every round of a table, and so does an operator (support).
"""

from __future__ import annotations

from typing import Any

import grpc

from kishpa.table.v1 import history_pb2, history_pb2_grpc
from services.common.auth import Admin, Service, current_caller, current_player
from services.common.errors import InvalidArgument, NotFound, PermissionDenied
from services.table.history import History, game_proto, page_size, round_proto

MAX_TABLE_ID = 64
MAX_PLAYER_ID = 120
Context = grpc.aio.ServicerContext[Any, Any]


def _privileged() -> bool:
    """A service or an operator (support): may read any player's history."""
    return isinstance(current_caller(), Service | Admin)


def _whose_games(named: str) -> str:
    if len(named) > MAX_PLAYER_ID:
        raise InvalidArgument("PLAYER_REQUIRED", f"player_id is at most {MAX_PLAYER_ID} characters")
    if _privileged():
        if not named:
            raise InvalidArgument("PLAYER_REQUIRED", "a service or operator must name the player")
        return named
    player_id = current_player().player_id
    if named and named != player_id:
        raise PermissionDenied("NOT_YOURSELF", "a player may list only his own games")
    return player_id


class HistoryServicer(history_pb2_grpc.HistoryServiceServicer):
    """The history RPCs over :class:`~services.table.history.History`."""

    def __init__(self, history: History) -> None:
        self.history = history

    async def ListPlayerGames(
        self, request: history_pb2.ListPlayerGamesRequest, context: Context
    ) -> history_pb2.ListPlayerGamesResponse:
        size = page_size(request.page_size)
        player_id = _whose_games(request.player_id)
        games, token = await self.history.player_games(player_id, size, request.page_token)
        return history_pb2.ListPlayerGamesResponse(
            games=[game_proto(g) for g in games], next_page_token=token
        )

    async def ListTableRounds(
        self, request: history_pb2.ListTableRoundsRequest, context: Context
    ) -> history_pb2.ListTableRoundsResponse:
        table_id = request.table_id
        if not table_id or len(table_id) > MAX_TABLE_ID:
            raise InvalidArgument("BAD_TABLE_ID", f"table_id must be 1-{MAX_TABLE_ID} characters")
        size = page_size(request.page_size)
        viewer = None if _privileged() else current_player().player_id
        if viewer is not None:
            seated = await self.history.sat_at(table_id, viewer)
            if seated is None:
                raise NotFound("TABLE_NOT_FOUND", f"no archived round of table {table_id!r}")
            if not seated:
                raise PermissionDenied("NOT_SEATED", "you played no archived round of this table")
        rows, token = await self.history.table_rounds(table_id, size, request.page_token)
        if viewer is None and not rows and not request.page_token:
            raise NotFound("TABLE_NOT_FOUND", f"no archived round of table {table_id!r}")
        shown = [r for r in rows if viewer is None or viewer in r.players]
        return history_pb2.ListTableRoundsResponse(
            rounds=[round_proto(r) for r in shown], next_page_token=token
        )
