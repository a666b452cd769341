"""Alembic migrations of the round archive (its own history, its own version table).

The archive may share the wallet's database (the default), so its history is kept in the
table ``archive_alembic_version``, apart from the ledger's ``alembic_version``.
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config

MIGRATIONS = Path(__file__).resolve().parent / "migrations"
VERSION_TABLE = "archive_alembic_version"


def alembic_config(url: str) -> Config:
    """An Alembic configuration for the archive at ``url``."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["database_url"] = url
    return config


def upgrade(url: str, revision: str = "head") -> None:
    """Bring the archive at ``url`` up to ``revision``."""
    command.upgrade(alembic_config(url), revision)


def downgrade(url: str, revision: str) -> None:
    command.downgrade(alembic_config(url), revision)


def current_revision(url: str) -> str | None:
    """The revision the archive at ``url`` is at (None if never migrated)."""
    from alembic.runtime.migration import MigrationContext

    from archive.database import create_archive_engine

    engine = create_archive_engine(url, pool_size=1)
    try:
        with engine.connect() as conn:
            context = MigrationContext.configure(conn, opts={"version_table": VERSION_TABLE})
            return context.get_current_revision()
    finally:
        engine.dispose()


def head_revision() -> str | None:
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(alembic_config("sqlite://")).get_current_head()


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
