"""A Kishpa bot that plays through the table service's gRPC API (tests, benchmarks, tools).

It sees only what its player sees (the ``TableView`` of its own token) and asks the pure
bot of ``games.kishpa.bot`` for a move.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

import grpc

from games.fair import FairStream
from games.kishpa import bot
from games.kishpa import round as rnd
from kishpa.table.v1 import table_pb2, table_pb2_grpc
from services.common.auth import bearer_metadata

PHASE_NAMES = {
    table_pb2.ROUND_PHASE_START_REVEAL: rnd.START_REVEAL,
    table_pb2.ROUND_PHASE_FIRST_DISCARD: rnd.FIRST_DISCARD,
    table_pb2.ROUND_PHASE_TURNS: rnd.TURNS,
    table_pb2.ROUND_PHASE_END_REVEAL: rnd.END_REVEAL,
    table_pb2.ROUND_PHASE_ENDED: rnd.ENDED,
}


def bot_view(view: table_pb2.TableView) -> dict[str, Any] | None:
    """The round view the pure bot reads, rebuilt from the player's own TableView."""
    if not view.HasField("my_seat") or not view.HasField("round"):
        return None
    r = view.round
    return {
        "seat": view.my_seat,
        "phase": PHASE_NAMES.get(r.phase, rnd.ENDED),
        "turn": r.turn_seat if r.HasField("turn_seat") else None,
        "drew": r.turn_drew,
        "hand": [{"id": t.id, "tile": t.face} for t in r.my_rack.tiles],
        "discards": [{"id": t.id, "tile": t.face} for t in r.discards],
        "kishpa": r.kishpa.kishpa.face,
        "joker": r.kishpa.joker_face,
        "may_reveal": table_pb2.PLAYER_ACTION_REVEAL_KISHPA in view.available_actions,
        "window_waits_for_me": table_pb2.PLAYER_ACTION_DECLINE_REVEAL in view.available_actions,
    }


class BotPlayer:
    """One seat played by the bot over gRPC with its player's token."""

    def __init__(self, channel: grpc.aio.Channel, token: str, seed: bytes) -> None:
        self.stub = table_pb2_grpc.TableServiceStub(channel)
        self.metadata: Sequence[tuple[str, str]] = bearer_metadata(token)
        self.stream = FairStream(seed, (), bot.BOT_TAG)

    async def view(self, table_id: str) -> table_pb2.TableView:
        """The player's current view."""
        response = await self.stub.GetTable(
            table_pb2.GetTableRequest(table_id=table_id), metadata=self.metadata
        )
        return response.table

    async def play(self, table_id: str, view: table_pb2.TableView) -> table_pb2.TableView | None:
        """Make the bot's move if it has one; returns the view after it, or None."""
        data = bot_view(view)
        if data is None:
            return None
        move = bot.choose_action(data, self.stream)
        if move is None:
            return None
        rid = uuid.uuid4().hex
        md = self.metadata
        if isinstance(move, rnd.Draw):
            source = (
                table_pb2.DRAW_SOURCE_DISCARD
                if move.source == rnd.DISCARD
                else table_pb2.DRAW_SOURCE_PILE
            )
            drew = await self.stub.Draw(
                table_pb2.DrawRequest(table_id=table_id, source=source, request_id=rid),
                metadata=md,
            )
            return drew.table
        if isinstance(move, rnd.Discard):
            discarded = await self.stub.Discard(
                table_pb2.DiscardRequest(table_id=table_id, tile_id=move.tile, request_id=rid),
                metadata=md,
            )
            return discarded.table
        if isinstance(move, rnd.Win):
            groups = [table_pb2.ProposedGroup(tile_ids=g) for g in move.arrangement or ()]
            won = await self.stub.Win(
                table_pb2.WinRequest(
                    table_id=table_id,
                    discard_tile_id=move.tile,
                    arrangement=groups,
                    request_id=rid,
                ),
                metadata=md,
            )
            return won.table
        if isinstance(move, rnd.Pass):
            declined = await self.stub.DeclineReveal(
                table_pb2.DeclineRevealRequest(table_id=table_id, request_id=rid), metadata=md
            )
            return declined.table
        if isinstance(move, rnd.Reveal):
            revealed = await self.stub.RevealKishpa(
                table_pb2.RevealKishpaRequest(table_id=table_id, request_id=rid), metadata=md
            )
            return revealed.table
        return None  # a move only the service makes (timeouts, closing windows)
