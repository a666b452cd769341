"""The ``kishpa`` command: one entry point for people and tools.

Each command group lives in its own module ``cli/<group>_cmd.py`` exposing
``register(subparsers)``; the module's handler is stored as the ``handler`` default and
returns the process exit code.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys
from collections.abc import Callable

# The order here is the order of `kishpa --help`.
COMMAND_GROUPS = (
    "run",
    "play",
    "verify",
    "bots",
    "demo",
    "rules",
    "wallet",
    "admin",
    "serve",
    "worker",
    "migrate",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kishpa", description="Kishpa backend: services, workers and tools."
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for group in COMMAND_GROUPS:
        name = f"cli.{group}_cmd"
        if importlib.util.find_spec(name) is not None:
            importlib.import_module(name).register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    handler: Callable[[argparse.Namespace], int] = args.handler
    return handler(args)


if __name__ == "__main__":
    sys.exit(main())
