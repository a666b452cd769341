"""``kishpa serve <wallet|table|matchmaking>``: run one gRPC service in this process."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable
from typing import Any

from services.common.settings import SettingsError

SERVICES = ("wallet", "table", "matchmaking", "edge")


def register(subparsers: Any) -> None:
    """Add the ``serve`` command to the ``kishpa`` parser."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "serve",
        help="run one gRPC service (configured by environment variables)",
        description="Run one gRPC service until SIGTERM/SIGINT. Configuration comes from "
        "the environment (see docs/configuration.md).",
    )
    parser.add_argument("service", choices=SERVICES, help="which service to run")
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    """Import ``services.<name>.server`` and run its ``main()``."""
    module_name = f"services.{args.service}.server"
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        # Only a missing service module is "not built yet"; a missing dependency is a real error.
        if exc.name not in (module_name, f"services.{args.service}"):
            raise
        print(
            f"kishpa serve: the {args.service} service is not available ({module_name} is missing)",
            file=sys.stderr,
        )
        return 2
    main: Callable[[], int] | None = getattr(module, "main", None)
    if main is None:
        print(f"kishpa serve: {module_name} has no main()", file=sys.stderr)
        return 2
    try:
        return main()
    except SettingsError as exc:
        print(f"kishpa serve {args.service}: {exc}", file=sys.stderr)
        return 2
