"""A solver-driven bot that plays one seat through the client SDK, like any player would.

It sees only its own ``TableView``, asks the pure strategy of ``games.kishpa.bot`` for a
move, reveals the kishpa whenever allowed, and passes in reveal windows it has no use for
(so they close early). It reacts to the table's event stream instead of polling.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field

import grpc

from games.fair import SERVER_SEED_BYTES, FairStream
from games.kishpa import bot
from games.kishpa import round as rnd
from kishpa.table.v1 import table_pb2
from sdk import KishpaClient, KishpaError, events
from sdk.views import my_seat
from services.table.botclient import bot_view

# Events after which this seat may have something to do.
WAKE_EVENTS = frozenset({"turn_started", "reveal_window_opened", "round_started"})
# A move refused for these reasons lost a race with a timer: look again, not an error.
RACE_REASONS = frozenset(
    {
        "NOT_YOUR_TURN",
        "WINDOW_CLOSED",
        "WINDOW_OPEN",
        "ALREADY_ACTED",
        "MUST_DRAW_FIRST",
        "ALREADY_DREW",
        "NO_ROUND",
        "ROUND_ENDED",
        "NOT_PLAYING",
        "TILE_NOT_IN_HAND",
    }
)
MAX_MOVES_PER_WAKE = 4


@dataclass
class BotStats:
    """What one bot seat did."""

    moves: int = 0
    races: int = 0
    errors: list[str] = field(default_factory=list)
    rounds_ended: int = 0
    wins: int = 0
    closed: bool = False


class BotSeat:
    """Plays one seat of one table until it closes (or the ``stop`` callback says so)."""

    def __init__(
        self,
        client: KishpaClient,
        table_id: str,
        *,
        last_round_after: int | None = None,
        on_round_end: Callable[[str, int], None] | None = None,
    ) -> None:
        """``last_round_after``: as the table's creator, press last round once this many
        rounds have started (the round after is the final one)."""
        self.client = client
        self.table_id = table_id
        self.stats = BotStats()
        self.stream = FairStream(os.urandom(SERVER_SEED_BYTES), (), bot.BOT_TAG)
        self.last_round_after = last_round_after
        self.on_round_end = on_round_end
        self._pressed = False

    async def play(self) -> BotStats:
        """Play until the table closes; returns what happened."""
        view = await self.client.get_table(self.table_id)
        await self._act(view)
        async for event in self.client.watch_table(self.table_id, view.last_event_id):
            kind, seat = events.kind(event), events.seat(event)
            if kind == "round_ended":
                self.stats.rounds_ended += 1
                if self.on_round_end is not None:
                    self.on_round_end(self.table_id, event.round)
            elif kind == "won" and seat == my_seat(view):
                self.stats.wins += 1
            elif kind == "table_closed":
                self.stats.closed = True
                break
            if kind in WAKE_EVENTS and (seat in (my_seat(view), None) or kind != "turn_started"):
                view = await self.client.get_table(self.table_id)
                await self._act(view)
        return self.stats

    async def _act(self, view: table_pb2.TableView) -> None:
        for _ in range(MAX_MOVES_PER_WAKE):
            await self._maybe_press_last_round(view)
            after = await self._move(view)
            if after is None:
                return
            view = after

    async def _maybe_press_last_round(self, view: table_pb2.TableView) -> None:
        if (
            self.last_round_after is None
            or self._pressed
            or view.last_round_pressed
            or view.creator_player_id != self.client.player_id
            or view.status != table_pb2.TABLE_STATUS_PLAYING
            or view.round.round < self.last_round_after
        ):
            return
        self._pressed = True
        try:
            await self.client.press_last_round(self.table_id)
        except KishpaError as exc:
            if exc.reason != "ALREADY_PRESSED":
                self.stats.errors.append(f"press last round: {exc}")

    async def _move(self, view: table_pb2.TableView) -> table_pb2.TableView | None:
        data = bot_view(view)
        if data is None:
            return None
        data["window_waits_for_me"] = (
            table_pb2.PLAYER_ACTION_DECLINE_REVEAL in view.available_actions
        )
        move = bot.choose_action(data, self.stream)
        if move is None:
            return None
        try:
            after = await self._send(move)
        except KishpaError as exc:
            if exc.code == grpc.StatusCode.FAILED_PRECONDITION and exc.reason in RACE_REASONS:
                self.stats.races += 1
                return await self.client.get_table(self.table_id)
            self.stats.errors.append(f"{type(move).__name__}: {exc}")
            return None
        self.stats.moves += 1
        return after

    async def _send(self, move: rnd.Action) -> table_pb2.TableView:
        tid = self.table_id
        if isinstance(move, rnd.Draw):
            drawn = await self.client.draw(tid, from_discards=move.source == rnd.DISCARD)
            return drawn.table
        if isinstance(move, rnd.Discard):
            return await self.client.discard(tid, move.tile)
        if isinstance(move, rnd.Win):
            won = await self.client.win(tid, move.tile, move.arrangement or ())
            return won.table
        if isinstance(move, rnd.Reveal):
            return await self.client.reveal_kishpa(tid)
        return await self.client.decline_reveal(tid)
