"""Alembic environment: runs the ledger's migrations online against the configured URL."""

from __future__ import annotations

from alembic import context

from services.wallet.database import create_wallet_engine
from services.wallet.schema import metadata

config = context.config


def run_migrations_online() -> None:
    """Run every pending migration in one transaction."""
    url = config.attributes.get("database_url") or config.get_main_option("sqlalchemy.url")
    if not url:
        raise RuntimeError("no database URL given to the migrations")
    engine = create_wallet_engine(url, pool_size=1)
    try:
        with engine.connect() as connection:
            context.configure(connection=connection, target_metadata=metadata, render_as_batch=True)
            with context.begin_transaction():
                context.run_migrations()
    finally:
        engine.dispose()


if context.is_offline_mode():
    raise RuntimeError("offline (SQL script) migrations are not supported")
run_migrations_online()
