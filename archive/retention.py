"""Retention of the round archive: what ``kishpa history prune`` removes, and what it keeps.

A round older than the retention period is removed, unless the ledger still references its
table within the period (a posting of that table created after the cutoff: a late
settlement, an operator's refund): finance must be able to follow every posting it still
holds to its round, so such a table keeps all its rounds. On PostgreSQL a month wholly
before the cutoff with nothing to keep is detached and dropped whole (no row-by-row
delete, no bloat); what remains is deleted by table. The job also creates the months ahead.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import sqlalchemy as sa
from sqlalchemy import Engine
from sqlalchemy.engine import Connection

from archive import partitions
from archive.schema import phases, player_games, rounds

CHUNK = 500
Referenced = Callable[[Sequence[str], int], set[str]]
"""Given table ids and the cutoff (ms), those the ledger references at or after it."""


@dataclass(slots=True)
class PruneReport:
    """What a prune did (or, dry, would do)."""

    cutoff_ms: int
    rounds_removed: int = 0
    tables_kept: list[str] = field(default_factory=list)
    months_dropped: list[str] = field(default_factory=list)
    months_ahead: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        return {
            "cutoff_ms": self.cutoff_ms,
            "rounds_removed": self.rounds_removed,
            "tables_kept": self.tables_kept,
            "months_dropped": self.months_dropped,
            "months_ahead": self.months_ahead,
        }


def _chunks(items: Sequence[str]) -> Iterator[Sequence[str]]:
    for at in range(0, len(items), CHUNK):
        yield items[at : at + CHUNK]


def _old_tables(conn: Connection, cutoff_ms: int) -> list[str]:
    return sorted(
        str(t)
        for t in conn.execute(
            sa.select(rounds.c.table_id).where(rounds.c.ended_ms < cutoff_ms).distinct()
        ).scalars()
    )


def _count(conn: Connection, tables: Sequence[str], low: int, high: int) -> int:
    total = 0
    for chunk in _chunks(tables):
        total += int(
            conn.execute(
                sa.select(sa.func.count()).where(
                    rounds.c.table_id.in_(chunk), rounds.c.ended_ms >= low, rounds.c.ended_ms < high
                )
            ).scalar()
            or 0
        )
    return total


def prune(
    engine: Engine,
    *,
    cutoff_ms: int,
    now_ms: int,
    referenced: Referenced,
    dry_run: bool = False,
) -> PruneReport:
    """Remove the archived rounds older than ``cutoff_ms`` that the ledger no longer
    references (see the module docstring); with ``dry_run`` only count them."""
    report = PruneReport(cutoff_ms)
    # Read first, outside the write transaction: the ledger may be the same SQLite file,
    # whose write lock that transaction holds.
    with engine.connect().execution_options(sqlite_begin="DEFERRED") as conn:
        old = _old_tables(conn, cutoff_ms)
    keep: set[str] = set()
    for chunk in _chunks(old):
        keep |= referenced(chunk, cutoff_ms)
    report.tables_kept = sorted(keep)
    with engine.begin() as conn:
        if not dry_run:
            report.months_ahead = partitions.ensure_ahead(conn, now_ms)
        kept = sorted(keep)
        dropped: list[tuple[int, int]] = []
        for year, month in partitions.attached_months(conn):
            low, high = partitions.month_bounds(year, month)
            if high > cutoff_ms or _count(conn, kept, low, high):
                continue
            report.rounds_removed += int(
                conn.execute(
                    sa.select(sa.func.count()).where(
                        rounds.c.ended_ms >= low, rounds.c.ended_ms < high
                    )
                ).scalar()
                or 0
            )
            report.months_dropped.append(f"{year:04d}-{month:02d}")
            dropped.append((low, high))
            if not dry_run:
                partitions.detach_month(conn, year, month, drop=True)
        gone = [t for t in _old_tables(conn, cutoff_ms) if t not in keep]
        for chunk in _chunks(gone):
            if dry_run:  # what the dropped months hold is counted already
                report.rounds_removed += _count(conn, chunk, 0, cutoff_ms) - sum(
                    _count(conn, chunk, low, high) for low, high in dropped
                )
                continue
            removed = conn.execute(
                rounds.delete().where(rounds.c.table_id.in_(chunk), rounds.c.ended_ms < cutoff_ms)
            )
            report.rounds_removed += int(removed.rowcount or 0)
            conn.execute(
                phases.delete().where(phases.c.table_id.in_(chunk), phases.c.created_ms < cutoff_ms)
            )
            conn.execute(
                player_games.delete().where(
                    player_games.c.table_id.in_(chunk), player_games.c.ended_ms < cutoff_ms
                )
            )
    return report
