"""The interactive loop of ``kishpa play``: read commands, follow the table, narrate.

Two things run at once: a line reader (a daemon thread around ``input()``, so the event
loop never blocks) and the table's event stream. Events are narrated in one line each;
when the player must act, the board is drawn again with what he may do.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import threading
from collections.abc import Mapping

import grpc
from rich.console import Console
from rich.table import Table
from rich.text import Text

from cli.play.render import (
    RackTile,
    arrange,
    board,
    bowl_text,
    joker_face,
    payments_text,
    seat_name,
    tile_text,
)
from games.fair import SERVER_SEED_BYTES, FairStream
from games.kishpa import bot
from games.kishpa import round as rnd
from games.kishpa.solver import winning_discards
from games.kishpa.tiles import parse_face
from kishpa.table.v1 import table_pb2
from sdk import KishpaClient, KishpaError, events
from sdk.fairness import RoundWitness, Verification, evidence_from_record, verify_round
from sdk.views import my_seat, my_turn, turn_seat
from services.table.botclient import bot_view

PROMPT = "kishpa> "

COMMANDS: tuple[tuple[str, str], ...] = (
    ("draw  (d)", "draw a tile from the pile"),
    ("take  (t)", "take the top discard"),
    ("discard N|FACE  (x)", "discard a tile: its number in your rack, or its face (R7)"),
    ("win [N|FACE]  (w)", "discard that tile and win (no tile: the best winning discard)"),
    ("reveal  (r)", "reveal the kishpa while a reveal window is open"),
    ("pass  (p)", "do not reveal in this window"),
    ("hint  (h)", "the server's best arrangement and any winning discard"),
    ("auto  (a)", "let the bot play this move for you"),
    ("last", "make the next round the last one (the table's creator only)"),
    ("start", "start the game now with the players seated (creator only)"),
    ("Enter", "show the table again"),
    ("help  (?)", "this list"),
    ("quit  (q)", "leave (your seat is played for you until the table ends)"),
)

FRIENDLY = {
    "NOT_YOUR_TURN": "It is not your turn.",
    "MUST_DRAW_FIRST": "Draw a tile first (draw, or take the top discard).",
    "ALREADY_DREW": "You already drew this turn: discard a tile (or win).",
    "NOT_A_WINNING_HAND": "That discard does not leave a winning hand.",
    "NOT_CREATOR": "Only the table's creator may do that.",
    "WINDOW_CLOSED": "No reveal window is open now.",
    "NO_DISCARD": "There is no discard to take.",
}


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


class PlaySession:
    """One player at one table, from the keyboard."""

    def __init__(
        self,
        client: KishpaClient,
        console: Console,
        table_id: str,
        names: Mapping[str, str],
    ) -> None:
        self.client = client
        self.console = console
        self.table_id = table_id
        self.names = dict(names)
        self.view = table_pb2.TableView()
        self.closed = asyncio.Event()
        self.stream = FairStream(os.urandom(SERVER_SEED_BYTES), (), bot.BOT_TAG)
        self._reader: LineReader | None = None
        self._told: tuple[object, ...] = ()
        self.witness = RoundWitness()
        self.client_seed: str | None = None

    # ---- the loop ----------------------------------------------------------------------

    async def run(self) -> int:
        """Play until the player quits or the table closes; returns the exit code."""
        self.view = await self.client.get_table(self.table_id)
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

    def show_board(self) -> None:
        """Draw the table."""
        self.console.print(board(self.view, self.names))

    def name(self, seat: int | None) -> str:
        """A seat's name as shown ("the table" for none)."""
        return seat_name(self.view, seat, self.names)

    def names_by_player(self) -> dict[str, str]:
        """Every seated player's name as shown, by player id ("You" for the player)."""
        return {info.player_id: self.name(info.seat) for info in self.view.seats if info.player_id}

    def show_payments(self, event: table_pb2.TableEvent) -> None:
        """Who paid whom and why in a settlement (a round's start or end, a pot)."""
        lines = payments_text(event, self.names_by_player())
        if lines is not None:
            self.console.print(lines)

    # ---- what the player may do ----------------------------------------------------------

    def _may(self, action: table_pb2.PlayerAction.ValueType) -> bool:
        return action in self.view.available_actions

    def tell_what_to_do(self) -> None:
        """One line saying what the player can do now (or nothing when he waits).

        Said once per situation (events often announce the same one twice); Enter forgets
        what was said so it is said again.
        """
        view = self.view
        r = view.round
        situation = (
            r.round,
            r.pile_count,  # with the discards: a new turn is a new situation
            len(r.discards),
            r.phase,
            turn_seat(view),
            r.turn_drew,
            self._may(table_pb2.PLAYER_ACTION_REVEAL_KISHPA),
            view.status,
        )
        if situation == self._told:
            return
        self._told = situation
        if not view.HasField("round") or my_seat(view) is None:
            if view.status == table_pb2.TABLE_STATUS_WAITING:
                self.console.print("Waiting for players to join…", style="dim")
            return
        r = view.round
        if self._may(table_pb2.PLAYER_ACTION_REVEAL_KISHPA):
            self.console.print(
                "You hold the kishpa: reveal the kishpa now? (reveal / pass)", style="bold magenta"
            )
        elif my_turn(view) and r.phase == table_pb2.ROUND_PHASE_FIRST_DISCARD:
            self.console.print(
                "Your turn — you start: discard a tile (discard N)", style="bold green"
            )
            self._tell_wins()
        elif my_turn(view) and r.phase == table_pb2.ROUND_PHASE_TURNS:
            if not r.turn_drew:
                self.console.print(
                    "Your turn — draw a tile (draw) or take the top discard (take)",
                    style="bold green",
                )
            else:
                self.console.print("Now discard a tile (discard N) or win (win N)", style="green")
                self._tell_wins()

    def _tell_wins(self) -> None:
        r = self.view.round
        tiles = list(r.my_rack.tiles)
        if len(tiles) != 15 or not r.kishpa.kishpa.face:
            return
        wins = winning_discards(
            [parse_face(t.face) for t in tiles], parse_face(r.kishpa.kishpa.face)
        )
        if not wins:
            return
        rack = arrange(tiles, joker_face(self.view))
        by_id = {t.tile_id: t for t in rack.tiles}
        best = max(wins, key=lambda w: w.payout_per_loser)
        tile = by_id[tiles[best.position].id]
        self.console.print(
            f"★ You can win: win {tile.number} ({tile.face}), {best.payout_per_loser} per loser",
            style="bold yellow",
        )

    # ---- commands ----------------------------------------------------------------------

    async def command(self, line: str) -> bool:
        """Run one typed command; False when the player quits."""
        verb, _, rest = line.partition(" ")
        verb = verb.lower()
        arg = rest.strip()
        if verb in ("q", "quit", "exit"):
            return False
        try:
            await self._dispatch(verb, arg)
        except KishpaError as exc:
            self.console.print(
                Text("✗ " + FRIENDLY.get(exc.reason or "", exc.message), style="red")
            )
            if exc.code == grpc.StatusCode.UNAVAILABLE:
                self.console.print("The server cannot be reached; try again in a moment.")
        return True

    async def _dispatch(self, verb: str, arg: str) -> None:
        tid = self.table_id
        if verb == "":
            await self.refresh()
            self.show_board()
            self._told = ()
            self.tell_what_to_do()
        elif verb in ("help", "?", "h?"):
            self.show_help()
        elif verb in ("d", "draw"):
            drawn = await self.client.draw(tid)
            self.view = drawn.table
            self.console.print(
                Text("You drew ").append_text(tile_text(drawn.tile.face, joker_face(self.view)))
            )
            self.show_board()
            self.tell_what_to_do()
        elif verb in ("t", "take"):
            drawn = await self.client.draw(tid, from_discards=True)
            self.view = drawn.table
            self.console.print(
                Text("You took ").append_text(tile_text(drawn.tile.face, joker_face(self.view)))
            )
            self.show_board()
            self.tell_what_to_do()
        elif verb in ("x", "discard"):
            tile = self._tile(arg)
            if tile is not None:
                self.view = await self.client.discard(tid, tile.tile_id)
                self.console.print(
                    Text("You discarded ").append_text(tile_text(tile.face, joker_face(self.view)))
                )
        elif verb in ("w", "win"):
            await self._win(arg)
        elif verb in ("r", "reveal"):
            self.view = await self.client.reveal_kishpa(tid)
            self.console.print("You revealed the kishpa.", style="magenta")
        elif verb in ("p", "pass"):
            self.view = await self.client.decline_reveal(tid)
            self.console.print("You pass.")
        elif verb in ("h", "hint"):
            await self._hint()
        elif verb in ("a", "auto"):
            await self._auto()
        elif verb == "last":
            self.view = await self.client.press_last_round(tid)
            self.console.print(
                "Last round pressed: the next round is the final one.", style="yellow"
            )
        elif verb == "start":
            self.view = await self.client.start_game(tid)
        else:
            self.console.print(f"Unknown command {verb!r}. Type help for the list.", style="red")

    def _tile(self, arg: str) -> RackTile | None:
        rack = arrange(self.view.round.my_rack.tiles, joker_face(self.view))
        if not arg:
            self.console.print(
                "Which tile? Give its number in your rack or its face, e.g. discard 3", style="red"
            )
            return None
        tile = rack.find(arg)
        if tile is None:
            self.console.print(f"You have no tile {arg!r}.", style="red")
        return tile

    async def _win(self, arg: str) -> None:
        r = self.view.round
        rack = arrange(r.my_rack.tiles, joker_face(self.view))
        if arg:
            tile = rack.find(arg)
            if tile is None:
                self.console.print(f"You have no tile {arg!r}.", style="red")
                return
            tile_id = tile.tile_id
        else:
            tiles = list(r.my_rack.tiles)
            wins = []
            if len(tiles) == 15:
                wins = winning_discards(
                    [parse_face(t.face) for t in tiles], parse_face(r.kishpa.kishpa.face)
                )
            if not wins:
                self.console.print("No discard wins with this rack.", style="red")
                return
            tile_id = tiles[max(wins, key=lambda w: w.payout_per_loser).position].id
        won = await self.client.win(self.table_id, tile_id)
        self.view = won.table
        self.console.print(
            f"You won! {won.result.win_payout} from every other player.", style="bold yellow"
        )

    async def _hint(self) -> None:
        hint = await self.client.hint(self.table_id)
        joker = joker_face(self.view)
        text = Text("Best groups: ")
        for group in hint.groups:
            text.append("[")
            text.append(" ".join(t.face for t in group.tiles))
            text.append("] ")
        if hint.loose_tiles:
            text.append(" loose: " + " ".join(t.face for t in hint.loose_tiles), style="dim")
        self.console.print(text)
        if hint.winning_discards:
            wins = Text("Winning discards: ", style="bold yellow")
            for tile in hint.winning_discards:
                wins.append_text(tile_text(tile.face, joker)).append(" ")
            self.console.print(wins)

    async def _auto(self) -> None:
        for _ in range(3):
            await self.refresh()
            data = bot_view(self.view)
            if data is None:
                break
            data["window_waits_for_me"] = self._may(table_pb2.PLAYER_ACTION_DECLINE_REVEAL)
            move = bot.choose_action(data, self.stream)
            if move is None:
                break
            joker = joker_face(self.view)
            if isinstance(move, rnd.Draw):
                drawn = await self.client.draw(
                    self.table_id, from_discards=move.source == rnd.DISCARD
                )
                self.console.print(
                    Text("Auto: drew ").append_text(tile_text(drawn.tile.face, joker))
                )
            elif isinstance(move, rnd.Discard):
                await self.client.discard(self.table_id, move.tile)
                face = next(t.face for t in self.view.round.my_rack.tiles if t.id == move.tile)
                self.console.print(Text("Auto: discarded ").append_text(tile_text(face, joker)))
                break
            elif isinstance(move, rnd.Win):
                won = await self.client.win(self.table_id, move.tile, move.arrangement or ())
                self.console.print(
                    f"Auto: you won! {won.result.win_payout} per loser.", style="bold yellow"
                )
                break
            elif isinstance(move, rnd.Reveal):
                await self.client.reveal_kishpa(self.table_id)
                self.console.print("Auto: revealed the kishpa.", style="magenta")
                break
            else:
                await self.client.decline_reveal(self.table_id)
                self.console.print("Auto: passed.")
                break
        else:
            return
        if data is None or move is None:
            self.console.print("Nothing to do right now.", style="dim")

    def use_client_seed(self, seed: str) -> None:
        """The client seed this player handed in: each round's check includes it."""
        self.client_seed = seed
        self.witness = RoundWitness(seed)

    async def say_verdict(self, round_no: int, verdict: Verification | None) -> None:
        """Whether the round's deal matches its seeds (docs/fairness.md).

        A round whose start this session did not see (it joined a running table) is
        checked from the server's record of it instead, as ``kishpa verify`` does.
        """
        if verdict is None and my_seat(self.view) is None:
            return  # a watcher without a seat has no tiles of his own to check
        if verdict is None:
            try:
                record = await self.client.round_record(self.table_id, round_no)
            except KishpaError as exc:
                self.console.print(Text(f"Round {round_no}: not checked ({exc.message})"))
                return
            verdict = verify_round(evidence_from_record(record, self.client_seed))
        line = Text(
            f"Round {round_no}: {verdict.summary()}",
            style="green" if verdict.ok else "bold red",
        )
        self.console.print(line)

    def show_help(self) -> None:
        """The list of commands."""
        table = Table(show_header=False, box=None, padding=(0, 2))
        for command, what in COMMANDS:
            table.add_row(Text(command, style="bold"), what)
        self.console.print(table)

    # ---- following the table ---------------------------------------------------------------

    async def _watch(self, after: str) -> None:
        try:
            async for event in self.client.watch_table(self.table_id, after):
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

    async def _narrate(self, event: table_pb2.TableEvent) -> None:
        verdict = self.witness.observe_message(event)
        seat = events.seat(event)
        who = self.name(seat)
        mine = seat is not None and seat == my_seat(self.view)
        joker = joker_face(self.view)
        attention = False
        kind = events.kind(event)
        if kind == "player_joined":
            await self.refresh()
            joined = event.player_joined
            name = joined.display_name or self.names.get(joined.player_id, "")
            if mine:
                name = "You"
            self.console.print(f"{name or 'A player'} sat down in seat {(seat or 0) + 1}.")
        elif kind == "round_started":
            await self.refresh()
            self.console.print(Text(f"Round {event.round} starts.", style="bold cyan"))
            self.show_board()
            attention = True
        elif kind == "kishpa_replaced":
            replaced = event.kishpa_replaced
            self.console.print(
                f"Nobody held a joker: the kishpa is now {replaced.kishpa.face}, "
                f"joker {replaced.joker_face}."
            )
        elif kind == "reveal_window_opened":
            await self.refresh()
            attention = self._may(table_pb2.PLAYER_ACTION_REVEAL_KISHPA)
        elif kind == "kishpa_revealed":
            self.console.print(f"{who} revealed the kishpa.", style="magenta")
        elif kind == "drew" and not mine:
            if event.drew.source == table_pb2.DRAW_SOURCE_DISCARD:
                self.console.print(
                    Text(f"{who} took ")
                    .append_text(tile_text(event.drew.tile.face, joker))
                    .append(" from the discards")
                )
            else:
                self.console.print(f"{who} drew from the pile.", style="dim")
        elif kind == "discarded" and not mine:
            self.console.print(
                Text(f"{who} discarded ").append_text(tile_text(event.discarded.tile.face, joker))
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
        elif kind == "won":
            won = event.won
            groups = " ".join("[" + " ".join(t.face for t in g.tiles) + "]" for g in won.groups)
            self.console.print(
                f"{who} won, discarding {won.final_discard.face} · "
                f"{won.payout_per_loser} per loser  {groups}",
                style="bold yellow",
            )
        elif kind == "pile_exhausted":
            self.console.print("The pile ran out: nobody wins this round.", style="yellow")
        elif kind == "round_ended":
            await self.refresh()
            ended = event.round_ended
            result = f"{self.name(ended.winner_seat)} won" if ended.HasField("winner_seat") else ""
            self.console.print(
                Text(f"Round {event.round} is over: {result or 'no winner'}.", style="bold cyan")
            )
            await self.say_verdict(event.round, verdict)
        elif kind == "bowl":
            self.console.print(bowl_text(event.bowl, self.names_by_player()), style="dim")
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
        if attention:
            self.tell_what_to_do()
