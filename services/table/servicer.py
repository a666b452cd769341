"""kishpa.table.v1 TableService: proto -> domain -> proto, nothing else.

The player always comes from the token (``services.common.auth``); errors are raised as
``ServiceError``/rules errors and mapped to statuses by ``services.common.errors``.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any

import grpc

from kishpa.table.v1 import table_pb2, table_pb2_grpc
from services.common.auth import Service, current_caller, current_player, require_service
from services.common.errors import InvalidArgument, NotFound, PermissionDenied
from services.table.convert import Converter, groups_from, settings_from
from services.table.engine import Action, TableSettings
from services.table.history import History, personal
from services.table.round_record import round_record
from services.table.service import ActResult, Tables
from services.table.watch_responses import WatchResponses
from services.table.wire_enums import DRAW_SOURCE_NAMES, GROUP_KIND_NAMES, RUN_END_NAMES

MAX_TABLE_ID = 64
MAX_CLOSE_REASON = 500
EVENT_ID = re.compile(r"\d{1,20}-\d{1,20}")
Context = grpc.aio.ServicerContext[Any, Any]


def _table_id(value: str) -> str:
    if not value or len(value) > MAX_TABLE_ID:
        raise InvalidArgument("BAD_TABLE_ID", f"table_id must be 1-{MAX_TABLE_ID} characters")
    return value


def _player() -> tuple[str, str]:
    player = current_player()
    return player.player_id, player.name


def _seating(explicit: str, explicit_name: str) -> tuple[str, str, str | None]:
    """Who sits down (the caller, or for a service caller the named player), his name, and
    whose view answers: a service sees the table as a spectator, never a hand."""
    if isinstance(current_caller(), Service):
        if not explicit:
            raise InvalidArgument("PLAYER_REQUIRED", "a service must name the player to seat")
        return explicit, explicit_name, ""
    player_id, name = _player()
    if explicit and explicit != player_id:
        raise PermissionDenied("NOT_YOURSELF", "a player may only seat himself")
    return player_id, name, None


class TableServicer(table_pb2_grpc.TableServiceServicer):
    """The table RPCs over :class:`~services.table.service.Tables`."""

    def __init__(
        self,
        tables: Tables,
        defaults: TableSettings | None = None,
        history: History | None = None,
    ) -> None:
        self.tables = tables
        self.defaults = defaults or TableSettings()
        self.history = history
        self.convert = Converter(tables.face)
        self.responses = WatchResponses(self.convert)

    def _view(self, result: ActResult) -> table_pb2.TableView:
        return self.convert.view(result.view)

    async def _act(self, table_id: str, kind: str, request_id: str, **args: Any) -> ActResult:
        player_id, _ = _player()
        return await self.tables.act(
            player_id, _table_id(table_id), Action(kind, args), request_id=request_id
        )

    async def CreateTable(
        self, request: table_pb2.CreateTableRequest, context: Context
    ) -> table_pb2.CreateTableResponse:
        game, settings = settings_from(request.settings, self.defaults)
        if not game:
            raise InvalidArgument("BAD_GAME", "settings.game must name a game")
        viewer: str | None = None
        if isinstance(current_caller(), Service):
            if not request.players:
                raise InvalidArgument("PLAYER_REQUIRED", "a service must name the players")
            players = [(p.player_id, p.display_name) for p in request.players]
            seeds = {p.player_id: p.client_seed for p in request.players if p.client_seed}
            declared = [p.player_id for p in request.players if p.will_contribute]
            viewer = ""
        else:
            if request.players or request.auto_start:
                raise PermissionDenied(
                    "SERVICE_REQUIRED", "only a service may seat others or auto-start"
                )
            players = [_player()]
            seeds = {players[0][0]: request.client_seed} if request.client_seed else {}
            declared = [players[0][0]] if request.will_contribute else []
        result = await self.tables.create(
            players[0][0],
            settings,
            game=game,
            players=players,
            client_seeds=seeds,
            will_contribute=declared,
            auto_start=request.auto_start,
            request_id=request.request_id,
            viewer=viewer,
        )
        return table_pb2.CreateTableResponse(table=self._view(result))

    async def JoinTable(
        self, request: table_pb2.JoinTableRequest, context: Context
    ) -> table_pb2.JoinTableResponse:
        player_id, name, viewer = _seating(request.player_id, request.display_name)
        result = await self.tables.join(
            player_id,
            _table_id(request.table_id),
            name=name,
            client_seed=request.client_seed,
            will_contribute=request.will_contribute,
            request_id=request.request_id,
            viewer=viewer,
        )
        return table_pb2.JoinTableResponse(table=self._view(result))

    async def LeaveTable(
        self, request: table_pb2.LeaveTableRequest, context: Context
    ) -> table_pb2.LeaveTableResponse:
        player_id, _ = _player()
        result = await self.tables.leave(
            player_id, _table_id(request.table_id), request_id=request.request_id
        )
        return table_pb2.LeaveTableResponse(table=self._view(result))

    async def StartGame(
        self, request: table_pb2.StartGameRequest, context: Context
    ) -> table_pb2.StartGameResponse:
        player_id, _ = _player()
        result = await self.tables.start(
            player_id, _table_id(request.table_id), request_id=request.request_id
        )
        return table_pb2.StartGameResponse(table=self._view(result))

    async def GetTable(
        self, request: table_pb2.GetTableRequest, context: Context
    ) -> table_pb2.GetTableResponse:
        # A service (matchmaking) reads a table as a spectator: public facts, never a hand.
        viewer = "" if isinstance(current_caller(), Service) else _player()[0]
        view = await self.tables.view(viewer, _table_id(request.table_id))
        return table_pb2.GetTableResponse(table=self.convert.view(view))

    async def Draw(
        self, request: table_pb2.DrawRequest, context: Context
    ) -> table_pb2.DrawResponse:
        source = DRAW_SOURCE_NAMES.get(request.source)
        if source is None:
            raise InvalidArgument("BAD_SOURCE", "source must be DRAW_SOURCE_PILE or _DISCARD")
        result = await self._act(request.table_id, "draw", request.request_id, source=source)
        response = table_pb2.DrawResponse(table=self._view(result))
        if "tile_id" in result.result:
            game = result.view.table.game_name
            response.tile.CopyFrom(self.convert.tile(game, int(result.result["tile_id"])))
        return response

    async def Discard(
        self, request: table_pb2.DiscardRequest, context: Context
    ) -> table_pb2.DiscardResponse:
        result = await self._act(
            request.table_id, "discard", request.request_id, tile=request.tile_id
        )
        return table_pb2.DiscardResponse(table=self._view(result))

    async def Win(self, request: table_pb2.WinRequest, context: Context) -> table_pb2.WinResponse:
        result = await self._act(
            request.table_id,
            "win",
            request.request_id,
            tile=request.discard_tile_id,
            arrangement=groups_from(request.arrangement),
        )
        view = self._view(result)
        return table_pb2.WinResponse(result=view.round.result, table=view)

    async def RevealKishpa(
        self, request: table_pb2.RevealKishpaRequest, context: Context
    ) -> table_pb2.RevealKishpaResponse:
        result = await self._act(request.table_id, "reveal", request.request_id)
        return table_pb2.RevealKishpaResponse(table=self._view(result))

    async def DeclineReveal(
        self, request: table_pb2.DeclineRevealRequest, context: Context
    ) -> table_pb2.DeclineRevealResponse:
        result = await self._act(request.table_id, "decline_reveal", request.request_id)
        return table_pb2.DeclineRevealResponse(table=self._view(result))

    async def PressLastRound(
        self, request: table_pb2.PressLastRoundRequest, context: Context
    ) -> table_pb2.PressLastRoundResponse:
        player_id, _ = _player()
        result = await self.tables.press_last_round(
            player_id, _table_id(request.table_id), request_id=request.request_id
        )
        return table_pb2.PressLastRoundResponse(table=self._view(result))

    async def SetRackOrder(
        self, request: table_pb2.SetRackOrderRequest, context: Context
    ) -> table_pb2.SetRackOrderResponse:
        player_id, _ = _player()
        result = await self.tables.set_rack_order(
            player_id,
            _table_id(request.table_id),
            list(request.tile_ids),
            request_id=request.request_id,
        )
        game = result.view.table.game_name
        return table_pb2.SetRackOrderResponse(
            rack=table_pb2.Rack(tiles=self.convert.tiles(game, result.view.my_tiles))
        )

    async def GetHint(
        self, request: table_pb2.GetHintRequest, context: Context
    ) -> table_pb2.GetHintResponse:
        player_id, _ = _player()
        table_id = _table_id(request.table_id)
        game, hint = await self.tables.hint(player_id, table_id)
        return self.convert.hint(game, hint)

    async def LayMelds(
        self, request: table_pb2.LayMeldsRequest, context: Context
    ) -> table_pb2.LayMeldsResponse:
        melds = [
            {"cards": list(m.tile_ids), "kind": GROUP_KIND_NAMES.get(m.kind)} for m in request.melds
        ]
        result = await self._act(request.table_id, "lay_melds", request.request_id, melds=melds)
        return table_pb2.LayMeldsResponse(table=self._view(result))

    async def LayOff(
        self, request: table_pb2.LayOffRequest, context: Context
    ) -> table_pb2.LayOffResponse:
        result = await self._act(
            request.table_id,
            "lay_off",
            request.request_id,
            meld_id=request.meld_id,
            tile=request.tile_id,
            end=RUN_END_NAMES.get(request.end),
        )
        return table_pb2.LayOffResponse(table=self._view(result))

    async def ReleaseJoker(
        self, request: table_pb2.ReleaseJokerRequest, context: Context
    ) -> table_pb2.ReleaseJokerResponse:
        result = await self._act(
            request.table_id,
            "release_joker",
            request.request_id,
            meld_id=request.meld_id,
            tiles=list(request.tile_ids),
        )
        return table_pb2.ReleaseJokerResponse(table=self._view(result))

    async def UndoTurn(
        self, request: table_pb2.UndoTurnRequest, context: Context
    ) -> table_pb2.UndoTurnResponse:
        result = await self._act(request.table_id, "undo_turn", request.request_id)
        return table_pb2.UndoTurnResponse(table=self._view(result))

    async def GetRoundRecord(
        self, request: table_pb2.GetRoundRecordRequest, context: Context
    ) -> table_pb2.GetRoundRecordResponse:
        player_id, _ = _player()
        table_id = _table_id(request.table_id)
        if request.round < 1:
            raise NotFound("ROUND_NOT_FOUND", "rounds are numbered from 1")
        # The archive first: a settled round is there, whether or not the table still is.
        archived, known = (None, False)
        if self.history is not None:
            archived, known = await self.history.round_record(table_id, request.round)
        if archived is not None:
            record = personal(archived, player_id)
            if record is None:
                raise PermissionDenied(
                    "NOT_SEATED", f"you did not play round {request.round} of this table"
                )
        elif known:
            raise NotFound(
                "ROUND_NOT_FOUND",
                f"round {request.round} of table {table_id} is archived without its record "
                "(the table was gone before it settled)",
            )
        else:
            record = await round_record(self.tables.store, table_id, request.round, player_id)
        return table_pb2.GetRoundRecordResponse(record=record)

    async def Contribute(
        self, request: table_pb2.ContributeRequest, context: Context
    ) -> table_pb2.ContributeResponse:
        player_id, _ = _player()
        result = await self.tables.contribute(
            player_id,
            _table_id(request.table_id),
            request.deal,
            request.contribution,
            request_id=request.request_id,
        )
        return table_pb2.ContributeResponse(table=self._view(result))

    async def Ready(
        self, request: table_pb2.ReadyRequest, context: Context
    ) -> table_pb2.ReadyResponse:
        player_id, _ = _player()
        result = await self.tables.ready(
            player_id, _table_id(request.table_id), request.round, request_id=request.request_id
        )
        return table_pb2.ReadyResponse(table=self._view(result))

    async def PlayAgain(
        self, request: table_pb2.PlayAgainRequest, context: Context
    ) -> table_pb2.PlayAgainResponse:
        player_id, name = _player()
        result = await self.tables.play_again(
            player_id, _table_id(request.table_id), name=name, request_id=request.request_id
        )
        return table_pb2.PlayAgainResponse(table=self._view(result))

    async def CloseTable(
        self, request: table_pb2.CloseTableRequest, context: Context
    ) -> table_pb2.CloseTableResponse:
        require_service("wallet")
        reason = request.reason.strip()
        if not 1 <= len(reason) <= MAX_CLOSE_REASON:
            raise InvalidArgument(
                "MISSING_REASON", f"reason must be 1-{MAX_CLOSE_REASON} characters"
            )
        if not request.closed_by:
            raise InvalidArgument("MISSING_CLOSED_BY", "closed_by must name the operator")
        result, already, pending = await self.tables.close_by_operator(
            _table_id(request.table_id),
            reason=reason,
            closed_by=request.closed_by,
            request_id=request.request_id,
        )
        return table_pb2.CloseTableResponse(
            table=self._view(result), already_closed=already, unsettled_phases=pending
        )

    async def WatchTable(
        self, request: table_pb2.WatchTableRequest, context: Context
    ) -> AsyncIterator[table_pb2.WatchTableResponse]:
        player_id, _ = _player()
        if request.after_event_id and not EVENT_ID.fullmatch(request.after_event_id):
            raise InvalidArgument("BAD_EVENT_ID", "after_event_id must look like '1700000000000-0'")
        table_id = _table_id(request.table_id)
        game = await self.tables.game_of(table_id)
        watch = self.tables.watch_batches(player_id, table_id, request.after_event_id)
        async for batch in watch:
            responses = self.responses.of(game, table_id, batch, request.batched)
            for response in responses:
                yield response
            # Hold nothing of this batch while waiting for the next (see watch_batches).
            del batch, responses
