"""``kishpa migrate``: bring the wallet database (``DATABASE_URL``) to the newest schema."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from sqlalchemy.engine import make_url


def register(subparsers: Any) -> None:
    """Add the ``migrate`` command to the ``kishpa`` parser."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "migrate",
        help="apply the wallet database migrations (alembic upgrade on DATABASE_URL)",
        description="Upgrade the wallet database named by DATABASE_URL (default: the "
        "embedded SQLite file) to the given revision.",
    )
    parser.add_argument("--revision", default="head", help="target revision (default: head)")
    parser.add_argument("--database-url", help="override DATABASE_URL")
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    """Run the migrations; prints where the database now stands."""
    from services.common.settings import Settings
    from services.wallet.migrate import current_revision, upgrade

    url: str = args.database_url or Settings(service="migrate").database_url
    shown = make_url(url).render_as_string(hide_password=True)
    try:
        upgrade(url, args.revision)
    except Exception as exc:
        print(f"kishpa migrate: failed on {shown}: {exc}", file=sys.stderr)
        return 1
    print(f"kishpa migrate: {shown} is at revision {current_revision(url)}")
    return 0
