"""``kishpa demo``: one round between four bots, played by the rules engine alone.

The server seed comes from the OS random source here, at the edge, unless ``--seed``
(160 hex digits) replays a round.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from cli.demo import play_demo_round
from games.fair import SERVER_SEED_BYTES


def register(subparsers: Any) -> None:
    """Add ``demo`` to the ``kishpa`` command."""
    text = "play one round between four bots with the rules engine alone"
    parser = subparsers.add_parser("demo", help=text, description=text)
    parser.add_argument(
        "--seed",
        help=f"server seed as {2 * SERVER_SEED_BYTES} hex digits (default: fresh, random)",
    )
    parser.set_defaults(handler=run_demo)


def run_demo(args: argparse.Namespace) -> int:
    """Play and print the demo round; exit code 2 for a malformed seed."""
    if args.seed is None:
        seed = os.urandom(SERVER_SEED_BYTES)
    else:
        try:
            seed = bytes.fromhex(args.seed)
        except ValueError:
            seed = b""
        if len(seed) != SERVER_SEED_BYTES:
            print(f"--seed must be {2 * SERVER_SEED_BYTES} hex digits", file=sys.stderr)
            return 2
    play_demo_round(seed, sys.stdout)
    return 0
