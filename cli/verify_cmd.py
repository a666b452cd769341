"""``kishpa verify --table T --round R``: check that a past round was dealt from its seeds.

Signs in with the saved token of ``kishpa play`` (or ``KISHPA_TOKEN`` / ``--token``), asks
the table service for the round's record (once the seed is revealed: every seat's dealt
tiles, every draw, the kishpa, dolls and replacement, and the order of the commitment and the
contributions) and recomputes the whole table with the SDK's own implementation of
docs/fairness.md: "table verified" or each failed check. Exit status: 0 verified, 1 not
verified (each failed check is printed), 2 the record could not be had (not signed in, no
such round, not one of its players).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from typing import Any


def register(subparsers: Any) -> None:
    """Add the ``verify`` command to the ``kishpa`` parser."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "verify", help="check that a round you played was dealt from its revealed seed"
    )
    parser.add_argument("--table", required=True, help="the table id")
    parser.add_argument("--round", type=int, required=True, help="the round number, from 1")
    parser.add_argument("--token", default="", help="player token (default: the saved one)")
    parser.add_argument(
        "--client-seed", default=None, help="the client seed you handed in, to check it was used"
    )
    parser.add_argument(
        "--contribution",
        default=None,
        help="the contribution your client sent to this deal, to check it is in it",
    )
    parser.add_argument("--json", action="store_true", help="print the verdict as JSON")
    parser.set_defaults(handler=handle)


async def _verify(args: argparse.Namespace, token: str) -> tuple[int, dict[str, Any]]:
    from sdk import KishpaClient, KishpaError
    from sdk.client import DEFAULT_MATCHMAKING_ADDR, DEFAULT_TABLE_ADDR
    from sdk.fairness import evidence_from_record, verification_to_dict, verify_round

    async with KishpaClient(
        os.environ.get("KISHPA_MATCHMAKING_ADDR", DEFAULT_MATCHMAKING_ADDR),
        os.environ.get("KISHPA_TABLE_ADDR", DEFAULT_TABLE_ADDR),
        contribute=False,
    ) as client:
        client.use_token(token)
        try:
            record = await client.round_record(args.table, args.round)
        except KishpaError as exc:
            return 2, {"error": exc.message, "reason": exc.reason, "code": exc.code.name}
    evidence = evidence_from_record(
        record, args.client_seed, my_contribution=args.contribution or None
    )
    result = verify_round(evidence)
    out = {"table": args.table, "round": args.round, "seat": record.my_seat}
    out.update(verification_to_dict(result))
    out["summary"] = result.summary()
    return (0 if result.ok else 1), out


def handle(args: argparse.Namespace) -> int:
    """Run ``kishpa verify``."""
    from sdk.credentials import saved_token, session_file

    token = args.token or saved_token()
    if not token:
        print(
            f"kishpa verify: not signed in (no token in {session_file()}, KISHPA_TOKEN or "
            "--token); `kishpa play` saves one",
            file=sys.stderr,
        )
        return 2
    code, out = asyncio.run(_verify(args, token))
    if args.json:
        print(json.dumps(out))
    elif code == 2:
        print(f"kishpa verify: {out['error']} ({out['reason'] or out['code']})", file=sys.stderr)
    else:
        print(f"Table {args.table} round {args.round}, seat {out['seat'] + 1}: {out['summary']}")
    return code
