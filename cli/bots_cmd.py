"""``kishpa bots``: fill tables with solver-driven bots and play them to the end.

Every bot is a real player of the running stack: it logs in (its wallet is opened), sits at
a private table through matchmaking, and plays through the table service with its own
token. The first bot of each table is its creator and presses last round so the table
closes after ``--rounds`` rounds. Exit code 0 when every table closed without an error.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from cli.play.bot import BotSeat, BotStats
from cli.play.fill import bot_name, join_all, logged_in_bots
from cli.play.games import BY_NAME
from games.registry import NAMES, game
from sdk import KishpaClient, KishpaError
from sdk.client import DEFAULT_MATCHMAKING_ADDR, DEFAULT_TABLE_ADDR


def register(subparsers: Any) -> None:
    """Add the ``bots`` command to the ``kishpa`` parser."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "bots",
        help="fill tables with bots that play to the end (a load and smoke test)",
        description="Log in bots, seat them at private tables and let them play. The "
        "services are found at KISHPA_MATCHMAKING_ADDR and KISHPA_TABLE_ADDR.",
    )
    parser.add_argument("--tables", type=int, default=1, help="tables to fill (default 1)")
    parser.add_argument(
        "--game",
        choices=NAMES,
        default=NAMES[0],
        help="the game to play (hand: a game of 7 deals, --rounds is ignored)",
    )
    parser.add_argument("--seats", type=int, default=4, choices=(2, 3, 4), help="seats per table")
    parser.add_argument(
        "--stake", type=int, default=1, metavar="N", help="the tables' stake (default 1)"
    )
    parser.add_argument(
        "--rounds",
        type=_at_least_two,
        default=2,
        help="rounds per table, at least 2: last round is pressed during round R-1 (default 2)",
    )
    parser.add_argument("--turn-seconds", type=int, default=10, help="turn timer (default 10)")
    parser.add_argument(
        "--reveal-seconds", type=int, default=2, help="reveal window length (default 2)"
    )
    parser.add_argument(
        "--pause-ms", type=int, default=300, help="pause between rounds in ms (default 300)"
    )
    parser.add_argument(
        "--timeout", type=float, default=900, help="give up after this many seconds (900)"
    )
    parser.set_defaults(handler=handle)


def _at_least_two(text: str) -> int:
    value = int(text)
    if value < 2:
        raise argparse.ArgumentTypeError("a table plays at least 2 rounds")
    return value


@dataclass
class TableRun:
    """One table's bots and what they did."""

    number: int
    table_id: str = ""
    stats: list[BotStats] = field(default_factory=list)
    error: str = ""
    live: list[BotStats] = field(default_factory=list)
    """The seats' stats while they play (the live summary reads them)."""
    clients: list[KishpaClient] = field(default_factory=list)
    """The seats' clients (the live summary says which are reconnecting)."""
    reconnects: int = 0
    """Outages the table's clients rode out (each client's retries after an unreachable
    server, counted once per outage)."""

    @property
    def closed(self) -> bool:
        return bool(self.stats) and all(s.closed for s in self.stats)

    @property
    def errors(self) -> list[str]:
        found = [e for s in self.stats for e in s.errors]
        return [self.error, *found] if self.error else found


async def _run_table(
    args: argparse.Namespace, run: TableRun, progress: Progress, task: Any
) -> None:
    mm_addr = os.environ.get("KISHPA_MATCHMAKING_ADDR", DEFAULT_MATCHMAKING_ADDR)
    table_addr = os.environ.get("KISHPA_TABLE_ADDR", DEFAULT_TABLE_ADDR)
    names = [bot_name(run.number * args.seats + i) for i in range(args.seats)]
    clients: list[KishpaClient] = []
    try:
        clients = await logged_in_bots(names, mm_addr, table_addr)
        run.clients = clients
        creator, *others = clients
        adapter = BY_NAME[args.game]
        private = await creator.create_private_table(
            args.seats,
            game=adapter.game,
            turn_seconds=args.turn_seconds,
            reveal_window_seconds=args.reveal_seconds,
            next_round_pause_ms=args.pause_ms,
            stake=args.stake,
        )
        run.table_id = private.table_id
        await join_all(others, private.invite_code)

        def round_ended(table_id: str, round_no: int) -> None:
            progress.advance(task)

        seats = [
            BotSeat(
                client,
                private.table_id,
                adapter,
                last_round_after=args.rounds - 1 if client is creator else None,
                on_round_end=round_ended if client is creator else None,
            )
            for client in clients
        ]
        run.live = [s.stats for s in seats]
        run.stats = list(await asyncio.gather(*(s.play() for s in seats)))
    except KishpaError as exc:
        run.error = str(exc)
    finally:
        run.reconnects = sum(c.reconnects for c in clients)
        for client in clients:
            await client.close()


async def _run(args: argparse.Namespace, console: Console) -> list[TableRun]:
    runs = [TableRun(i) for i in range(args.tables)]
    with Progress(
        TextColumn("[bold]rounds played"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.fields[summary]}"),
        console=console,
    ) as progress:
        # A game of a fixed number of rounds (Hand's deals) ignores --rounds.
        per_table = game(args.game).fixed_rounds or args.rounds
        task = progress.add_task("rounds", total=args.tables * per_table, summary="")
        jobs = [_run_table(args, run, progress, task) for run in runs]
        ticker = asyncio.create_task(_tick(runs, progress, task))
        try:
            await asyncio.wait_for(asyncio.gather(*jobs), args.timeout)
        except TimeoutError:
            for run in runs:
                if not run.closed and not run.error:
                    run.error = f"still playing after {args.timeout:.0f}s"
        finally:
            ticker.cancel()
            _update_summary(runs, progress, task)
    return runs


def _update_summary(runs: list[TableRun], progress: Progress, task: Any) -> None:
    seats = [s for r in runs for s in r.live]
    closed = sum(bool(r.live) and all(s.closed for s in r.live) for r in runs)
    errors = sum(len(s.errors) for s in seats) + sum(bool(r.error) for r in runs)
    summary = f"tables closed {closed}/{len(runs)} · moves {sum(s.moves for s in seats)}"
    summary += f" · [red]errors {errors}[/red]" if errors else " · errors 0"
    if any(c.reconnecting for r in runs for c in r.clients):
        summary += " · [yellow]reconnecting…[/yellow]"
    progress.update(task, summary=summary)


async def _tick(runs: list[TableRun], progress: Progress, task: Any) -> None:
    """Refresh the live summary beside the progress bar."""
    while True:
        _update_summary(runs, progress, task)
        await asyncio.sleep(0.5)


def _summary(runs: list[TableRun], seconds: float, console: Console) -> bool:
    moves = sum(s.moves for r in runs for s in r.stats)
    rounds = sum(r.stats[0].rounds_ended for r in runs if r.stats)
    wins = sum(s.wins for r in runs for s in r.stats)
    races = sum(s.races for r in runs for s in r.stats)
    closed = sum(r.closed for r in runs)
    failed = [r for r in runs if r.errors or not r.closed]
    table = Table(title="kishpa bots", show_header=False, title_justify="left")
    table.add_row("tables closed", f"{closed} / {len(runs)}")
    table.add_row("rounds played", str(rounds))
    table.add_row("won / no winner", f"{wins} / {rounds - wins}")
    table.add_row("moves", f"{moves} ({moves / max(seconds, 0.001):.0f}/s)")
    table.add_row("lost races with a timer", str(races))
    table.add_row("reconnects (outages ridden out)", str(sum(r.reconnects for r in runs)))
    table.add_row("time", f"{seconds:.1f}s")
    table.add_row("errors", f"[red]{len(failed)} tables[/red]" if failed else "[green]none[/green]")
    console.print(table)
    for run in failed[:10]:
        detail = "; ".join(run.errors[:3]) or "did not close"
        console.print(f"[red]table {run.number} {run.table_id}:[/red] {detail}")
    return not failed


def handle(args: argparse.Namespace) -> int:
    """Run the bots; 0 when every table closed without errors."""
    console = Console()
    if args.tables < 1:
        console.print("[red]--tables must be at least 1[/red]")
        return 2
    started = time.monotonic()
    try:
        runs = asyncio.run(_run(args, console))
    except KeyboardInterrupt:
        console.print("[yellow]interrupted[/yellow]")
        return 130
    return 0 if _summary(runs, time.monotonic() - started, console) else 1
