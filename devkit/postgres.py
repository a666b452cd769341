"""Throwaway PostgreSQL databases for tests and benchmarks."""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator

from sqlalchemy import create_engine
from sqlalchemy.engine import make_url


@contextlib.contextmanager
def temporary_postgres_database(admin_url: str, prefix: str = "kishpa_test") -> Iterator[str]:
    """Create a uniquely named PostgreSQL database, yield its URL, and drop it afterwards.

    Tests and benchmarks use this so they never touch anybody else's data.
    """
    name = f"{prefix}_{os.getpid()}_{secrets.token_hex(4)}"
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
        try:
            yield make_url(admin_url).set(database=name).render_as_string(hide_password=False)
        finally:
            with admin.connect() as conn:
                conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        admin.dispose()
