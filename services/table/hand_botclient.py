"""A Hand bot that plays through the table service's gRPC API (tests, tools).

It sees only what its player sees (the ``TableView`` of its own token), rebuilds the seat
view the pure bot reads (``games.hand.bot.next_action``) and sends the move as an RPC.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

import grpc

from games.fair import FairStream
from games.hand import actions as ha
from games.hand.bot import next_action
from games.hand.deal_state import Phase
from games.hand.melds import MeldKind, make_meld
from games.hand.ruleset import DEFAULT_RULES, RuleSet
from kishpa.common.v1 import common_pb2
from kishpa.table.v1 import table_pb2, table_pb2_grpc
from services.common.auth import bearer_metadata

BOT_TAG = "kishpa/hand/v1/botclient"
KINDS = {common_pb2.GROUP_KIND_RUN: MeldKind.RUN, common_pb2.GROUP_KIND_SET: MeldKind.SET}
RUN_ENDS = {"low": table_pb2.RUN_END_LOW, "high": table_pb2.RUN_END_HIGH}


def bot_view(view: table_pb2.TableView, rules: RuleSet = DEFAULT_RULES) -> dict[str, Any] | None:
    """The seat view the pure bot reads, when it is this player's turn (else None)."""
    if not view.HasField("my_seat") or not view.HasField("round"):
        return None
    if not view.round.HasField("turn_seat") or view.round.turn_seat != view.my_seat:
        return None
    if view.status != table_pb2.TABLE_STATUS_PLAYING:
        return None
    r = view.round
    if r.phase != table_pb2.ROUND_PHASE_TURNS or not r.HasField("hand"):
        return None
    hand = r.hand
    melds = []
    for m in hand.melds:
        kind = KINDS.get(m.kind)
        meld = make_meld([t.id for t in m.cards], m.seat, rules, kind)
        melds.append(meld.to_dict())
    opened = set(hand.opened_seats)
    seats = len(view.seats)
    return {
        "seat": view.my_seat,
        "phase": Phase.PLAY.value if r.turn_drew else Phase.DRAW.value,
        "hand": [t.id for t in r.my_rack.tiles],
        "discard_pile": [t.id for t in r.discards],
        "melds": melds,
        "opened": [s in opened for s in range(seats)],
        # Only the default lay-off ruling reads these; "opened before this turn" suffices.
        "opened_turn": [0 if s in opened else -1 for s in range(seats)],
        "turn_no": 1,
        "must_use": hand.must_use.id if hand.HasField("must_use") else None,
    }


class HandBotPlayer:
    """One seat played by the Hand bot over gRPC with its player's token."""

    def __init__(self, channel: grpc.aio.Channel, token: str, seed: bytes) -> None:
        self.stub = table_pb2_grpc.TableServiceStub(channel)
        self.metadata: Sequence[tuple[str, str]] = bearer_metadata(token)
        self.stream = FairStream(seed, (), BOT_TAG)
        self.rules = DEFAULT_RULES

    async def view(self, table_id: str) -> table_pb2.TableView:
        """The player's current view."""
        response = await self.stub.GetTable(
            table_pb2.GetTableRequest(table_id=table_id), metadata=self.metadata
        )
        return response.table

    async def play(self, table_id: str, view: table_pb2.TableView) -> table_pb2.TableView | None:
        """Make the bot's next move if it is the player's turn; the view after it, or None."""
        data = bot_view(view, self.rules)
        if data is None:
            return None
        return await self.send(table_id, next_action(data, self.rules, self.stream))

    async def send(self, table_id: str, move: ha.Action) -> table_pb2.TableView:
        """One rules action as its RPC (a fresh request id)."""
        rid = uuid.uuid4().hex
        md = self.metadata
        stub = self.stub
        match move:
            case ha.DrawStock() | ha.DrawDiscard():
                source = (
                    table_pb2.DRAW_SOURCE_DISCARD
                    if isinstance(move, ha.DrawDiscard)
                    else table_pb2.DRAW_SOURCE_PILE
                )
                drew = await stub.Draw(
                    table_pb2.DrawRequest(table_id=table_id, source=source, request_id=rid),
                    metadata=md,
                )
                return drew.table
            case ha.LayMelds(melds=melds):
                laid = await stub.LayMelds(
                    table_pb2.LayMeldsRequest(
                        table_id=table_id,
                        melds=[table_pb2.ProposedMeld(tile_ids=list(m.cards)) for m in melds],
                        request_id=rid,
                    ),
                    metadata=md,
                )
                return laid.table
            case ha.LayOff(meld_id=meld_id, card=card, end=end):
                off = await stub.LayOff(
                    table_pb2.LayOffRequest(
                        table_id=table_id,
                        meld_id=meld_id,
                        tile_id=card,
                        end=RUN_ENDS.get(end or "", table_pb2.RUN_END_UNSPECIFIED),
                        request_id=rid,
                    ),
                    metadata=md,
                )
                return off.table
            case ha.ReleaseJoker(meld_id=meld_id, cards=cards):
                released = await stub.ReleaseJoker(
                    table_pb2.ReleaseJokerRequest(
                        table_id=table_id, meld_id=meld_id, tile_ids=list(cards), request_id=rid
                    ),
                    metadata=md,
                )
                return released.table
            case ha.Discard(card=card):
                discarded = await stub.Discard(
                    table_pb2.DiscardRequest(table_id=table_id, tile_id=card, request_id=rid),
                    metadata=md,
                )
                return discarded.table
            case ha.UndoTurn():
                undone = await stub.UndoTurn(
                    table_pb2.UndoTurnRequest(table_id=table_id, request_id=rid), metadata=md
                )
                return undone.table
        raise ValueError(f"a player cannot send {move!r}")
