"""Closed periods (months, UTC): closing one for good, and which are closed.

A closed month is final: no posting can take an effective time inside it any more. Closing
locks the chain head (``services/wallet/chain.py``), the lock every batch takes last, and
moves its ``closed_until_ms`` to the month's end, so a batch either committed before the
close (and belongs to the month) or sees the new boundary under that lock and takes the
first open instant as its effective time. The close stores the chain head it saw.

Months close in order (the month after the last closed one; the first close also makes
every earlier month final). The month in progress may be closed early; a month that has not
started may not. Closing a closed month again returns its close.
"""

from __future__ import annotations

import datetime as dt
import re
import time
from dataclasses import dataclass

from sqlalchemy import Engine, insert, select, update

from services.wallet import chain, schema
from services.wallet.errors import InvalidRequest, WalletError

_MONTH = re.compile(r"^(\d{4})-(0[1-9]|1[0-2])$")


class PeriodOrder(WalletError):
    """The month cannot be closed yet (it has not started, or an earlier one is open)."""

    reason = "PERIOD_ORDER"


@dataclass(frozen=True, slots=True)
class ClosedPeriod:
    """One closed month."""

    month: str
    since_ms: int
    until_ms: int
    closed_ms: int
    closed_by: str
    request_id: str
    chain_seq: int
    chain_hash: str


def month_bounds(month: str) -> tuple[int, int]:
    """``[since, until)`` of ``YYYY-MM`` in UTC milliseconds (InvalidRequest if malformed)."""
    match = _MONTH.match(month)
    if match is None:
        raise InvalidRequest(f"month must be YYYY-MM, not {month!r}", "INVALID_PERIOD")
    year, number = int(match.group(1)), int(match.group(2))
    start = dt.datetime(year, number, 1, tzinfo=dt.UTC)
    end = dt.datetime(year + (number == 12), number % 12 + 1, 1, tzinfo=dt.UTC)
    return int(start.timestamp() * 1000), int(end.timestamp() * 1000)


def month_of(ms: int) -> str:
    """The ``YYYY-MM`` holding ``ms``."""
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC).strftime("%Y-%m")


def close_period(
    engine: Engine, month: str, closed_by: str, request_id: str, *, now_ms: int = 0
) -> tuple[ClosedPeriod, bool]:
    """Close ``month``; (its close, True if it was closed already)."""
    since, until = month_bounds(month)
    now = now_ms or int(time.time() * 1000)
    if since > now:
        raise PeriodOrder(f"{month} has not started: only a month that has begun can close")
    cp = schema.closed_periods.c
    with engine.begin() as conn:
        head = chain.lock_head(conn)  # serialises with every batch's chaining
        found = conn.execute(select(schema.closed_periods).where(cp.month == month)).first()
        if found is not None:
            return _period(found), True
        if head.closed_until_ms and since != head.closed_until_ms:
            if since < head.closed_until_ms:
                raise PeriodOrder(f"{month} is already final: it lies before the closed months")
            raise PeriodOrder(
                f"close {month_of(head.closed_until_ms)} first: months close in order"
            )
        period = ClosedPeriod(month, since, until, now, closed_by, request_id, head.seq, head.hash)
        conn.execute(
            insert(schema.closed_periods).values(
                month=month,
                since_ms=since,
                until_ms=until,
                closed_ms=now,
                closed_by=closed_by,
                request_id=request_id,
                chain_seq=head.seq,
                chain_hash=head.hash,
            )
        )
        h = schema.ledger_chain_head.c
        conn.execute(
            update(schema.ledger_chain_head)
            .where(h.id == chain.HEAD_ID)
            .values(closed_until_ms=until)
        )
    return period, False


def closed_periods(engine: Engine) -> list[ClosedPeriod]:
    """Every closed month, oldest first."""
    cp = schema.closed_periods.c
    with engine.connect().execution_options(sqlite_begin="DEFERRED") as conn:
        rows = conn.execute(select(schema.closed_periods).order_by(cp.since_ms)).all()
    return [_period(r) for r in rows]


def closed_until(engine: Engine) -> int:
    """The first instant not in a closed period (0: nothing closed)."""
    with engine.connect().execution_options(sqlite_begin="DEFERRED") as conn:
        return chain.read_head(conn).closed_until_ms


def row_period(row: object) -> ClosedPeriod:
    """A ``closed_periods`` row as a :class:`ClosedPeriod`."""
    return _period(row)


def _period(row: object) -> ClosedPeriod:
    m = row._mapping  # type: ignore[attr-defined]
    return ClosedPeriod(
        m["month"],
        int(m["since_ms"]),
        int(m["until_ms"]),
        int(m["closed_ms"]),
        m["closed_by"],
        m["request_id"],
        int(m["chain_seq"]),
        m["chain_hash"],
    )
