"""Alembic migrations of the round archive (``shared.migrations``).

The archive may share the wallet's database (the default), so its history is kept in the
table ``archive_alembic_version``, apart from the ledger's ``alembic_version``.
"""

from __future__ import annotations

from pathlib import Path

from archive.database import create_archive_engine
from shared.migrations import Migrations

ARCHIVE = Migrations(
    Path(__file__).resolve().parent / "migrations",
    create_archive_engine,
    version_table="archive_alembic_version",
)

upgrade = ARCHIVE.upgrade
downgrade = ARCHIVE.downgrade
current_revision = ARCHIVE.current_revision
head_revision = ARCHIVE.head_revision


class ArchiveNotMigrated(RuntimeError):
    """A PostgreSQL archive is not at this code's revision: ``kishpa migrate`` first."""


def prepare_archive(url: str) -> None:
    """Migrate an embedded SQLite archive; refuse a PostgreSQL one not at head (the
    wallet's rule for its ledger: production migrates with the ``kishpa migrate`` Job)."""
    from sqlalchemy.engine import make_url

    if make_url(url).get_backend_name() == "sqlite":
        upgrade(url)
        return
    current, head = current_revision(url), head_revision()
    if current != head:
        raise ArchiveNotMigrated(
            f"the round archive is at revision {current}, this code needs {head}: "
            "run `kishpa migrate` first"
        )
