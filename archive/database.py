"""The archive's engine: PostgreSQL (psycopg 3) in production, an SQLite file embedded.

SQLite runs in WAL mode with a busy timeout and takes its write lock at BEGIN (IMMEDIATE),
as the wallet's engine does, so a worker and a reader sharing the file queue instead of
failing on a lock upgrade.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url

SQLITE_BUSY_TIMEOUT_MS = 30_000
CONNECT_TIMEOUT_S = 5


def create_archive_engine(url: str, *, pool_size: int = 4) -> Engine:
    """An engine for the archive at ``url`` (creates an SQLite file's directory)."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        # A database that does not answer fails the call in seconds (the worker retries,
        # GetRoundRecord falls back to the live table) instead of hanging it.
        return create_engine(
            url,
            pool_size=pool_size,
            max_overflow=pool_size,
            pool_pre_ping=True,
            pool_timeout=CONNECT_TIMEOUT_S,
            connect_args={"connect_timeout": CONNECT_TIMEOUT_S},
        )
    if parsed.database and parsed.database != ":memory:":
        Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(
        url,
        pool_size=pool_size,
        max_overflow=0,
        connect_args={"check_same_thread": False, "timeout": SQLITE_BUSY_TIMEOUT_MS / 1000},
    )

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # SQLAlchemy's begin event issues BEGIN
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA synchronous=FULL")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        mode = conn.get_execution_options().get("sqlite_begin", "IMMEDIATE")
        conn.exec_driver_sql(f"BEGIN {mode}")

    return engine
