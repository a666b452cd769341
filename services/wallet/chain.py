"""The tamper-evident ledger: every batch is chained to the one before by a hash over its
postings (``ledger_chain``, migration ``0004_finance_chain``).

A batch's *digest* is the SHA-256 of its rows as text: one header line (batch id, key, body
hash, creation time) and one line per posting (every stored column), each in PostgreSQL's
``COPY ... TO STDOUT`` text format (tab-separated, ``\\N`` for NULL, backslash escapes), so
the verifier can hash what ``COPY`` streams without parsing it. The chain's entry ``n`` holds
``hash_n = SHA-256(hash_{n-1} \\t n \\t batch id \\t digest)``; ``n`` counts from 1 with no
gap and the hash before the first entry is 64 zeros.

Entries are appended inside the batch's own transaction, after its rows are written, under
the chain head's lock (``ledger_chain_head``, one row, ``SELECT ... FOR UPDATE``; SQLite's
``BEGIN IMMEDIATE`` already serialises writers). The lock is the last one a batch takes (the
accounts' come first, in their sorted order), so it joins no lock cycle; it is held for one
statement and the commit. The chain's order is therefore the commit order, which on
PostgreSQL may differ from the batch ids' (batch 101 may commit before batch 100): the
verifier walks the chain by position and checks digests by batch id, merging sorted streams,
so neither needs memory for the whole ledger.

The chain proves that the ledger is the one that was there when its head was seen: every
reconciliation run and every closed period stores the head it saw (position and hash), and
``verify`` checks them too. Someone able to rewrite the database could recompute the whole
chain after an edit; the heads kept elsewhere (a closed month's signed report carries its
head) then no longer match.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, Engine, insert, select, update

from services.wallet import schema
from services.wallet.batch import Posting
from services.wallet.database import is_sqlite

GENESIS = "0" * 64
"""The hash before the chain's first entry."""
HEAD_ID = 1
UNPLACED = -1
MAX_LISTED = 20


class PeriodClosedMeanwhile(RuntimeError):
    """A period was closed between a batch's planning and its chaining: its effective time
    is stale. The transaction is rolled back and the batch tried again."""


@dataclass(frozen=True, slots=True)
class Head:
    """The chain's last entry (position 0 and ``GENESIS`` before any), and the first instant
    that is not closed (``closed_until_ms``; 0: nothing closed)."""

    seq: int
    hash: str
    closed_until_ms: int = 0


@dataclass(frozen=True, slots=True)
class Written:
    """A batch as it was written, for its digest."""

    batch_id: int
    key: str
    body_hash: str
    created_ms: int
    effective_ms: int
    postings: Sequence[Posting]


# --- the text that is hashed (PostgreSQL's COPY text format) ------------------------------

_ESCAPES = str.maketrans(
    {"\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v"}
)


def _text(value: str | None) -> str:
    return "\\N" if value is None else value.translate(_ESCAPES)


def _int(value: int | None) -> str:
    return "\\N" if value is None else str(value)


def header_line(batch_id: int, key: str, body_hash: str, created_ms: int) -> str:
    """A batch row as ``COPY (SELECT id, idempotency_key, body_hash, created_ms ...)``."""
    return f"{batch_id}\t{_text(key)}\t{_text(body_hash)}\t{created_ms}\n"


def posting_line(row: Sequence[Any]) -> str:
    """A posting row (values in ``POSTING_COLUMNS`` order, NULLs as None) as COPY writes it."""
    batch_id, seq, src, dst, amount, reason, table_id, rnd, phase, created, effective = row
    return (
        f"{batch_id}\t{seq}\t{_text(src)}\t{_text(dst)}\t{amount}\t{_text(reason)}\t"
        f"{_text(table_id)}\t{_int(rnd)}\t{_text(phase)}\t{created}\t{effective}\n"
    )


POSTING_COLUMNS = (
    "batch_id",
    "seq",
    "from_account",
    "to_account",
    "amount",
    "reason",
    "table_id",
    "round",
    "phase",
    "created_ms",
    "effective_ms",
)


def stored_row(
    batch_id: int, seq: int, p: Posting, created_ms: int, effective_ms: int
) -> tuple[Any, ...]:
    """A posting as the ledger stores it (no table, round 0 or no phase are NULL)."""
    return (
        batch_id,
        seq,
        p.from_account,
        p.to_account,
        p.amount,
        p.reason,
        p.table_id or None,
        p.round or None,
        p.phase or None,
        created_ms,
        effective_ms,
    )


def digest(w: Written) -> str:
    """The digest of a batch as written."""
    h = hashlib.sha256(header_line(w.batch_id, w.key, w.body_hash, w.created_ms).encode())
    for seq, p in enumerate(w.postings):
        h.update(
            posting_line(stored_row(w.batch_id, seq, p, w.created_ms, w.effective_ms)).encode()
        )
    return h.hexdigest()


def link(previous: str, seq: int, batch_id: int, batch_digest: str) -> str:
    """The hash of the chain's entry ``seq``."""
    return hashlib.sha256(f"{previous}\t{seq}\t{batch_id}\t{batch_digest}\n".encode()).hexdigest()


# --- appending (inside the batch's transaction) ------------------------------------------


def lock_head(conn: Connection) -> Head:
    """The chain's head, locked until the transaction ends."""
    h = schema.ledger_chain_head.c
    query = select(h.seq, h.hash, h.closed_until_ms).where(h.id == HEAD_ID)
    if not is_sqlite(conn.engine):
        query = query.with_for_update()
    row = conn.execute(query).one()
    return Head(int(row.seq), str(row.hash), int(row.closed_until_ms))


def read_head(conn: Connection) -> Head:
    """The chain's head as this transaction sees it (no lock)."""
    h = schema.ledger_chain_head.c
    row = conn.execute(
        select(h.seq, h.hash, h.closed_until_ms).where(h.id == HEAD_ID)
    ).one_or_none()
    return (
        Head(0, GENESIS) if row is None else Head(int(row.seq), row.hash, int(row.closed_until_ms))
    )


def append(conn: Connection, written: Sequence[Written]) -> Head:
    """Chain ``written`` (in batch id order) after the head; the new head.

    Raises :class:`PeriodClosedMeanwhile` when a batch's effective time falls before the
    first open instant (a period was closed after the batch was planned)."""
    head = lock_head(conn)
    if any(w.effective_ms < head.closed_until_ms for w in written):
        raise PeriodClosedMeanwhile(head.closed_until_ms)
    rows = []
    seq, previous = head.seq, head.hash
    for w in sorted(written, key=lambda w: w.batch_id):
        seq += 1
        batch_digest = digest(w)
        previous = link(previous, seq, w.batch_id, batch_digest)
        rows.append(
            {
                "seq": seq,
                "batch_id": w.batch_id,
                "digest": batch_digest,
                "hash": previous,
                "created_ms": w.created_ms,
            }
        )
    if rows:
        conn.execute(insert(schema.ledger_chain), rows)
        h = schema.ledger_chain_head.c
        conn.execute(
            update(schema.ledger_chain_head)
            .where(h.id == HEAD_ID)
            .values(seq=seq, hash=previous, created_ms=rows[-1]["created_ms"])
        )
    return Head(seq, previous, head.closed_until_ms)


# --- verifying ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Break:
    """One place where the chain does not hold."""

    seq: int
    """Its position in the chain (0: a batch that is not in the chain at all)."""
    batch_id: int
    detail: str


@dataclass(slots=True)
class ChainReport:
    """What ``verify`` found."""

    entries: int = 0
    batches: int = 0
    postings: int = 0
    head_seq: int = 0
    head_hash: str = GENESIS
    anchors: int = 0
    breaks: list[Break] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.breaks

    @property
    def first(self) -> Break | None:
        """The earliest break in the chain's order (batches outside it last)."""
        return min(self.breaks, key=lambda b: (b.seq or 2**63, b.batch_id), default=None)

    def add(self, seq: int, batch_id: int, detail: str) -> None:
        self.breaks.append(Break(seq, batch_id, detail))

    def to_dict(self) -> dict[str, Any]:
        first = self.first
        return {
            "ok": self.ok,
            "entries": self.entries,
            "batches": self.batches,
            "postings": self.postings,
            "head": {"seq": self.head_seq, "hash": self.head_hash},
            "anchors_checked": self.anchors,
            "first_broken_batch": None
            if first is None
            else {"batch_id": first.batch_id, "seq": first.seq, "detail": first.detail},
            "breaks": [
                {"seq": b.seq, "batch_id": b.batch_id, "detail": b.detail}
                for b in sorted(self.breaks, key=lambda b: (b.seq or 2**63, b.batch_id))[
                    :MAX_LISTED
                ]
            ],
            "breaks_total": len(self.breaks),
        }


def verify(engine: Engine) -> ChainReport:
    """Recompute the chain from the stored batches and postings, on one snapshot."""
    report = ChainReport()
    if is_sqlite(engine):
        with engine.connect().execution_options(sqlite_begin="DEFERRED") as conn, conn.begin():
            lite = _SqliteStreams(conn)
            walk(lite.walk(), report)
            check_head(read_head(conn), report)
            check_digests(lite, report)
            _check_anchors(conn, report)
            _place(conn, report)
        return report
    with Snapshot(engine, 3) as conns:
        walk(named_rows(conns[0], "chain_walk", WALK), report)
        check_head(head_of(conns[0]), report)
        check_digests(PostgresStreams(conns), report)
    anchors = engine.connect().execution_options(isolation_level="REPEATABLE READ")
    with anchors as conn, conn.begin():
        _check_anchors(conn, report)
        _place(conn, report)
    return report


class _SqliteStreams:
    """The four sorted streams the verifier merges, on one SQLite read transaction."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn

    def _rows(self, query: Any) -> Iterator[Any]:
        yield from self._conn.execute(query)

    def walk(self) -> Iterator[Any]:
        c = schema.ledger_chain.c
        return self._rows(select(c.seq, c.batch_id, c.digest, c.hash).order_by(c.seq))

    def entries(self) -> Iterator[Any]:
        c = schema.ledger_chain.c
        return self._rows(select(c.batch_id, c.digest).order_by(c.batch_id))

    def batches(self) -> Iterator[tuple[int, bytes]]:
        b = schema.batches.c
        query = select(b.id, b.idempotency_key, b.body_hash, b.created_ms).order_by(b.id)
        for row in self._rows(query):
            yield int(row[0]), header_line(*row).encode()

    def postings(self) -> Iterator[tuple[int, bytes]]:
        p = schema.postings.c
        query = select(*(p[name] for name in POSTING_COLUMNS)).order_by(p.batch_id, p.seq)
        for row in self._rows(query):
            yield int(row[0]), posting_line(row).encode()


WALK = "SELECT seq, batch_id, digest, hash FROM ledger_chain ORDER BY seq"
MAX_RECHECK = 10_000


class Snapshot:
    """``n`` raw psycopg connections of ``engine`` in read-only REPEATABLE READ transactions
    sharing one exported snapshot: one instant, read over several connections at once (a
    connection streams one COPY at a time; the PostgreSQL check runs a query per range)."""

    def __init__(self, engine: Engine, n: int) -> None:
        self._engine = engine
        self._n = n
        self._proxies: list[Any] = []

    def __enter__(self) -> list[Any]:
        snapshot = ""
        for n in range(self._n):
            proxy = self._engine.raw_connection()
            self._proxies.append(proxy)
            conn: Any = proxy.driver_connection
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            if n == 0:
                snapshot = conn.execute("SELECT pg_export_snapshot()").fetchone()[0]
            else:
                conn.execute(f"SET TRANSACTION SNAPSHOT '{snapshot}'")
        return [p.driver_connection for p in self._proxies]

    def __exit__(self, *exc: object) -> None:
        for proxy in self._proxies:
            proxy.driver_connection.rollback()
            proxy.close()


def named_rows(conn: Any, name: str, statement: str) -> Iterator[Any]:
    """The rows of ``statement`` through a server-side cursor (20,000 a fetch)."""
    with conn.cursor(name=name) as cursor:
        cursor.itersize = 20_000
        cursor.execute(statement)
        yield from cursor


def head_of(conn: Any) -> Head:
    """The stored head, through a raw psycopg connection."""
    row = conn.execute(
        "SELECT seq, hash, closed_until_ms FROM ledger_chain_head WHERE id = 1"
    ).fetchone()
    return Head(0, GENESIS) if row is None else Head(int(row[0]), row[1], int(row[2]))


class PostgresStreams:
    """The sorted streams of ``check_digests`` on PostgreSQL, over three connections of one
    :class:`Snapshot`: the chain's entries through a server-side cursor, the batches and the
    postings as raw ``COPY`` text, hashed as they come (no parsing). ``ids``: only these
    batches.

    Hashing in the database instead (``string_agg`` of each batch's lines, ``sha256``) was
    measured slower: 4.8 database CPU-seconds per million postings, against 1.9 s of Python
    and 1.0 s of database for this stream (docs/BENCHMARKS.md)."""

    def __init__(self, conns: list[Any], ids: Sequence[int] | None = None) -> None:
        self._conns = conns
        self._only = ""
        if ids is not None:
            listed = ",".join(str(int(i)) for i in list(ids)[:MAX_RECHECK])
            self._only = f"= ANY(ARRAY[{listed}]::bigint[])"

    def _where(self, column: str) -> str:
        return f"WHERE {column} {self._only}" if self._only else ""

    def entries(self) -> Iterator[Any]:
        return named_rows(
            self._conns[0],
            "chain_entries",
            f"SELECT batch_id, digest FROM ledger_chain {self._where('batch_id')} "  # noqa: S608
            "ORDER BY batch_id",
        )

    def batches(self) -> Iterator[tuple[int, bytes]]:
        return _copy_lines(
            self._conns[1],
            "COPY (SELECT id, idempotency_key, body_hash, created_ms FROM batches "  # noqa: S608
            f"{self._where('id')} ORDER BY id) TO STDOUT",
        )

    def postings(self) -> Iterator[tuple[int, bytes]]:
        columns = ", ".join(POSTING_COLUMNS)
        return _copy_lines(
            self._conns[2],
            f"COPY (SELECT {columns} FROM postings {self._where('batch_id')} "  # noqa: S608
            "ORDER BY batch_id, seq) TO STDOUT",
        )


def _copy_lines(conn: Any, statement: str) -> Iterator[tuple[int, bytes]]:
    """The lines ``COPY ... TO STDOUT`` streams (one row each), with their first column."""
    with conn.cursor() as cursor, cursor.copy(statement) as copy:
        for data in copy:
            line = bytes(data)
            yield int(line[: line.index(b"\t")]), line


def walk(rows: Iterable[Any], report: ChainReport) -> None:
    """Walk the entries by position: no gap, each hash linked to the one before."""
    previous, expected = GENESIS, 1
    for seq, batch_id, batch_digest, stored in rows:
        report.entries += 1
        if seq != expected:
            report.add(
                expected,
                int(batch_id),
                f"chain position {expected} is missing (the next entry is {seq}): an entry "
                f"was deleted",
            )
            expected = seq
        if link(previous, seq, batch_id, batch_digest) != stored:
            report.add(seq, batch_id, "the entry's hash does not follow from the one before")
        previous = stored
        expected += 1
    report.head_seq, report.head_hash = expected - 1, previous


def check_head(head: Head, report: ChainReport) -> None:
    if (head.seq, head.hash) != (report.head_seq, report.head_hash):
        report.add(
            report.head_seq,
            0,
            f"the stored head ({head.seq}, {head.hash[:12]}…) is not the chain's last entry",
        )


def check_digests(streams: Any, report: ChainReport) -> None:
    """Recompute every batch's digest from its rows and compare it with its entry's. Breaks
    are found by batch id; their chain positions are looked up afterwards (``_place``)."""
    chained = _unique(iter(streams.entries()), report)
    entry = next(chained, None)
    postings = iter(streams.postings())
    pending = next(postings, None)
    for batch_id, header in streams.batches():
        report.batches += 1
        h = hashlib.sha256(header)
        while pending is not None and pending[0] < batch_id:
            report.add(UNPLACED, pending[0], "postings of a batch that is gone")
            pending = _skip(postings, pending[0])
        while pending is not None and pending[0] == batch_id:
            h.update(pending[1])
            report.postings += 1
            pending = next(postings, None)
        while entry is not None and entry[0] < batch_id:
            report.add(UNPLACED, entry[0], f"batch {entry[0]} is chained but gone")
            entry = next(chained, None)
        if entry is None or entry[0] != batch_id:
            report.add(0, batch_id, f"batch {batch_id} is not in the chain (inserted by hand?)")
            continue
        if h.hexdigest() != entry[1]:
            report.add(
                UNPLACED,
                batch_id,
                f"batch {batch_id}'s rows do not hash to its chained digest: a posting or the "
                f"batch was edited, deleted or inserted",
            )
        entry = next(chained, None)
    while pending is not None:
        report.add(UNPLACED, pending[0], "postings of a batch that is gone")
        pending = _skip(postings, pending[0])
    while entry is not None:
        report.add(UNPLACED, entry[0], f"batch {entry[0]} is chained but gone")
        entry = next(chained, None)


def _unique(entries: Iterator[Any], report: ChainReport) -> Iterator[Any]:
    """The entries by batch id, each batch once (a batch chained twice is a break)."""
    last = None
    for entry in entries:
        if entry[0] == last:
            report.add(UNPLACED, entry[0], f"batch {entry[0]} is chained twice")
            continue
        last = entry[0]
        yield entry


def _place(conn: Connection, report: ChainReport) -> None:
    """Fill in the chain positions of breaks found by batch id."""
    unplaced = sorted({b.batch_id for b in report.breaks if b.seq == UNPLACED})
    if not unplaced:
        return
    c = schema.ledger_chain.c
    seq_of: dict[int, int] = {}
    for chunk in _chunks(unplaced[: MAX_LISTED * 50], 500):
        for seq, batch_id in conn.execute(select(c.seq, c.batch_id).where(c.batch_id.in_(chunk))):
            seq_of.setdefault(int(batch_id), int(seq))
    report.breaks = [
        Break(seq_of.get(b.batch_id, 0), b.batch_id, b.detail) if b.seq == UNPLACED else b
        for b in report.breaks
    ]


def _skip(lines: Iterator[tuple[int, bytes]], batch_id: int) -> tuple[int, bytes] | None:
    for item in lines:
        if item[0] != batch_id:
            return item
    return None


def _check_anchors(conn: Connection, report: ChainReport) -> None:
    """Every head a run or a closed period stored must be the chain's entry at its position."""
    c = schema.ledger_chain.c
    anchors: list[tuple[str, int, str]] = []
    r = schema.reconciliation_runs.c
    for run_id, seq, value in conn.execute(
        select(r.id, r.chain_seq, r.chain_hash).where(r.chain_seq.is_not(None))
    ):
        anchors.append((f"run {run_id}", int(seq), str(value)))
    cp = schema.closed_periods.c
    for month, seq, value in conn.execute(select(cp.month, cp.chain_seq, cp.chain_hash)):
        anchors.append((f"closed period {month}", int(seq), str(value)))
    wanted = sorted({seq for _, seq, _ in anchors if seq > 0})
    stored: dict[int, tuple[int, str]] = {}
    for chunk in _chunks(wanted, 500):
        for seq, batch_id, value in conn.execute(
            select(c.seq, c.batch_id, c.hash).where(c.seq.in_(chunk))
        ):
            stored[int(seq)] = (int(batch_id), str(value))
    for what, seq, value in anchors:
        report.anchors += 1
        if seq == 0:
            if value != GENESIS:
                report.add(0, 0, f"{what} saw an empty chain with hash {value[:12]}…")
            continue
        batch_id, found = stored.get(seq, (0, ""))
        if found != value:
            report.add(
                seq,
                batch_id,
                f"{what} saw the chain's head {seq} as {value[:12]}…, the chain now has "
                f"{found[:12] or 'nothing'}… there: the ledger was rewritten after it",
            )


def _chunks(values: Sequence[int], size: int) -> Iterable[Sequence[int]]:
    for start in range(0, len(values), size):
        yield values[start : start + size]


def format_report(report: ChainReport) -> str:
    """What ``kishpa wallet verify-chain`` prints."""
    lines = [
        f"chain: {report.entries} entries, {report.batches} batches, {report.postings} postings",
        f"head: {report.head_seq} {report.head_hash}",
        f"anchors (run records, closed periods) checked: {report.anchors}",
    ]
    first = report.first
    if first is None:
        lines.append("OK: every batch is chained and hashes to its entry")
        return "\n".join(lines)
    where = f"chain position {first.seq}" if first.seq else "not in the chain"
    lines.append(
        f"BROKEN: first broken batch {first.batch_id} ({where}): {first.detail}"
        f" [{len(report.breaks)} problem(s)]"
    )
    lines.extend(
        f"  batch {b.batch_id} (position {b.seq or '-'}): {b.detail}"
        for b in sorted(report.breaks, key=lambda b: (b.seq or 2**63, b.batch_id))[:MAX_LISTED]
    )
    return "\n".join(lines)
