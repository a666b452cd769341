"""Reconciliation: proves the ledger is consistent, for operators (``kishpa wallet reconcile``)
and for the workers' sweeper.

Checks, on one consistent snapshot: all balances sum to zero; every balance equals the sum
of its postings; every batch's recorded postings are exactly the ones its result lists
(so every batch moved as much out as in, and none is half-applied); no player, bowl or pot
is negative.

A *full* check compares every batch with its result. An *incremental* one (the CronJob's,
``kishpa wallet reconcile`` without ``--full``) compares only the batches after the last clean
run's horizon (``through_batch`` in its stored record): postings and results are only ever
appended, so a batch checked clean stays clean unless someone edits the database by hand.
The global checks (sum zero, every balance against the sum of all its postings, nothing
negative) run in full every time: one aggregate over the postings. What each mode catches
is in docs/wallet.md, "Reconciliation: full and incremental".
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

from sqlalchemy import Engine, func, literal, select, text, union_all

from services.wallet import chain, schema
from services.wallet.database import create_wallet_engine, is_sqlite
from services.wallet.runs import Run, record_run

FULL_SCOPE = "all accounts, batches and postings"
MAX_LISTED = 100  # a broken ledger lists the first discrepancies, not millions of lines
HORIZON_MARGIN_MS = 10 * 60_000
"""A run's horizon is the last batch created this long before it started. PostgreSQL may
commit batch 101 before batch 100 (they lock different accounts); a batch still in flight
below the horizon would be skipped by every later incremental run, so the horizon stays
well behind anything that can still be committing (a batch's transaction takes
milliseconds). Batches above it are checked again by the next run: cheap."""


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
    mode: str = "full"
    """``full`` (every batch) or ``incremental`` (batches after ``after_batch``)."""
    after_batch: int = 0
    """Batches with ids above this one were compared with their results."""
    batches_checked: int = 0
    through_batch: int = 0
    """This run's horizon: the next incremental run starts after it (when this one is clean)."""
    chain_seq: int = 0
    """The chain head this run saw (``services/wallet/chain.py``): its position and hash."""
    chain_hash: str = ""
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


def reconcile(
    engine: Engine,
    *,
    in_database: bool | None = None,
    after_batch: int = 0,
    margin_ms: int = HORIZON_MARGIN_MS,
) -> ReconcileReport:
    """Run every check against the ledger behind ``engine``; compare with their results only
    the batches after ``after_batch`` (0: all of them, the full check).

    ``in_database`` (default: on PostgreSQL) compares every batch's postings with its stored
    result inside the database, in one query, instead of streaming both through Python; the
    outcome is the same (``tests/integration/test_wallet_finance.py``), the time is not
    (docs/BENCHMARKS.md, "Finance on a 10-million-posting ledger").
    """
    report = ReconcileReport(mode="incremental" if after_batch else "full", after_batch=after_batch)
    cutoff_ms = int(time.time() * 1000) - margin_ms
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
        head = chain.read_head(conn)
        report.chain_seq, report.chain_hash = head.seq, head.hash
        report.total_balance = sum(v for _, v in balances.values())
        report.bank_balance = balances.get("bank", ("bank", 0))[1]
        if report.total_balance != 0:
            report.add("sum_zero", "all accounts", f"balances sum to {report.total_balance}, not 0")
        for account, (kind, value) in sorted(balances.items()):
            if kind != "bank" and value < 0:
                report.add("not_negative", account, f"{kind} balance is {value}")

        _horizon(conn, report, cutoff_ms)
        # One pass over the postings: what each account received minus what it paid.
        moved: dict[str, int] = {}
        for account, net, received in conn.execute(_net_by_account()):
            moved[str(account)] = int(net)
            report.postings += int(received)  # every posting is received exactly once
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

        report.batches = conn.execute(select(func.count()).select_from(schema.batches)).scalar_one()
        if in_database if in_database is not None else not is_sqlite(engine):
            _check_batches_in_database(conn, report)
            return report
        # Both streams are ordered by batch id and merged, so memory stays one batch deep.
        stream = {"stream_results": True, "yield_per": 2_000}
        postings_query = (
            select(p.batch_id, p.from_account, p.to_account, p.amount, p.reason, p.seq)
            .where(p.batch_id > after_batch)
            .order_by(p.batch_id, p.seq)
            .execution_options(**stream)
        )
        groups = _postings_by_batch(conn.execute(postings_query), report)
        current = next(groups, None)
        batches_query = (
            select(b.id, b.idempotency_key, b.result)
            .where(b.id > after_batch)
            .order_by(b.id)
            .execution_options(**stream)
        )
        for batch in conn.execute(batches_query):
            report.batches_checked += 1
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
                    first_difference(recorded, listed),
                )
        while current is not None:
            report.add("batch_balanced", f"batch {current[0]}", "postings of no batch")
            current = next(groups, None)
    return report


def _horizon(conn: Any, report: ReconcileReport, cutoff_ms: int) -> None:
    """Set ``through_batch``; a checkpoint past the ledger's last batch is itself reported
    (a forged or mistaken run record would otherwise hide every batch below it)."""
    b = schema.batches.c
    last = conn.execute(select(func.max(b.id))).scalar() or 0
    if report.after_batch > last:
        report.add(
            "checkpoint",
            f"batch {report.after_batch}",
            f"the last clean run's horizon is past the last batch ({last}): run --full",
        )
    horizon = conn.execute(
        select(b.id).where(b.created_ms <= cutoff_ms).order_by(b.id.desc()).limit(1)
    ).scalar()
    report.through_batch = max(report.after_batch, int(horizon or 0)) if last else 0


def _net_by_account() -> Any:
    """(account, received minus paid, postings received) over all postings. Each side is
    summed per account first (PostgreSQL runs both as parallel aggregates), then joined."""
    p = schema.postings.c
    moves = union_all(
        select(
            p.to_account.label("account"),
            func.sum(p.amount).label("delta"),
            func.count().label("received"),
        ).group_by(p.to_account),
        select(
            p.from_account.label("account"),
            (literal(0) - func.sum(p.amount)).label("delta"),
            literal(0).label("received"),
        ).group_by(p.from_account),
    ).subquery()
    return select(moves.c.account, func.sum(moves.c.delta), func.sum(moves.c.received)).group_by(
        moves.c.account
    )


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
        FROM postings WHERE batch_id > :after GROUP BY batch_id
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
        WHERE b.id > :after
    )
    SELECT coalesce(l.id, r.batch_id) AS batch_id, l.idempotency_key,
           coalesce(r.n, 0) AS recorded, coalesce(l.n, 0) AS listed,
           coalesce(r.malformed, false) AS malformed,
           r.moves AS recorded_moves, l.moves AS listed_moves
    FROM listed l FULL JOIN recorded r ON r.batch_id = l.id
    WHERE l.id IS NULL OR l.moves IS DISTINCT FROM r.moves OR r.malformed
    ORDER BY 1
    LIMIT :limit
    """
)


def _check_batches_in_database(conn: Any, report: ReconcileReport) -> None:
    b = schema.batches.c
    report.batches_checked = int(
        conn.execute(select(func.count()).where(b.id > report.after_batch)).scalar()
    )
    parameters = {"limit": MAX_LISTED * 2, "after": report.after_batch}
    for row in conn.execute(_BATCHES_IN_DATABASE, parameters):
        if row.idempotency_key is None:
            report.add("batch_balanced", f"batch {row.batch_id}", "postings of no batch")
        elif row.malformed:
            report.add("batch_balanced", f"batch {row.batch_id}", "a posting is malformed")
        else:
            report.add(
                "batch_balanced",
                f"batch {row.batch_id} ({row.idempotency_key})",
                first_difference(_moves(row.recorded_moves), _moves(row.listed_moves)),
            )


_FIELDS = ("from_account", "to_account", "amount", "reason")


def first_difference(
    recorded: list[tuple[str, str, int, str]], listed: list[tuple[str, str, int, str]]
) -> str:
    """Which posting and field of a batch differ from its stored result, in words."""
    for seq, (mine, theirs) in enumerate(zip(recorded, listed, strict=False)):
        for name, a, b in zip(_FIELDS, mine, theirs, strict=True):
            if a != b:
                return (
                    f"posting {seq}: {name} recorded {a!r}, its result says {b!r} "
                    f"({len(recorded)} postings recorded, {len(listed)} in its result)"
                )
    if len(recorded) > len(listed):
        return (
            f"posting {len(listed)} is recorded but not in its result "
            f"({len(recorded)} postings recorded, {len(listed)} in its result)"
        )
    return (
        f"posting {len(recorded)} of its result is not recorded "
        f"({len(recorded)} postings recorded, {len(listed)} in its result)"
    )


def _moves(text: str | None) -> list[tuple[str, str, int, str]]:
    """The ``from>to:amount:reason|...`` string of the in-database check, as postings."""
    out = []
    for move in (text or "").split("|") if text else []:
        accounts, amount, reason = move.rsplit(":", 2)
        src, _, dst = accounts.partition(">")
        out.append((src, dst, int(amount) if amount.lstrip("-").isdigit() else 0, reason))
    return out


def _postings_by_batch(
    rows: Iterable[Any], report: ReconcileReport
) -> Iterator[tuple[int, list[tuple[str, str, int, str]]]]:
    """Group a posting stream ordered by batch id; counts and sanity-checks each posting."""
    for batch_id, group in itertools.groupby(rows, key=lambda row: int(row.batch_id)):
        recorded = []
        for row in group:
            if row.amount <= 0 or row.from_account == row.to_account:
                report.add("batch_balanced", f"batch {batch_id}", f"posting {row.seq} is malformed")
            recorded.append((row.from_account, row.to_account, int(row.amount), row.reason))
        yield batch_id, recorded


def reconcile_url(
    url: str,
    *,
    source: str = "",
    incremental: bool = False,
    full_every_days: float = 0,
    margin_ms: int = HORIZON_MARGIN_MS,
) -> ReconcileReport:
    """Reconcile the ledger at a database URL (what jobs and the sweeper call); with a
    ``source`` (``cronjob``, ``beat``, ``cli``) the run is stored as a record. ``incremental``
    compares only the batches after the last clean run's horizon (all of them when there is
    no clean run yet), unless ``full_every_days`` is set and no clean full run started within
    that many days: then this run is the full one."""
    engine = create_wallet_engine(url, pool_size=1)
    try:
        started = time.time()
        due = full_every_days > 0 and not clean_full_run_since(
            engine, int((started - full_every_days * 86_400) * 1000)
        )
        after = last_clean_horizon(engine) if incremental and not due else 0
        report = reconcile(engine, after_batch=after, margin_ms=margin_ms)
        if source:
            report.run_id = record_run(engine, ledger_run(report, source, started))
        return report
    finally:
        engine.dispose()


def clean_full_run_since(engine: Engine, since_ms: int) -> bool:
    """Whether a clean full ledger run started at or after ``since_ms``."""
    r = schema.reconciliation_runs.c
    query = (
        select(r.id)
        .where(r.kind == "ledger", r.ok.is_(True), r.scope == FULL_SCOPE)
        .where(r.started_ms >= since_ms)
        .limit(1)
    )
    with engine.connect().execution_options(sqlite_begin="DEFERRED") as conn:
        return conn.execute(query).first() is not None


def last_clean_horizon(engine: Engine) -> int:
    """``through_batch`` of the newest clean ledger run that recorded one (0: none)."""
    r = schema.reconciliation_runs.c
    query = (
        select(r.result).where(r.kind == "ledger", r.ok.is_(True)).order_by(r.id.desc()).limit(20)
    )
    with engine.connect().execution_options(sqlite_begin="DEFERRED") as conn:
        for (result,) in conn.execute(query):
            horizon = json.loads(result).get("through_batch")
            if isinstance(horizon, int) and horizon > 0:
                return horizon
    return 0


def ledger_run(report: ReconcileReport, source: str, started: float) -> Run:
    """The record of a ledger reconciliation that started at ``started`` (Unix seconds)."""
    result = report.to_dict()
    result.pop("run_id", None)
    return Run(
        kind="ledger",
        scope=(
            f"all accounts and postings; batches after {report.after_batch} (incremental)"
            if report.mode == "incremental"
            else FULL_SCOPE
        ),
        source=source,
        started_ms=int(started * 1000),
        duration_ms=int((time.time() - started) * 1000),
        ok=report.ok,
        discrepancies=len(report.discrepancies),
        result=result,
        chain_seq=report.chain_seq,
        chain_hash=report.chain_hash,
    )


def format_report(report: ReconcileReport) -> str:
    """A readable report for people."""
    checked = (
        f"batches after {report.after_batch} ({report.batches_checked}) checked against their "
        f"results (incremental; --full checks all)"
        if report.mode == "incremental"
        else f"all {report.batches_checked} batches checked against their results (full)"
    )
    lines = [
        f"accounts {report.accounts}, batches {report.batches}, postings {report.postings}",
        checked,
        f"sum of all balances {report.total_balance} (bank {report.bank_balance})",
        f"chain head seen: {report.chain_seq} {report.chain_hash}",
    ]
    if report.ok:
        lines.append("OK: the ledger reconciles")
    else:
        lines.append(f"FAILED: {len(report.discrepancies)} discrepancies")
        lines.extend(f"  [{d.check}] {d.subject}: {d.detail}" for d in report.discrepancies)
    return "\n".join(lines)
