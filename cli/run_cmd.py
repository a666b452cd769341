"""``kishpa run``: the whole stack on this machine (what ``make run`` calls)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from cli.stack import run_stack


def register(subparsers: Any) -> None:
    """Add ``run`` to the ``kishpa`` command."""
    text = (
        "start Redis (embedded unless REDIS_URL), the wallet database and its migrations, "
        "the three gRPC services, the Celery workers and beat; Ctrl-C stops everything"
    )
    parser = subparsers.add_parser("run", help="start the whole stack on this machine")
    parser.description = text
    parser.add_argument(
        "--var-dir",
        default="var",
        help="where the embedded Redis data, the SQLite wallet and dev secrets live (default: var)",
    )
    parser.add_argument(
        "--tls",
        action="store_true",
        help="the production identity model: a development CA in VAR_DIR/tls, one "
        "certificate per workload, mutual TLS, no shared service key, operators from a "
        "development issuer (docs/operations.md)",
    )
    parser.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    return run_stack(Path(args.var_dir).resolve(), tls=args.tls)
