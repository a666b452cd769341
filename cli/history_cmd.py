"""``kishpa history``: a player's archived games and a table's rounds; the archive's pruning.

``kishpa history`` (or ``kishpa history games``) lists the signed-in player's games, newest
first (the saved token of ``kishpa play``, ``KISHPA_TOKEN`` or ``--token``);
``kishpa history rounds TABLE`` lists the rounds of a table he played at, each verified from
its archived record with ``--verify``; ``kishpa history prune`` is the operator's retention
job on the archive database (docs/operations.md "Round archive retention").
Exit status: 0 done, 1 a round failed verification, 2 could not be read.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import sys
from collections.abc import Awaitable, Callable
from typing import Any

RESULTS = {1: "won", 2: "lost", 3: "even"}
GAMES = {1: "kishpa", 2: "hand"}


def register(subparsers: Any) -> None:
    """Add the ``history`` command group to the ``kishpa`` parser."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--token", default="", help="player token (default: the saved one)")
    common.add_argument("--json", action="store_true", help="print one JSON object a line")
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "history",
        parents=[common],
        help="your archived games, a table's rounds, the archive's retention",
    )
    parser.add_argument("--limit", type=int, default=20, help="how many games (default 20)")
    parser.set_defaults(handler=_games)
    commands = parser.add_subparsers(dest="history_command", metavar="COMMAND")
    games = commands.add_parser(
        "games", parents=[common], help="your games, newest first (the default)"
    )
    games.add_argument("--limit", type=int, default=20, help="how many games (default 20)")
    games.set_defaults(handler=_games)
    rounds = commands.add_parser(
        "rounds", parents=[common], help="the rounds of a table you played at"
    )
    rounds.add_argument("table", help="the table id")
    rounds.add_argument(
        "--verify", action="store_true", help="check each round's deal from its archived record"
    )
    rounds.set_defaults(handler=_rounds)
    from cli import history_prune

    history_prune.register(commands)


def _token(args: argparse.Namespace) -> str | None:
    from sdk.credentials import saved_token, session_file

    token = str(args.token or saved_token() or "")
    if not token:
        print(
            f"kishpa history: not signed in (no token in {session_file()}, KISHPA_TOKEN or "
            "--token); `kishpa play` saves one",
            file=sys.stderr,
        )
        return None
    return token


def _run(args: argparse.Namespace, work: Callable[[Any], Awaitable[int]]) -> int:
    from sdk import KishpaClient, KishpaError
    from sdk.client import DEFAULT_MATCHMAKING_ADDR, DEFAULT_TABLE_ADDR

    token = _token(args)
    if token is None:
        return 2

    async def main() -> int:
        async with KishpaClient(
            os.environ.get("KISHPA_MATCHMAKING_ADDR", DEFAULT_MATCHMAKING_ADDR),
            os.environ.get("KISHPA_TABLE_ADDR", DEFAULT_TABLE_ADDR),
        ) as client:
            client.use_token(token)
            try:
                return await work(client)
            except KishpaError as exc:
                print(
                    f"kishpa history: {exc.message} ({exc.reason or exc.code.name})",
                    file=sys.stderr,
                )
                return 2

    return asyncio.run(main())


def _when(stamp: Any) -> str:
    moment = dt.datetime.fromtimestamp(stamp.ToMilliseconds() / 1000, tz=dt.UTC)
    return moment.strftime("%Y-%m-%d %H:%M")


def _games(args: argparse.Namespace) -> int:
    async def work(client: Any) -> int:
        shown, token = 0, ""
        if not args.json:
            print(
                f"{'ended (UTC)':16}  {'game':6}  {'table':26} {'round':>5}  {'stake':>5}  "
                f"{'seat':>4}  {'result':6} {'net':>6}"
            )
        while shown < args.limit:
            page = await client.list_games(page_size=min(100, args.limit - shown), page_token=token)
            for g in page.games:
                row = {
                    "ended_at": _when(g.ended_at),
                    "game": GAMES.get(g.game, "?"),
                    "table_id": g.table_id,
                    "round": g.round,
                    "stake": g.stake,
                    "seat": g.seat + 1,
                    "seats": g.seat_count,
                    "result": RESULTS.get(g.result, "?"),
                    "net_tokens": g.net_tokens,
                }
                if args.json:
                    print(json.dumps(row))
                else:
                    print(
                        f"{row['ended_at']:16}  {row['game']:6}  {g.table_id:26} {g.round:>5}  "
                        f"{g.stake:>5}  {g.seat + 1:>2}/{g.seat_count}  {row['result']:6} "
                        f"{g.net_tokens:>+6}"
                    )
            shown += len(page.games)
            token = page.next_page_token
            if not token:
                break
        return 0

    return _run(args, work)


def _rounds(args: argparse.Namespace) -> int:
    from sdk.fairness import evidence_from_record, verify_round

    async def work(client: Any) -> int:
        failed, token = 0, ""
        while True:
            page = await client.list_table_rounds(args.table, page_size=100, page_token=token)
            for r in page.rounds:
                nets = {n.player_id: n.net_tokens for n in r.results}
                verdict = ""
                if args.verify and r.record_available:
                    result = verify_round(
                        evidence_from_record(await client.round_record(args.table, r.round))
                    )
                    failed += not result.ok
                    verdict = result.summary()
                row = {
                    "round": r.round,
                    "game": GAMES.get(r.game, "?"),
                    "ended_at": _when(r.ended_at),
                    "players": list(r.player_ids),
                    "nets": nets,
                    "moves": len(r.moves),
                    "batch_ids": list(r.batch_ids),
                    "verified": verdict,
                }
                if args.json:
                    print(json.dumps(row))
                else:
                    paid = ", ".join(f"{p} {n:+d}" for p, n in nets.items()) or "-"
                    print(
                        f"round {r.round:>3}  {row['ended_at']}  {len(r.moves):>3} moves  "
                        f"{paid}" + (f"  {verdict}" if verdict else "")
                    )
            token = page.next_page_token
            if not token:
                return 1 if failed else 0

    return _run(args, work)
