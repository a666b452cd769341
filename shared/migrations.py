"""Alembic configured in code (no alembic.ini), for each database that keeps a schema
history: the ledger (``services.wallet.migrate``) and the round archive (``archive.migrate``).

Works from an installed package: each history's script location is its package's
``migrations`` folder. Two histories may share one database, so each names its own version
table; every ``env.py`` hands that name to Alembic through :func:`run_online`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from sqlalchemy import Engine, MetaData

EngineFactory = Callable[..., Engine]


@dataclass(frozen=True)
class Migrations:
    """One schema history: its folder, how to open its database, and its version table."""

    folder: Path
    engine: EngineFactory
    version_table: str = "alembic_version"

    def config(self, url: str) -> Config:
        config = Config()
        config.set_main_option("script_location", str(self.folder))
        # Passed as an attribute, not a main option, so '%' in passwords needs no escaping.
        config.attributes["database_url"] = url
        return config

    def upgrade(self, url: str, revision: str = "head") -> None:
        """Bring the database at ``url`` up to ``revision``."""
        command.upgrade(self.config(url), revision)

    def downgrade(self, url: str, revision: str) -> None:
        """Take the database at ``url`` down to ``revision``."""
        command.downgrade(self.config(url), revision)

    def current_revision(self, url: str) -> str | None:
        """The revision the database at ``url`` is at (None if never migrated)."""
        from alembic.runtime.migration import MigrationContext

        engine = self.engine(url, pool_size=1)
        try:
            with engine.connect() as conn:
                opts = {"version_table": self.version_table}
                return MigrationContext.configure(conn, opts=opts).get_current_revision()
        finally:
            engine.dispose()

    def head_revision(self) -> str | None:
        """The newest revision shipped with this code."""
        from alembic.script import ScriptDirectory

        return ScriptDirectory.from_config(self.config("sqlite://")).get_current_head()


def run_online(context: Any, migrations: Migrations, metadata: MetaData) -> None:
    """An ``env.py``'s body: every pending migration in one transaction, online."""
    if context.is_offline_mode():
        raise RuntimeError("offline (SQL script) migrations are not supported")
    config = context.config
    url = config.attributes.get("database_url") or config.get_main_option("sqlalchemy.url")
    if not url:
        raise RuntimeError(f"no database URL given to the migrations in {migrations.folder}")
    engine = migrations.engine(url, pool_size=1)
    try:
        with engine.connect() as connection:
            context.configure(
                connection=connection,
                target_metadata=metadata,
                version_table=migrations.version_table,
                render_as_batch=True,
            )
            with context.begin_transaction():
                context.run_migrations()
    finally:
        engine.dispose()
