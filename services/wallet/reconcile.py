"""Reconciliation: proves the ledger is consistent, for operators (``kishpa wallet reconcile``)
and for the workers' sweeper.

Checks, on one consistent snapshot: all balances sum to zero; every balance equals the sum
of its postings; every batch's recorded postings are exactly the ones its result lists
(so every batch moved as much out as in, and none is half-applied); no player, bowl or pot
is negative.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

from sqlalchemy import Engine, func, literal, select, text, union_all

from services.wallet import schema
from services.wallet.database import create_wallet_engine, is_sqlite
from services.wallet.runs import Run, record_run

MAX_LISTED = 100  # a broken ledger lists the first discrepancies, not millions of lines


@dataclass(frozen=True, slots=True)
class Discrepancy:
    """One thing that is wrong."""

    check: str
    subject: str
    detail: str


@dataclass(slots=True)
class ReconcileReport:
    """The outcome of a reconciliation."""

    accounts: int = 0
    batches: int = 0
    postings: int = 0
    total_balance: int = 0
    bank_balance: int = 0
    run_id: int = 0
    """The stored run's id (0 when the run was not recorded)."""
    discrepancies: list[Discrepancy] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when no check found anything."""
        return not self.discrepancies

    def to_dict(self) -> dict[str, Any]:
        """The report as a JSON-ready dict."""
        data = asdict(self)
        data["ok"] = self.ok
        return data

    def add(self, check: str, subject: str, detail: str) -> None:
        """Record a discrepancy (keeps the first MAX_LISTED per check)."""
        if sum(1 for d in self.discrepancies if d.check == check) < MAX_LISTED:
            self.discrepancies.append(Discrepancy(check, subject, detail))


def reconcile(engine: Engine, *, in_database: bool | None = None) -> ReconcileReport:
    """Run every check against the ledger behind ``engine``.

    ``in_database`` (default: on PostgreSQL) compares every batch's postings with its stored
    result inside the database, in one query, instead of streaming both through Python; the
    outcome is the same (``tests/integration/test_wallet_finance.py``), the time is not
    (docs/BENCHMARKS.md, "Finance on a 10-million-posting ledger").
    """
    report = ReconcileReport()
    a, b, p = schema.accounts.c, schema.batches.c, schema.postings.c
    conn = engine.connect()
    if is_sqlite(engine):
        conn = conn.execution_options(sqlite_begin="DEFERRED")
    else:
        conn = conn.execution_options(isolation_level="REPEATABLE READ")
    with conn, conn.begin():
        balances = {
            row.id: (row.kind, int(row.balance))
            for row in conn.execute(select(a.id, a.kind, a.balance))
        }
        report.accounts = len(balances)
        report.total_balance = sum(v for _, v in balances.values())
        report.bank_balance = balances.get("bank", ("bank", 0))[1]
        if report.total_balance != 0:
            report.add("sum_zero", "all accounts", f"balances sum to {report.total_balance}, not 0")
        for account, (kind, value) in sorted(balances.items()):
            if kind != "bank" and value < 0:
                report.add("not_negative", account, f"{kind} balance is {value}")

        # One pass over the postings: what each account received minus what it paid.
        moved = {str(account): int(net) for account, net in conn.execute(_net_by_account())}
        for account in sorted(set(moved) | set(balances)):
            expected = moved.get(account, 0)
            if account not in balances:
                report.add(
                    "postings_match", account, "postings name an account that does not exist"
                )
            elif balances[account][1] != expected:
                report.add(
                    "postings_match",
                    account,
                    f"balance {balances[account][1]} but its postings sum to {expected}",
                )

        if in_database if in_database is not None else not is_sqlite(engine):
            _check_batches_in_database(conn, report)
            return report
        # Both streams are ordered by batch id and merged, so memory stays one batch deep.
        stream = {"stream_results": True, "yield_per": 2_000}
        postings_query = (
            select(p.batch_id, p.from_account, p.to_account, p.amount, p.reason, p.seq)
            .order_by(p.batch_id, p.seq)
            .execution_options(**stream)
        )
        groups = _postings_by_batch(conn.execute(postings_query), report)
        current = next(groups, None)
        batches_query = (
            select(b.id, b.idempotency_key, b.result).order_by(b.id).execution_options(**stream)
        )
        for batch in conn.execute(batches_query):
            report.batches += 1
            while current is not None and current[0] < batch.id:
                report.add("batch_balanced", f"batch {current[0]}", "postings of no batch")
                current = next(groups, None)
            recorded: list[tuple[str, str, int, str]] = []
            if current is not None and current[0] == batch.id:
                recorded = current[1]
                current = next(groups, None)
            listed = [
                (x["from_account"], x["to_account"], int(x["amount"]), x["reason"])
                for x in json.loads(batch.result)["applied"]
            ]
            if recorded != listed:
                report.add(
                    "batch_balanced",
                    f"batch {batch.id} ({batch.idempotency_key})",
                    f"{len(recorded)} postings recorded, {len(listed)} in its result",
                )
        while current is not None:
            report.add("batch_balanced", f"batch {current[0]}", "postings of no batch")
            current = next(groups, None)
    return report


def _net_by_account() -> Any:
    p = schema.postings.c
    moves = union_all(
        select(p.to_account.label("account"), p.amount.label("delta")),
        select(p.from_account.label("account"), (literal(0) - p.amount).label("delta")),
    ).subquery()
    return select(moves.c.account, func.sum(moves.c.delta)).group_by(moves.c.account)


# PostgreSQL: each batch's recorded postings and the ones its result lists, each as one
# string in order ("from>to:amount:reason|..."), compared in the database. Only the batches
# that differ (and postings of no batch) come back.
_BATCHES_IN_DATABASE = text(
    """
    WITH recorded AS (
        SELECT batch_id, count(*) AS n,
               string_agg(from_account || '>' || to_account || ':' || amount || ':' || reason,
                          '|' ORDER BY seq) AS moves,
               bool_or(amount <= 0 OR from_account = to_account) AS malformed
        FROM postings GROUP BY batch_id
    ), listed AS (
        SELECT b.id, b.idempotency_key, l.n, l.moves
        FROM batches b
        CROSS JOIN LATERAL (
            SELECT count(*) AS n,
                   string_agg((e ->> 'from_account') || '>' || (e ->> 'to_account') || ':'
                              || (e ->> 'amount') || ':' || (e ->> 'reason'), '|' ORDER BY o)
                       AS moves
            FROM json_array_elements(b.result::json -> 'applied') WITH ORDINALITY AS x(e, o)
        ) l
    )
    SELECT coalesce(l.id, r.batch_id) AS batch_id, l.idempotency_key,
           coalesce(r.n, 0) AS recorded, coalesce(l.n, 0) AS listed,
           coalesce(r.malformed, false) AS malformed
    FROM listed l FULL JOIN recorded r ON r.batch_id = l.id
    WHERE l.id IS NULL OR l.moves IS DISTINCT FROM r.moves OR r.malformed
    ORDER BY 1
    LIMIT :limit
    """
)


def _check_batches_in_database(conn: Any, report: ReconcileReport) -> None:
    report.batches = int(conn.execute(select(func.count()).select_from(schema.batches)).scalar())
    report.postings = int(conn.execute(select(func.count()).select_from(schema.postings)).scalar())
    for row in conn.execute(_BATCHES_IN_DATABASE, {"limit": MAX_LISTED * 2}):
        if row.idempotency_key is None:
            report.add("batch_balanced", f"batch {row.batch_id}", "postings of no batch")
        elif row.malformed:
            report.add("batch_balanced", f"batch {row.batch_id}", "a posting is malformed")
        else:
            report.add(
                "batch_balanced",
                f"batch {row.batch_id} ({row.idempotency_key})",
                f"{row.recorded} postings recorded, {row.listed} in its result",
            )


def _postings_by_batch(
    rows: Iterable[Any], report: ReconcileReport
) -> Iterator[tuple[int, list[tuple[str, str, int, str]]]]:
    """Group a posting stream ordered by batch id; counts and sanity-checks each posting."""
    for batch_id, group in itertools.groupby(rows, key=lambda row: int(row.batch_id)):
        recorded = []
        for row in group:
            report.postings += 1
            if row.amount <= 0 or row.from_account == row.to_account:
                report.add("batch_balanced", f"batch {batch_id}", f"posting {row.seq} is malformed")
            recorded.append((row.from_account, row.to_account, int(row.amount), row.reason))
        yield batch_id, recorded


def reconcile_url(url: str, *, source: str = "") -> ReconcileReport:
    """Reconcile the ledger at a database URL (what jobs and the sweeper call); with a
    ``source`` (``cronjob``, ``beat``, ``cli``) the run is stored as a record."""
    engine = create_wallet_engine(url, pool_size=1)
    try:
        started = time.time()
        report = reconcile(engine)
        if source:
            report.run_id = record_run(engine, ledger_run(report, source, started))
        return report
    finally:
        engine.dispose()


def ledger_run(report: ReconcileReport, source: str, started: float) -> Run:
    """The record of a ledger reconciliation that started at ``started`` (Unix seconds)."""
    result = report.to_dict()
    result.pop("run_id", None)
    return Run(
        kind="ledger",
        scope="all accounts, batches and postings",
        source=source,
        started_ms=int(started * 1000),
        duration_ms=int((time.time() - started) * 1000),
        ok=report.ok,
        discrepancies=len(report.discrepancies),
        result=result,
    )


def format_report(report: ReconcileReport) -> str:
    """A readable report for people."""
    lines = [
        f"accounts {report.accounts}, batches {report.batches}, postings {report.postings}",
        f"sum of all balances {report.total_balance} (bank {report.bank_balance})",
    ]
    if report.ok:
        lines.append("OK: the ledger reconciles")
    else:
        lines.append(f"FAILED: {len(report.discrepancies)} discrepancies")
        lines.extend(f"  [{d.check}] {d.subject}: {d.detail}" for d in report.discrepancies)
    return "\n".join(lines)
