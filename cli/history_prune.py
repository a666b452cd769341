"""``kishpa history prune``: the round archive's retention job (the CronJob runs it nightly).

Removes archived rounds older than ``KISHPA_ARCHIVE_RETENTION_DAYS`` (or ``--retention-days``)
except those of tables the ledger (``DATABASE_URL``) still references within the period, and
creates the archive's months ahead (docs/operations.md "Round archive retention").
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from typing import Any

DAY_MS = 86_400_000


def register(commands: Any) -> None:
    """Add ``prune`` to ``kishpa history``'s sub-commands."""
    prune = commands.add_parser(
        "prune", help="remove archived rounds past retention the ledger no longer references"
    )
    prune.add_argument(
        "--retention-days", type=int, default=0, help="default KISHPA_ARCHIVE_RETENTION_DAYS"
    )
    prune.add_argument("--dry-run", action="store_true", help="count, remove nothing")
    prune.add_argument("--archive-url", help="override ARCHIVE_DATABASE_URL")
    prune.add_argument("--database-url", help="the ledger's database (override DATABASE_URL)")
    prune.set_defaults(handler=_prune)


def ledger_references(url: str) -> Any:
    """A function telling which tables the ledger at ``url`` has postings of at or after a
    moment (its ``ix_postings_table_round`` index answers it)."""
    import sqlalchemy as sa

    from services.wallet.database import create_wallet_engine
    from services.wallet.schema import postings

    engine = create_wallet_engine(url, pool_size=1)

    def referenced(tables: Sequence[str], since_ms: int) -> set[str]:
        with engine.connect().execution_options(sqlite_begin="DEFERRED") as conn:
            found = conn.execute(
                sa.select(postings.c.table_id)
                .where(postings.c.table_id.in_(list(tables)), postings.c.created_ms >= since_ms)
                .distinct()
            ).scalars()
            return {str(t) for t in found}

    referenced.engine = engine  # type: ignore[attr-defined]
    return referenced


def _prune(args: argparse.Namespace) -> int:
    from sqlalchemy.exc import SQLAlchemyError

    from archive.database import create_archive_engine
    from archive.retention import prune
    from services.common.settings import Settings

    settings = Settings(service="history-prune")
    days = args.retention_days or settings.archive_retention_days
    if days <= 0:
        print("kishpa history prune: --retention-days must be positive", file=sys.stderr)
        return 2
    ledger_url = args.database_url or settings.database_url
    archive_url = args.archive_url or settings.archive_database_url or ledger_url
    now_ms = time.time_ns() // 1_000_000
    engine = create_archive_engine(archive_url, pool_size=1)
    referenced = ledger_references(ledger_url)
    try:
        report = prune(
            engine,
            cutoff_ms=now_ms - days * DAY_MS,
            now_ms=now_ms,
            referenced=referenced,
            dry_run=args.dry_run,
        )
    except SQLAlchemyError as exc:
        print(f"kishpa history prune: {str(exc).splitlines()[0]}", file=sys.stderr)
        print("(are the URLs right, and has `kishpa migrate` run?)", file=sys.stderr)
        return 2
    finally:
        engine.dispose()
        referenced.engine.dispose()
    print(json.dumps({"retention_days": days, "dry_run": args.dry_run, **report.to_dict()}))
    return 0
