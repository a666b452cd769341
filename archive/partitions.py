"""Monthly range partitions of the archive's tables on PostgreSQL (declarative partitioning).

A month's partition of table ``t`` is ``t_yYYYYmMM`` holding times in
``[first ms of the month, first ms of the next)``. Partitions are created ahead (by the
migration, by ``kishpa history prune`` and by each writer for the month it writes), so a
write never finds no partition; an old month is detached with :func:`detach_month` and
dropped whole. SQLite keeps plain tables: every function here does nothing there.
"""

from __future__ import annotations

import datetime as dt
import re

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from archive.schema import PARTITIONED

MONTHS_AHEAD = 3
PARTITION_NAME = re.compile(r"^(archive_[a-z_]+)_y(\d{4})m(\d{2})$")


def month_of(ms: int) -> tuple[int, int]:
    """(year, month) in UTC of a time in ms."""
    day = dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC)
    return day.year, day.month


def month_bounds(year: int, month: int) -> tuple[int, int]:
    """The first ms of the month and of the next month (UTC)."""
    start = dt.datetime(year, month, 1, tzinfo=dt.UTC)
    after = dt.datetime(year + month // 12, month % 12 + 1, 1, tzinfo=dt.UTC)
    return int(start.timestamp() * 1000), int(after.timestamp() * 1000)


def next_month(year: int, month: int) -> tuple[int, int]:
    return (year + month // 12, month % 12 + 1)


def partition_name(table: str, year: int, month: int) -> str:
    return f"{table}_y{year:04d}m{month:02d}"


def is_postgres(conn: Connection) -> bool:
    return conn.dialect.name == "postgresql"


def ensure_month(conn: Connection, year: int, month: int) -> None:
    """Create the month's partition of every archive table (PostgreSQL; no-op on SQLite).

    Run in its own transaction by callers: two writers creating the same month at once is
    harmless (``IF NOT EXISTS``; a lost race raises and the caller just retries its write).
    """
    if not is_postgres(conn):
        return
    low, high = month_bounds(year, month)
    for table in PARTITIONED:
        name = partition_name(table, year, month)
        conn.exec_driver_sql(
            f'CREATE TABLE IF NOT EXISTS "{name}" PARTITION OF "{table}" '
            f"FOR VALUES FROM ({low}) TO ({high})"
        )


def ensure_ahead(conn: Connection, now_ms: int, months: int = MONTHS_AHEAD) -> list[str]:
    """Create this month's partitions and the next ``months``; returns the months made sure."""
    year, month = month_of(now_ms)
    done = []
    for _ in range(months + 1):
        ensure_month(conn, year, month)
        done.append(f"{year:04d}-{month:02d}")
        year, month = next_month(year, month)
    return done


def attached_months(conn: Connection, table: str = "archive_rounds") -> list[tuple[int, int]]:
    """The months that have a partition attached to ``table``, oldest first."""
    if not is_postgres(conn):
        return []
    rows = conn.execute(
        sa.text(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "JOIN pg_class p ON p.oid = i.inhparent WHERE p.relname = :table"
        ),
        {"table": table},
    ).scalars()
    months = []
    for name in rows:
        match = PARTITION_NAME.match(str(name))
        if match and match.group(1) == table:
            months.append((int(match.group(2)), int(match.group(3))))
    return sorted(months)


def detach_month(conn: Connection, year: int, month: int, *, drop: bool) -> None:
    """Detach the month's partitions from every archive table (and drop them if ``drop``)."""
    if not is_postgres(conn):
        return
    for table in PARTITIONED:
        name = partition_name(table, year, month)
        conn.exec_driver_sql(f'ALTER TABLE "{table}" DETACH PARTITION "{name}"')
        if drop:
            conn.exec_driver_sql(f'DROP TABLE "{name}"')
