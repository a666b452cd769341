"""Alembic environment of the round archive: online, against the configured URL."""

from __future__ import annotations

from alembic import context

from archive.database import create_archive_engine
from archive.migrate import VERSION_TABLE
from archive.schema import metadata

config = context.config


def run_migrations_online() -> None:
    """Run every pending migration in one transaction."""
    url = config.attributes.get("database_url") or config.get_main_option("sqlalchemy.url")
    if not url:
        raise RuntimeError("no database URL given to the archive migrations")
    engine = create_archive_engine(url, pool_size=1)
    try:
        with engine.connect() as connection:
            context.configure(
                connection=connection,
                target_metadata=metadata,
                version_table=VERSION_TABLE,
                render_as_batch=True,
            )
            with context.begin_transaction():
                context.run_migrations()
    finally:
        engine.dispose()


if context.is_offline_mode():
    raise RuntimeError("offline (SQL script) migrations are not supported")
run_migrations_online()
