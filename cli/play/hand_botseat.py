"""A Hand (Rummy 51) bot that plays one seat through the client SDK, like any player would.

It sees only its own ``TableView`` (rebuilt into the seat view of ``games.hand.bot``), plays
its whole turn (draw, melds, lay-offs, joker releases, discard) when the event stream says it
is its turn, and counts deals and wins like :class:`cli.play.botseat.BotSeat`.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import grpc

from cli.play.botseat import RACE_REASONS, BotStats
from games.fair import SERVER_SEED_BYTES, FairStream
from games.hand import actions as ha
from games.hand.bot import MAX_ACTIONS_PER_TURN, next_action
from games.hand.ruleset import DEFAULT_RULES
from kishpa.table.v1 import table_pb2
from sdk import KishpaClient, KishpaError, events
from sdk.views import my_seat
from services.table.hand_botclient import BOT_TAG, bot_view

WAKE_EVENTS = frozenset({"turn_started", "deal_started"})


class HandBotSeat:
    """Plays one seat of one Hand table until it closes."""

    def __init__(
        self,
        client: KishpaClient,
        table_id: str,
        *,
        on_deal_end: Callable[[str, int], None] | None = None,
    ) -> None:
        self.client = client
        self.on_deal_end = on_deal_end
        self.table_id = table_id
        self.stats = BotStats()
        self.stream = FairStream(os.urandom(SERVER_SEED_BYTES), (), BOT_TAG)
        self.rules = DEFAULT_RULES

    async def play(self) -> BotStats:
        """Play until the table closes; returns what happened."""
        view = await self.client.get_table(self.table_id)
        await self._turn(view)
        async for event in self.client.watch_table(self.table_id, view.last_event_id):
            kind, seat = events.kind(event), events.seat(event)
            if kind == "deal_ended":
                self.stats.rounds_ended += 1
                if self.on_deal_end is not None:
                    self.on_deal_end(self.table_id, event.round)
            elif kind == "went_out" and seat == my_seat(view):
                self.stats.wins += 1
            elif kind == "table_closed":
                self.stats.closed = True
                break
            if kind in WAKE_EVENTS and seat in (my_seat(view), None):
                view = await self.client.get_table(self.table_id)
                await self._turn(view)
        return self.stats

    async def _turn(self, view: table_pb2.TableView) -> None:
        """Every action of the seat's turn, until the turn passes (or a timer took it)."""
        for _ in range(MAX_ACTIONS_PER_TURN):
            data = bot_view(view, self.rules)
            if data is None:
                return
            move = next_action(data, self.rules, self.stream)
            try:
                view = await self._send(move)
            except KishpaError as exc:
                if exc.code == grpc.StatusCode.FAILED_PRECONDITION and exc.reason in RACE_REASONS:
                    self.stats.races += 1
                    view = await self.client.get_table(self.table_id)
                    continue
                self.stats.errors.append(f"{type(move).__name__}: {exc}")
                return
            self.stats.moves += 1

    async def _send(self, move: ha.Action) -> table_pb2.TableView:
        tid = self.table_id
        client = self.client
        match move:
            case ha.DrawStock():
                return (await client.draw(tid)).table
            case ha.DrawDiscard():
                return (await client.draw(tid, from_discards=True)).table
            case ha.LayMelds(melds=melds):
                return await client.lay_melds(tid, [m.cards for m in melds])
            case ha.LayOff(meld_id=meld_id, card=card, end=end):
                return await client.lay_off(tid, meld_id, card, end=end or "")
            case ha.ReleaseJoker(meld_id=meld_id, cards=cards):
                return await client.release_joker(tid, meld_id, cards)
            case ha.Discard(card=card):
                return await client.discard(tid, card)
            case ha.UndoTurn():
                return await client.undo_turn(tid)
        raise ValueError(f"a player cannot send {move!r}")
