"""The one bot loop: a solver-driven player of either game, through the client SDK.

A bot sees only its own ``TableView``, asks its game's adapter (:mod:`cli.play.games`) for
the pure bot's move and sends it like any player would. :class:`BotSeat` reacts to the
table's event stream until the table closes (``kishpa play --bots``, ``kishpa bots``);
:class:`BotPlayer` makes one move when asked (tests and tools that drive several seats in
lock-step over one gRPC channel).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field

import grpc

from cli.play.games import KISHPA, GameAdapter
from games.fair import SERVER_SEED_BYTES, FairStream
from kishpa.table.v1 import table_pb2
from sdk import NO_RETRY, KishpaClient, KishpaError, events
from sdk.views import my_seat

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


@dataclass
class BotStats:
    """What one bot seat did."""

    moves: int = 0
    races: int = 0
    errors: list[str] = field(default_factory=list)
    rounds_ended: int = 0
    wins: int = 0
    closed: bool = False
    caught_up: int = 0
    """Times the seat was away for more than a round and reloaded the table (EVENTS_TRIMMED)."""


class BotSeat:
    """Plays one seat of one table, of either game, until the table closes."""

    def __init__(
        self,
        client: KishpaClient,
        table_id: str,
        adapter: GameAdapter = KISHPA,
        *,
        last_round_after: int | None = None,
        on_round_end: Callable[[str, int], None] | None = None,
    ) -> None:
        """``last_round_after``: as the table's creator, press last round once this many
        rounds have started (the round after is the final one; games that always play all
        their rounds ignore it)."""
        self.client = client
        self.table_id = table_id
        self.adapter = adapter
        self.stats = BotStats()
        self.stream = FairStream(os.urandom(SERVER_SEED_BYTES), (), adapter.bot_tag)
        self.last_round_after = last_round_after if adapter.presses_last_round else None
        self.on_round_end = on_round_end
        self._pressed = False

    async def play(self) -> BotStats:
        """Play until the table closes; returns what happened."""
        adapter = self.adapter
        view = await self.client.get_table(self.table_id)
        await self._act(view)

        async def caught_up() -> str:
            # Away for more than a round (the table keeps no older events): play on from
            # the table as it is now.
            nonlocal view
            view = await self.client.get_table(self.table_id)
            self.stats.caught_up += 1
            await self._act(view)
            return view.last_event_id

        async for event in self.client.watch_table(
            self.table_id, view.last_event_id, on_trimmed=caught_up
        ):
            kind, seat = events.kind(event), events.seat(event)
            if kind == adapter.round_end_kind:
                self.stats.rounds_ended += 1
                if self.on_round_end is not None:
                    self.on_round_end(self.table_id, event.round)
            elif kind == adapter.win_kind and seat == my_seat(view):
                self.stats.wins += 1
            elif kind == events.TABLE_CLOSED:
                self.stats.closed = True
                break
            if kind in adapter.wake_kinds and seat in (my_seat(view), None):
                view = await self.client.get_table(self.table_id)
                await self._act(view)
        return self.stats

    async def _act(self, view: table_pb2.TableView) -> None:
        """The seat's moves until it has none (or a refusal that is not a lost race)."""
        for _ in range(self.adapter.moves_per_wake):
            await self._maybe_press_last_round(view)
            move = self.adapter.next_move(view, self.stream)
            if move is None:
                return
            try:
                view, _ = await self.adapter.send(self.client, self.table_id, move, view)
            except KishpaError as exc:
                if exc.code == grpc.StatusCode.FAILED_PRECONDITION and exc.reason in RACE_REASONS:
                    self.stats.races += 1
                    view = await self.client.get_table(self.table_id)
                    continue
                self.stats.errors.append(f"{type(move).__name__}: {exc}")
                return
            self.stats.moves += 1

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


class BotPlayer:
    """One seat played by the bot, one move per :meth:`play`, with its player's token.

    Calls are not retried (a test sees every refusal as a :class:`~sdk.KishpaError`).
    """

    def __init__(
        self,
        channel: grpc.aio.Channel,
        token: str,
        seed: bytes,
        adapter: GameAdapter = KISHPA,
    ) -> None:
        # A bot neither declares nor contributes (games/contributions.py: bots never do).
        self.client = KishpaClient.over_channel(channel, retry=NO_RETRY, contribute=False)
        self.client.use_token(token)
        self.adapter = adapter
        self.stream = FairStream(seed, (), adapter.bot_tag)

    async def view(self, table_id: str) -> table_pb2.TableView:
        """The player's current view."""
        return await self.client.get_table(table_id)

    async def play(self, table_id: str, view: table_pb2.TableView) -> table_pb2.TableView | None:
        """Make the bot's move if it has one; returns the view after it, or None."""
        move = self.adapter.next_move(view, self.stream)
        if move is None:
            return None
        after, _ = await self.adapter.send(self.client, table_id, move, view)
        return after
