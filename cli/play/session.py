"""The interactive loop of ``kishpa play``, for either game: read commands, follow the
table, narrate.

Two things run at once: a line reader (a daemon thread around ``input()``, so the event
loop never blocks) and the table's event stream. Events are narrated in one line each;
when the player must act, the board is drawn again with what he may do.

This loop is the same for every game. What differs — the board, the game's own commands
and events, the words of the rules' refusals — is the game's :class:`GameUI`
(:mod:`cli.play.kishpa_ui`, :mod:`cli.play.hand_ui`), and ``auto`` plays the move of the
game's bot adapter (:mod:`cli.play.games`), the same code the bots run.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import threading
from collections.abc import Mapping
from typing import Protocol

from rich.console import Console, RenderableType
from rich.table import Table
from rich.text import Text

from cli.play.games import GameAdapter
from cli.play.render import payments_text, seat_name
from games.fair import SERVER_SEED_BYTES, FairStream
from kishpa.table.v1 import table_pb2
from sdk import KishpaClient, KishpaError, events
from sdk.fairness import (
    RoundWitness,
    Verification,
    evidence_from_record,
    verify_round,
    with_record,
)
from sdk.views import my_seat
from shared.retry import UNREACHABLE_CODES

PROMPT = "kishpa> "

COMMON_COMMANDS: tuple[tuple[str, str], ...] = (
    ("start", "start the game now with the players seated (creator only)"),
    ("Enter", "show the table again"),
    ("help  (?)", "this list"),
    ("quit  (q)", "leave (your seat is played for you until the table ends)"),
)

COMMON_FRIENDLY = {
    "NOT_YOUR_TURN": "It is not your turn.",
    "NOT_CREATOR": "Only the table's creator may do that.",
}


class GameUI(Protocol):
    """The per-game part of a terminal session (declarations plus rendering)."""

    @property
    def adapter(self) -> GameAdapter:
        """The game's bot adapter (``auto`` plays its move)."""

    @property
    def commands(self) -> tuple[tuple[str, str], ...]:
        """The game's own commands and what they do (before the common ones in help)."""

    @property
    def friendly(self) -> Mapping[str, str]:
        """The rules' refusal reasons in words."""

    def board(self, session: PlaySession) -> RenderableType:
        """The whole table as the player sees it."""

    def situation(self, session: PlaySession) -> tuple[object, ...]:
        """What tells one situation from the next (said once each)."""

    def tell_what_to_do(self, session: PlaySession) -> None:
        """One line saying what the player can do now (the player is seated, in a round)."""

    async def command(self, session: PlaySession, verb: str, arg: str) -> bool:
        """Run one of the game's own commands; False when the verb is not one of them."""

    async def show_hint(self, session: PlaySession) -> None:
        """The server's advice, in the game's words."""

    async def narrate(self, session: PlaySession, event: table_pb2.TableEvent) -> bool:
        """Narrate one of the game's own events; True when the player should act now."""


class LineReader:
    """Reads lines from the terminal in a daemon thread, one per ``ask()``."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.lines: asyncio.Queue[str | None] = asyncio.Queue()
        self.waiting = False
        self._loop = loop
        self._ready = threading.Event()
        threading.Thread(target=self._run, name="kishpa-input", daemon=True).start()

    def ask(self) -> None:
        """Show the prompt and read the next line."""
        self._ready.set()

    def _run(self) -> None:
        while True:
            self._ready.wait()
            self._ready.clear()
            self.waiting = True
            try:
                line: str | None = input(PROMPT)
            except (EOFError, KeyboardInterrupt):
                line = None
            self.waiting = False
            self._loop.call_soon_threadsafe(self.lines.put_nowait, line)
            if line is None:
                return


RECONNECTING = "reconnecting…"
CAUGHT_UP = "You were away for more than a round: here is the table as it is now."
"""What the player sees while the client retries an unreachable server."""


class PlaySession:
    """One player at one table of any game, from the keyboard."""

    def __init__(
        self,
        client: KishpaClient,
        console: Console,
        table_id: str,
        names: Mapping[str, str],
        ui: GameUI,
    ) -> None:
        self.client = client
        self.console = console
        self.table_id = table_id
        self.names = dict(names)
        self.ui = ui
        self.view = table_pb2.TableView()
        self.closed = asyncio.Event()
        self.stream = FairStream(os.urandom(SERVER_SEED_BYTES), (), ui.adapter.bot_tag)
        self._reader: LineReader | None = None
        self._told: tuple[object, ...] = ()
        self.witness = RoundWitness(contributions=self._my_contribution)
        self.client_seed: str | None = None
        self._sent: set[int] = set()
        """Deals this session contributed to (or tried to)."""
        # While the services are unreachable the client retries (same request ids, up to
        # its budget); the player sees that instead of an error.
        client.on_reconnecting = self.show_reconnecting

    def show_reconnecting(self, reconnecting: bool) -> None:
        """Say "reconnecting…" when the client starts retrying, and when it got through."""
        if reconnecting:
            self.console.print(RECONNECTING, style="yellow")
        else:
            self.console.print("Reconnected.", style="green")
        self._reprompt()

    # ---- the loop ----------------------------------------------------------------------

    async def run(self) -> int:
        """Play until the player quits or the table closes; returns the exit code."""
        self.view = await self.client.get_table(self.table_id)
        await self.contribute(self.view.next_deal)
        self.show_board()
        self.tell_what_to_do()
        watcher = asyncio.create_task(self._watch(self.view.last_event_id))
        reader = self._reader = LineReader(asyncio.get_running_loop())
        closed = asyncio.create_task(self.closed.wait())
        try:
            reader.ask()
            while True:
                line_task = asyncio.create_task(reader.lines.get())
                done, _ = await asyncio.wait(
                    {line_task, closed}, return_when=asyncio.FIRST_COMPLETED
                )
                if line_task not in done:
                    line_task.cancel()
                    break
                line = line_task.result()
                if line is None or not await self.command(line.strip()):
                    break
                reader.ask()
        finally:
            watcher.cancel()
            closed.cancel()
            with contextlib.suppress(asyncio.CancelledError, KishpaError):
                await watcher
        self.console.print("Bye!")
        return 0

    def _reprompt(self) -> None:
        if self._reader is not None and self._reader.waiting:
            sys.stdout.write(PROMPT)
            sys.stdout.flush()

    async def refresh(self) -> table_pb2.TableView:
        """Read the table again."""
        self.view = await self.client.get_table(self.table_id)
        return self.view

    async def caught_up(self) -> str:
        """The table no longer keeps what happened while the player was away (more than a
        round, docs/api.md): show the table as it is now and follow it from there."""
        await self.refresh()
        self.console.print(CAUGHT_UP, style="yellow")
        self.show_board()
        self.tell_what_to_do()
        self._reprompt()
        return self.view.last_event_id

    def show_board(self) -> None:
        """Draw the table."""
        self.console.print(self.ui.board(self))

    def name(self, seat: int | None) -> str:
        """A seat's name as shown ("the table" for none)."""
        return seat_name(self.view, seat, self.names)

    def names_by_player(self) -> dict[str, str]:
        """Every seated player's name as shown, by player id ("You" for the player)."""
        return {info.player_id: self.name(info.seat) for info in self.view.seats if info.player_id}

    def may(self, action: table_pb2.PlayerAction.ValueType) -> bool:
        """Whether the view offers the player this action now."""
        return action in self.view.available_actions

    def tell_what_to_do(self) -> None:
        """One line saying what the player can do now (or nothing when he waits).

        Said once per situation (events often announce the same one twice); Enter forgets
        what was said so it is said again.
        """
        view = self.view
        situation = (view.status, *self.ui.situation(self))
        if situation == self._told:
            return
        self._told = situation
        if not view.HasField("round") or my_seat(view) is None:
            if view.status == table_pb2.TABLE_STATUS_WAITING:
                self.console.print("Waiting for players to join…", style="dim")
            return
        self.ui.tell_what_to_do(self)

    def show_help(self) -> None:
        """The list of commands."""
        table = Table(show_header=False, box=None, padding=(0, 2))
        for command, what in (*self.ui.commands, *COMMON_COMMANDS):
            table.add_row(Text(command, style="bold"), what)
        self.console.print(table)

    def show_payments(self, event: table_pb2.TableEvent) -> None:
        """Who paid whom and why in a settlement (a round's start or end, a pot)."""
        lines = payments_text(event, self.names_by_player())
        if lines is not None:
            self.console.print(lines)

    def use_client_seed(self, seed: str) -> None:
        """The client seed this player handed in: each round's check includes it."""
        self.client_seed = seed
        self.witness = RoundWitness(seed, contributions=self._my_contribution)

    def _my_contribution(self, deal: int) -> str | None:
        """What this client contributed to ``deal`` (the SDK keeps it)."""
        return self.client.my_contribution(self.table_id, deal)

    async def contribute(self, deal: int) -> None:
        """Make sure this player's random contribution to the coming deal is sent once its
        commitment is out (docs/fairness.md): a deal he contributed to is one the server
        could not choose. The SDK sends it at once by itself (sdk/contributing.py); this
        covers a deal it has not tried yet. Too late (already dealt) is no error: that deal
        is checked all the same, and the verdict names the contribution that is in it."""
        if deal <= 0 or deal in self._sent or my_seat(self.view) is None:
            return
        self._sent.add(deal)
        with contextlib.suppress(KishpaError):
            await self.client.contribute_once(self.table_id, deal)

    async def ready(self, round_no: int) -> None:
        """The round's summary is printed (it stays in the terminal): ready for the next
        deal, so the table need not wait out its pause for this player."""
        if my_seat(self.view) is None or self.view.status != table_pb2.TABLE_STATUS_PLAYING:
            return
        try:
            self.view = await self.client.ready(self.table_id, round_no)
        except KishpaError:
            return  # the round is not over yet for the server, or the next was dealt

    async def say_verdict(self, round_no: int, verdict: Verification | None) -> None:
        """Whether the round's deal matches its seeds, the whole table (docs/fairness.md):
        the server's record of the round (every hand, every draw) checked against the seeds
        and against what this session saw live. Without a record, the live check of his own
        tiles is said."""
        if verdict is None and my_seat(self.view) is None:
            return  # a watcher without a seat has no tiles of his own to check
        try:
            record = await self.client.round_record(self.table_id, round_no)
        except KishpaError as exc:
            if verdict is None:
                self.console.print(Text(f"Round {round_no}: not checked ({exc.message})"))
                return
        else:
            evidence = evidence_from_record(
                record,
                self.client_seed,
                my_contribution=self._my_contribution(round_no),
                i_declared=True,  # this client declares at every seat it takes
            )
            verdict = verify_round(with_record(self.witness.ended(round_no), evidence))
        line = Text(
            f"Round {round_no}: {verdict.summary()}",
            style="green" if verdict.ok else "bold red",
        )
        self.console.print(line)

    # ---- commands ----------------------------------------------------------------------

    async def command(self, line: str) -> bool:
        """Run one typed command; False when the player quits."""
        verb, _, rest = line.partition(" ")
        verb = verb.lower()
        if verb in ("q", "quit", "exit"):
            return False
        try:
            await self._dispatch(verb, rest.strip())
        except KishpaError as exc:
            words = {**COMMON_FRIENDLY, **self.ui.friendly}.get(exc.reason or "", exc.message)
            self.console.print(Text("✗ " + words, style="red"))
            if exc.code in UNREACHABLE_CODES:
                self.console.print("The server cannot be reached; try again in a moment.")
        return True

    async def _dispatch(self, verb: str, arg: str) -> None:
        if verb == "":
            await self.refresh()
            self.show_board()
            self._told = ()
            self.tell_what_to_do()
        elif verb in ("help", "?", "h?"):
            self.show_help()
        elif verb in ("a", "auto"):
            await self.auto()
        elif verb in ("h", "hint"):
            await self.ui.show_hint(self)
        elif verb == "start":
            self.view = await self.client.start_game(self.table_id)
        elif not await self.ui.command(self, verb, arg):
            self.console.print(f"Unknown command {verb!r}. Type help for the list.", style="red")

    async def auto(self) -> None:
        """The game's bot plays the player's move (the rest of his turn): the same adapter
        and the same moves as ``kishpa bots``."""
        adapter = self.ui.adapter
        for _ in range(adapter.moves_per_wake):
            await self.refresh()
            move = adapter.next_move(self.view, self.stream)
            if move is None:
                self.console.print("Nothing to do right now.", style="dim")
                return
            self.view, said = await adapter.send(self.client, self.table_id, move, self.view)
            self.console.print(Text("Auto: ").append_text(said))
            if adapter.ends_turn(move):
                return

    # ---- following the table -------------------------------------------------------------

    async def _watch(self, after: str) -> None:
        try:
            async for event in self.client.watch_table(
                self.table_id, after, on_trimmed=self.caught_up
            ):
                await self.on_event(event)
        except KishpaError as exc:
            self.console.print(f"Lost the table: {exc.message}", style="red")
        finally:
            self.closed.set()

    async def on_event(self, event: table_pb2.TableEvent) -> None:
        """Narrate one event; draw the board when the player must act.

        While the prompt waits for a line, narration first erases the prompt and then
        shows it again below, so the terminal reads as a conversation.
        """
        with self.console.capture() as captured:
            await self._narrate(event)
        text = captured.get()
        if not text:
            return  # nothing to say: leave the prompt (and what is being typed) alone
        reader = self._reader
        waiting = reader is not None and reader.waiting
        if waiting and sys.stdout.isatty():
            sys.stdout.write("\r\x1b[2K")
        elif waiting:
            sys.stdout.write("\n")
        sys.stdout.write(text)
        sys.stdout.flush()
        if waiting:
            self._reprompt()

    def mine(self, event: table_pb2.TableEvent) -> bool:
        """Whether the event is about the player's own seat."""
        seat = events.seat(event)
        return seat is not None and seat == my_seat(self.view)

    async def _narrate(self, event: table_pb2.TableEvent) -> None:
        """The events every game has; the game's own go to its UI."""
        verdict = self.witness.observe_message(event)
        kind = events.kind(event)
        seat = events.seat(event)
        who = self.name(seat)
        mine = self.mine(event)
        attention = False
        if kind == "player_joined":
            await self.refresh()
            joined = event.player_joined
            name = joined.display_name or self.names.get(joined.player_id, "")
            self.console.print(
                f"{'You' if mine else name or 'A player'} sat down in seat {(seat or 0) + 1}."
            )
        elif kind == "turn_started" and mine:
            await self.refresh()
            self.show_board()
            attention = True
        elif kind == "turn_timed_out":
            self.console.print(
                f"{who} ran out of time; the server played the turn.", style="yellow"
            )
        elif kind == "autoplay_on" and mine:
            self.console.print(
                "You timed out repeatedly: the server plays for you until you act.", style="yellow"
            )
        elif kind == "seed_committed":
            await self.contribute(event.seed_committed.deal)
        elif kind == "settled":
            self.show_payments(event)
        elif kind == "last_round_pressed":
            self.console.print(
                f"Last round pressed: round {event.last_round_pressed.next_round} is the final "
                "one.",
                style="yellow",
            )
        elif kind == "table_closed":
            await self.refresh()
            self.show_board()
            self.console.print("The table has closed. Thanks for playing!", style="bold")
        else:
            attention = await self.ui.narrate(self, event)
        if kind in ("round_ended", "seed_revealed"):  # a Kishpa round, a Hand deal
            await self.say_verdict(event.round, verdict)
            await self.ready(event.round)
        if attention:
            self.tell_what_to_do()
