"""``kishpa migrate``: bring the wallet database (``DATABASE_URL``) and the round archive
(``ARCHIVE_DATABASE_URL``, by default the same database) to their newest schemas."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from sqlalchemy.engine import make_url


def register(subparsers: Any) -> None:
    """Add the ``migrate`` command to the ``kishpa`` parser."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "migrate",
        help="apply the wallet's and the round archive's migrations (alembic upgrade)",
        description="Upgrade the wallet database named by DATABASE_URL (default: the "
        "embedded SQLite file) to the given revision, then the round archive "
        "(ARCHIVE_DATABASE_URL, default: the wallet's database) to its newest revision. "
        "The two keep separate Alembic histories.",
    )
    parser.add_argument("--revision", default="head", help="wallet target revision (default: head)")
    parser.add_argument("--database-url", help="override DATABASE_URL")
    parser.add_argument("--archive-url", help="override ARCHIVE_DATABASE_URL")
    parser.add_argument(
        "--only",
        choices=("wallet", "archive"),
        help="migrate only the wallet database or only the round archive",
    )
    parser.set_defaults(handler=handle)


def _run(
    what: str, url: str, upgrade: Callable[[], None], current: Callable[[str], str | None]
) -> bool:
    shown = make_url(url).render_as_string(hide_password=True)
    try:
        upgrade()
    except Exception as exc:
        print(f"kishpa migrate: {what} failed on {shown}: {exc}", file=sys.stderr)
        return False
    print(f"kishpa migrate: {what} {shown} is at revision {current(url)}")
    return True


def handle(args: argparse.Namespace) -> int:
    """Run the migrations; prints where each database now stands."""
    from archive import migrate as archive
    from services.common.settings import Settings
    from services.wallet import migrate as wallet

    settings = Settings(service="migrate")
    url: str = args.database_url or settings.database_url
    archive_url: str = args.archive_url or settings.archive_database_url or url
    if args.only != "archive" and not _run(
        "wallet", url, lambda: wallet.upgrade(url, args.revision), wallet.current_revision
    ):
        return 1
    if args.only != "wallet" and not _run(
        "archive", archive_url, lambda: archive.upgrade(archive_url), archive.current_revision
    ):
        return 1
    return 0
