"""Engines for the ledger: PostgreSQL (psycopg 3) in production, SQLite embedded.

SQLite runs in WAL mode with a busy timeout, and every write transaction starts with
``BEGIN IMMEDIATE`` so writers queue for the database lock up front instead of failing on
upgrade; reads open with ``BEGIN DEFERRED`` (execution option ``sqlite_begin``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url

from services.common.tracing import instrument_engine

DEFAULT_DATABASE_URL = "sqlite:///var/kishpa-wallet.sqlite3"
SQLITE_BUSY_TIMEOUT_MS = 30_000


def is_sqlite(engine: Engine) -> bool:
    """True for an SQLite engine."""
    return engine.dialect.name == "sqlite"


def create_wallet_engine(url: str, *, pool_size: int = 8) -> Engine:
    """An engine for ``url`` configured for the ledger (creates SQLite's directory)."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        engine = create_engine(url, pool_size=pool_size, max_overflow=pool_size, pool_pre_ping=True)
        instrument_engine(engine)  # SQL spans when tracing is on
        return engine
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
        # Let SQLAlchemy's begin event issue BEGIN itself (pysqlite's own is deferred).
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA foreign_keys=ON")
        # Money: a committed batch must survive a power cut, not only a process crash.
        cursor.execute("PRAGMA synchronous=FULL")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        mode = conn.get_execution_options().get("sqlite_begin", "IMMEDIATE")
        conn.exec_driver_sql(f"BEGIN {mode}")

    instrument_engine(engine)
    return engine
