"""``kishpa play``: play Kishpa from the terminal.

Log in, then find a table — quick match (``--seats``), an invite code (``--code``), a new
private table for friends (``--private``) or one filled with bots (``--bots 3``) — and play
from the keyboard. The services are found at ``KISHPA_MATCHMAKING_ADDR`` and
``KISHPA_TABLE_ADDR`` (defaults 127.0.0.1:50053 and :50052, what ``kishpa run`` starts).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import getpass
import os
import secrets
from typing import Any

from rich.console import Console

from cli.play.bot import BotSeat
from cli.play.fill import bot_name, join_all, logged_in_bots
from cli.play.games import BY_NAME, adapter_for
from cli.play.session import PlaySession
from cli.play.uis import ui_for
from games.registry import NAMES
from kishpa.matchmaking.v1 import matchmaking_pb2 as mm_pb2
from kishpa.table.v1 import table_pb2
from sdk import KishpaClient, KishpaError
from sdk.client import DEFAULT_MATCHMAKING_ADDR, DEFAULT_TABLE_ADDR
from sdk.credentials import save_token
from shared.retry import UNREACHABLE_CODES


def register(subparsers: Any) -> None:
    """Add the ``play`` command to the ``kishpa`` parser."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "play",
        help="play Kishpa from the terminal (against bots, friends or the quick-match queue)",
        description="Play Kishpa from the keyboard. Without options: quick match at a "
        "4-seat table. Type help at the prompt for the commands.",
    )
    parser.add_argument("--name", default="", help="your display name (default: your login)")
    parser.add_argument(
        "--game", choices=NAMES, default=NAMES[0], help=f"the game (default {NAMES[0]})"
    )
    how = parser.add_mutually_exclusive_group()
    how.add_argument("--bots", type=int, metavar="N", help="a private table with N bots (1-3)")
    how.add_argument("--code", help="join the private table of this invite code")
    how.add_argument(
        "--private", action="store_true", help="create a private table and share its code"
    )
    parser.add_argument("--seats", type=int, choices=(2, 3, 4), help="table size (default 4)")
    parser.add_argument(
        "--stake",
        type=int,
        default=1,
        metavar="N",
        help="the stake to play at (default 1; the services say which they offer)",
    )
    parser.add_argument(
        "--client-seed",
        default="",
        help="your seed mixed into every shuffle (default: a random one); "
        "each round end checks it was used (docs/fairness.md)",
    )
    parser.add_argument("--turn-seconds", type=int, default=0, help="turn timer (new tables)")
    parser.add_argument("--reveal-seconds", type=int, default=0, help="reveal window (new tables)")
    parser.add_argument(
        "--pause-ms", type=int, default=0, help="pause between rounds in ms (new tables)"
    )
    parser.set_defaults(handler=handle)


def _default_name() -> str:
    try:
        return getpass.getuser()[:32] or "Player"
    except (KeyError, OSError):
        return "Player"


class Play:
    """Finding a table for the player, then handing over to the session."""

    def __init__(self, args: argparse.Namespace, console: Console) -> None:
        self.args = args
        self.console = console
        self.mm_addr = _env("KISHPA_MATCHMAKING_ADDR", DEFAULT_MATCHMAKING_ADDR)
        self.table_addr = _env("KISHPA_TABLE_ADDR", DEFAULT_TABLE_ADDR)
        self.names: dict[str, str] = {}
        self.bot_tasks: list[asyncio.Task[Any]] = []
        self.bot_clients: list[KishpaClient] = []
        self.adapter = BY_NAME[getattr(args, "game", None) or NAMES[0]]
        self.game = self.adapter.game
        # Mixed into every shuffle at the table; each round end checks it was (fairness.md).
        self.client_seed: str = getattr(args, "client_seed", "") or secrets.token_hex(8)
        self.stake = int(getattr(args, "stake", 1) or 1)

    async def run(self) -> int:
        async with KishpaClient(self.mm_addr, self.table_addr) as client:
            session = await client.login(self.args.name or _default_name())
            self.names[session.player_id] = session.display_name
            with contextlib.suppress(OSError):
                save_token(session.token)  # for `kishpa verify` later, as this player
            self.console.print(
                f"Signed in as [bold]{session.display_name}[/bold] ({session.player_id})."
            )
            table_id: str | None = None
            try:
                table_id = await self.find_table(client)
                if table_id is None:
                    return 1
                ui = ui_for(self.adapter)
                playing = PlaySession(client, self.console, table_id, self.names, ui)
                playing.use_client_seed(self.client_seed)
                return await playing.run()
            finally:
                for task in self.bot_tasks:
                    task.cancel()
                await asyncio.gather(*self.bot_tasks, return_exceptions=True)
                if table_id is not None:
                    await self.leave(client, table_id)
                for bot in self.bot_clients:
                    await bot.close()

    async def leave(self, client: KishpaClient, table_id: str) -> None:
        """On quitting, hand our seats (and our bots') to the server's auto-play, and as the
        creator end the table after the next round, so nothing is left playing forever."""
        with contextlib.suppress(KishpaError):
            view = await client.get_table(table_id)
            if view.status != table_pb2.TABLE_STATUS_PLAYING:
                return
            if view.creator_player_id == client.player_id and not view.last_round_pressed:
                await client.press_last_round(table_id)
        for player in (client, *self.bot_clients):
            with contextlib.suppress(KishpaError):
                await player.leave_table(table_id)

    async def find_table(self, client: KishpaClient) -> str | None:
        """Seat the player as asked; the table id, or None if it did not work out."""
        args = self.args
        if args.code:
            # This client contributes to every deal (PlaySession.contribute), so it says so:
            # the first deal waits for it too (docs/fairness.md).
            joined = await client.join_by_code(
                args.code, client_seed=self.client_seed, will_contribute=True
            )
            self.console.print(f"Table {joined.table_id} · you sit in seat {joined.seat + 1}.")
            return joined.table_id
        if args.bots is not None or args.private:
            bots = args.bots or 0
            seats = args.seats or (bots + 1 if bots else 4)
            if not 0 <= bots < seats:
                self.console.print(f"[red]{bots} bots do not fit at a {seats}-seat table.[/red]")
                return None
            private = await client.create_private_table(
                seats,
                game=self.game,
                turn_seconds=args.turn_seconds,
                reveal_window_seconds=args.reveal_seconds,
                next_round_pause_ms=args.pause_ms,
                stake=self.stake,
                client_seed=self.client_seed,
                will_contribute=True,
            )
            self.console.print(
                f"Table {private.table_id} · invite code [bold]{private.invite_code}[/bold]"
            )
            if bots:
                await self.add_bots(private.table_id, private.invite_code, bots)
            else:
                self.console.print(
                    "Share the code: friends join with "
                    f"[bold]kishpa play --code {private.invite_code}[/bold]. "
                    "Type start to begin with who is here."
                )
            return private.table_id
        return await self.quick_match(client, args.seats or 4)

    async def add_bots(self, table_id: str, code: str, count: int) -> None:
        """Log in ``count`` bots, seat them by the code and let them play in the background."""
        names = [bot_name(i) for i in range(count)]
        self.bot_clients = await logged_in_bots(names, self.mm_addr, self.table_addr)
        for bot, name in zip(self.bot_clients, names, strict=True):
            self.names[bot.player_id] = name
        await join_all(self.bot_clients, code)
        self.bot_tasks = [
            asyncio.create_task(BotSeat(bot, table_id, adapter_for(self.game)).play())
            for bot in self.bot_clients
        ]
        self.console.print(f"{', '.join(names)} joined. The game starts now.")

    async def quick_match(self, client: KishpaClient, seats: int) -> str | None:
        """Queue for a table of ``seats``; shows the queue until matched (Ctrl-C leaves)."""
        first = await client.join_queue(
            seats=seats,
            stake=self.stake,
            game=self.game,
            client_seed=self.client_seed,
            will_contribute=True,
        )
        ticket = first
        if first.state == mm_pb2.TICKET_STATE_MATCHED:
            self.console.print(f"Table {first.table_id} · you sit in seat {first.seat + 1}.")
            return first.table_id
        at = f" at stake {self.stake}" if self.stake != 1 else ""
        self.console.print(f"Looking for a {seats}-seat table{at}… (Ctrl-C to stop)")
        try:
            with self.console.status("waiting for players") as status:
                async for update in client.watch_queue(first.ticket_id):
                    ticket = update
                    status.update(f"{ticket.players_waiting} of {seats} players waiting")
        except asyncio.CancelledError:
            with contextlib.suppress(KishpaError):
                await client.cancel_queue(first.ticket_id)
            raise
        if ticket.state != mm_pb2.TICKET_STATE_MATCHED:
            state = mm_pb2.TicketState.Name(ticket.state).removeprefix("TICKET_STATE_").lower()
            self.console.print(f"[yellow]No table found: the ticket is {state}.[/yellow]")
            return None
        self.console.print(f"Table {ticket.table_id} · you sit in seat {ticket.seat + 1}.")
        return ticket.table_id


def _env(name: str, default: str) -> str:
    return os.environ.get(name, default)


def handle(args: argparse.Namespace) -> int:
    """Run ``kishpa play``; 0 on a normal quit."""
    console = Console(highlight=False)
    try:
        return asyncio.run(Play(args, console).run())
    except KeyboardInterrupt:
        console.print("\nBye!")
        return 0
    except KishpaError as exc:
        if exc.code in UNREACHABLE_CODES:
            console.print(
                "[red]Cannot reach the Kishpa services.[/red] "
                "Start them with [bold]make run[/bold] "
                "(or set KISHPA_MATCHMAKING_ADDR / KISHPA_TABLE_ADDR)."
            )
        else:
            console.print(f"[red]{exc.message}[/red]")
        return 1
