"""Alembic migrations of the ledger, configured in code (no alembic.ini needed).

Works from an installed package: the script location is this package's ``migrations``.
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config

MIGRATIONS = Path(__file__).resolve().parent / "migrations"


def alembic_config(url: str) -> Config:
    """An Alembic configuration for the ledger database at ``url``."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    # Passed as an attribute, not a main option, so '%' in passwords needs no escaping.
    config.attributes["database_url"] = url
    return config


def upgrade(url: str, revision: str = "head") -> None:
    """Bring the database at ``url`` up to ``revision`` (creating SQLite's directory)."""
    command.upgrade(alembic_config(url), revision)


def downgrade(url: str, revision: str) -> None:
    """Take the database at ``url`` down to ``revision``."""
    command.downgrade(alembic_config(url), revision)


def current_revision(url: str) -> str | None:
    """The revision the database at ``url`` is at (None if never migrated)."""
    from alembic.runtime.migration import MigrationContext

    from services.wallet.database import create_wallet_engine

    engine = create_wallet_engine(url, pool_size=1)
    try:
        with engine.connect() as conn:
            return MigrationContext.configure(conn).get_current_revision()
    finally:
        engine.dispose()


def head_revision() -> str | None:
    """The newest revision shipped with this code."""
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(alembic_config("sqlite://")).get_current_head()
