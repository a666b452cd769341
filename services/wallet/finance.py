"""Finance reads of the ledger: exports of a period, totals per reason, balances as of a past
moment, a period's close, and what the ledger holds for one table (the drift check's side).

Read-only. Every time here is a posting's *effective* time (``effective_ms``, UTC
milliseconds: its commit time, unless that fell in a closed month, then the first instant
after the closed months; ``services/wallet/periods.py``), and a period is ``[since, until)``.
Exports walk the ``(effective_ms, id)`` index a page at a time (keyset, never OFFSET), so a
period of any size streams in constant memory and a job resumes from the cursor of the last
page it kept. Balances as of a moment are today's balances minus what moved since, so a
recent moment (a month-end close) reads only the postings after it. Statements (one
account, with its running balance) and the list of accounts are here too.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, Engine, case, func, literal, or_, select, tuple_, union_all

from services.wallet import chain, periods, schema
from services.wallet.accounts import (
    BANK,
    AccountKind,
    Reason,
    account_kind,
    check_name,
    parse_reason,
)
from services.wallet.batch import Posting
from services.wallet.database import is_sqlite
from services.wallet.errors import AccountNotFound, InvalidRequest
from services.wallet.ledger import Transfer

DEFAULT_CHUNK = 1_000
MAX_CHUNK = 5_000
MAX_ASOF_ACCOUNTS = 100
DEFAULT_TABLE_PAGE = 500
MAX_TABLE_PAGE = 1_000
_MAX_BIGINT = 2**63 - 1
KINDS: tuple[str, ...] = tuple(k.value for k in AccountKind)
"""Every kind of account, in report order (player, bowl, pot, bank)."""
REASON_ORDER: tuple[str, ...] = tuple(r.value for r in Reason)


def _read(engine: Engine) -> Connection:
    """A read-only connection whose transaction is one consistent snapshot."""
    conn = engine.connect()
    if is_sqlite(engine):
        return conn.execution_options(sqlite_begin="DEFERRED")
    return conn.execution_options(isolation_level="REPEATABLE READ")


def check_period(since_ms: int, until_ms: int) -> None:
    """Refuse a period that is empty, reversed or outside 64-bit milliseconds."""
    if since_ms <= 0 or until_ms <= 0:
        raise InvalidRequest("since and until are required", "INVALID_PERIOD")
    if until_ms <= since_ms:
        raise InvalidRequest("until must be after since", "INVALID_PERIOD")


# --- export -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ExportFilter:
    """What an export covers: ``[since_ms, until_ms)`` plus optional filters."""

    since_ms: int
    until_ms: int
    account: str = ""
    table_id: str = ""
    reason: str = ""

    def check(self) -> None:
        """Refuse malformed filters (InvalidRequest) before anything is read."""
        check_period(self.since_ms, self.until_ms)
        if self.account:
            account_kind(self.account)
        if self.table_id:
            check_name(self.table_id, "table id")
        if self.reason:
            parse_reason(self.reason)


def encode_cursor(created_ms: int, transfer_id: int) -> str:
    """The opaque cursor after a posting."""
    return base64.urlsafe_b64encode(f"x1:{created_ms}:{transfer_id}".encode()).decode()


def decode_cursor(cursor: str) -> tuple[int, int]:
    """``(created_ms, transfer_id)`` of a cursor, or InvalidRequest ``INVALID_CURSOR``."""
    try:
        version, ms, number = base64.urlsafe_b64decode(cursor.encode()).decode().split(":")
        if version != "x1" or not (ms.isdigit() and number.isdigit()):
            raise ValueError(version)
        if len(ms) > 18 or len(number) > 19 or int(number) > _MAX_BIGINT:
            raise ValueError(number)
        return int(ms), int(number)
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise InvalidRequest("malformed cursor", "INVALID_CURSOR") from None


def _transfer(row: tuple[Any, ...]) -> Transfer:
    transfer_id, batch_id, seq, created_ms, src, dst, amount, reason, table, rnd, phase = row[:11]
    effective_ms = row[11] if len(row) > 11 else created_ms
    posting = Posting(src, dst, int(amount), reason, table or "", int(rnd or 0), phase or "")
    return Transfer(
        int(transfer_id), int(batch_id), int(seq), posting, int(created_ms), int(effective_ms)
    )


def require_accounts(conn: Connection, accounts: Sequence[str]) -> None:
    """Refuse (AccountNotFound) a player whose wallet was never opened, as ``GetBalance``
    does everywhere; a bowl or pot not used yet exists implicitly, holding 0."""
    a = schema.accounts.c
    wanted = {x for x in accounts if account_kind(x) is AccountKind.PLAYER}
    found = {str(r[0]) for r in conn.execute(select(a.id).where(a.id.in_(wanted)))}
    missing = sorted(wanted - found)
    if missing:
        raise AccountNotFound(f"no such account: {', '.join(missing)}")


EXPORT_COLUMNS = (
    "id",
    "batch_id",
    "seq",
    "created_ms",
    "from_account",
    "to_account",
    "amount",
    "reason",
    "table_id",
    "round",
    "phase",
    "effective_ms",
)
"""The order of the values in a row of :func:`export_rows`."""


def export_rows(
    engine: Engine, filters: ExportFilter, cursor: str = "", size: int = 0
) -> tuple[list[tuple[Any, ...]], str]:
    """One page of an export as plain rows (values in ``EXPORT_COLUMNS`` order; table, round
    and phase may be None), in ``(effective_ms, id)`` order, and the cursor after it (``""``
    once the period is exhausted). No object per row: large exports read through this."""
    size = size or DEFAULT_CHUNK
    if not 0 < size <= MAX_CHUNK:
        raise InvalidRequest(f"chunk_size must be 1..{MAX_CHUNK}", "INVALID_CHUNK_SIZE")
    filters.check()
    p = schema.postings.c
    query = (
        select(*(p[name] for name in EXPORT_COLUMNS))
        .where(p.effective_ms >= filters.since_ms, p.effective_ms < filters.until_ms)
        .order_by(p.effective_ms, p.id)
        .limit(size)
    )
    if cursor:
        after_ms, after_id = decode_cursor(cursor)
        query = query.where(tuple_(p.effective_ms, p.id) > tuple_(after_ms, after_id))
    if filters.account:
        query = query.where(or_(p.from_account == filters.account, p.to_account == filters.account))
    if filters.table_id:
        query = query.where(p.table_id == filters.table_id)
    if filters.reason:
        query = query.where(p.reason == parse_reason(filters.reason).value)
    with _read(engine) as conn:
        if filters.account and not cursor:
            require_accounts(conn, [filters.account])
        rows = _plain_rows(conn, query)
    if len(rows) < size:
        return rows, ""
    return rows, encode_cursor(int(rows[-1][-1]), int(rows[-1][0]))


def _plain_rows(conn: Connection, query: Any) -> list[tuple[Any, ...]]:
    """The rows of ``query`` as plain tuples. On PostgreSQL straight from a binary psycopg
    cursor: SQLAlchemy's row objects cost more than the database's read (docs/BENCHMARKS.md,
    "Finance at 10 million postings, again")."""
    if is_sqlite(conn.engine):
        return [tuple(row) for row in conn.execute(query)]
    compiled = query.compile(dialect=conn.dialect)
    raw = conn.connection.driver_connection
    assert raw is not None  # a checked-out connection always has one
    with raw.cursor(binary=True) as cursor:
        cursor.execute(str(compiled), compiled.params)
        rows: list[tuple[Any, ...]] = cursor.fetchall()
        return rows


def export_page(
    engine: Engine, filters: ExportFilter, cursor: str = "", size: int = 0
) -> tuple[list[Transfer], str]:
    """One page of an export, in ``(effective_ms, id)`` order, and the cursor after it
    (``""`` once the period is exhausted)."""
    rows, cursor = export_rows(engine, filters, cursor, size)
    return [_transfer(row) for row in rows], cursor


def export(
    engine: Engine, filters: ExportFilter, cursor: str = "", size: int = 0
) -> Iterator[tuple[list[Transfer], str]]:
    """Every page of an export from ``cursor`` on; each with the cursor to resume after it."""
    while True:
        page, cursor = export_page(engine, filters, cursor, size)
        if page or not cursor:
            yield page, cursor
        if not cursor:
            return


# --- totals -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ReasonTotal:
    """The postings of one reason in a period."""

    reason: str
    postings: int
    tokens: int
    from_bank: int
    to_bank: int

    @property
    def outstanding_change(self) -> int:
        """How much this reason changed the tokens held outside the bank."""
        return self.from_bank - self.to_bank


def _reason_totals(conn: Connection, since_ms: int, until_ms: int) -> list[ReasonTotal]:
    p = schema.postings.c
    query = (
        select(
            p.reason,
            func.count(),
            func.sum(p.amount),
            func.sum(case((p.from_account == BANK, p.amount), else_=0)),
            func.sum(case((p.to_account == BANK, p.amount), else_=0)),
        )
        .where(p.effective_ms >= since_ms, p.effective_ms < until_ms)
        .group_by(p.reason)
    )
    rows = {
        r[0]: ReasonTotal(r[0], int(r[1]), int(r[2]), int(r[3]), int(r[4]))
        for r in conn.execute(query)
    }
    order = {reason: n for n, reason in enumerate(REASON_ORDER)}
    return [rows[r] for r in sorted(rows, key=lambda r: (order.get(r, len(order)), r))]


def reason_totals(engine: Engine, since_ms: int, until_ms: int) -> list[ReasonTotal]:
    """Totals per reason of the postings effective in ``[since_ms, until_ms)``."""
    check_period(since_ms, until_ms)
    with _read(engine) as conn, conn.begin():
        return _reason_totals(conn, since_ms, until_ms)


# --- balances as of a moment ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class KindTotal:
    """What the accounts of one kind held."""

    kind: str
    tokens: int
    accounts: int


@dataclass(slots=True)
class AsOf:
    """Balances at a moment: the named accounts, and the totals per kind (they sum to 0)."""

    balances: dict[str, int] = field(default_factory=dict)
    kinds: list[KindTotal] = field(default_factory=list)

    @property
    def outstanding(self) -> int:
        """Tokens held outside the bank (players, bowls, pots): minus the bank's balance."""
        return sum(k.tokens for k in self.kinds if k.kind != AccountKind.BANK)


def _moved_since(conn: Connection, as_of_ms: int) -> Any:
    """Per account, the net change brought by postings effective at or after ``as_of_ms``."""
    p = schema.postings.c
    moves = union_all(
        select(p.to_account.label("account"), p.amount.label("delta")).where(
            p.effective_ms >= as_of_ms
        ),
        select(p.from_account.label("account"), (literal(0) - p.amount).label("delta")).where(
            p.effective_ms >= as_of_ms
        ),
    ).subquery()
    return select(moves.c.account, func.sum(moves.c.delta).label("delta")).group_by(moves.c.account)


def _as_of(conn: Connection, as_of_ms: int, accounts: Sequence[str]) -> AsOf:
    a = schema.accounts.c
    tokens = dict.fromkeys(KINDS, 0)
    holders = dict.fromkeys(KINDS, 0)
    now_by_kind = select(
        a.kind, func.sum(a.balance), func.sum(case((a.balance != 0, 1), else_=0))
    ).group_by(a.kind)
    for kind, total, nonzero in conn.execute(now_by_kind):
        tokens[kind] += int(total or 0)
        holders[kind] += int(nonzero or 0)
    moved = _moved_since(conn, as_of_ms).subquery()
    changed = select(a.id, a.kind, a.balance, moved.c.delta).join(moved, moved.c.account == a.id)
    wanted = set(accounts)
    result = AsOf()
    for account, kind, balance, delta in conn.execute(changed):
        then = int(balance) - int(delta)
        tokens[kind] -= int(delta)
        holders[kind] += (then != 0) - (int(balance) != 0)
        if account in wanted:
            result.balances[account] = then
    if wanted - set(result.balances):
        rest = select(a.id, a.balance).where(a.id.in_(wanted - set(result.balances)))
        current = {str(r[0]): int(r[1]) for r in conn.execute(rest)}
        for account in wanted - set(result.balances):
            result.balances[account] = int(current.get(account, 0))
    result.balances = {account: result.balances[account] for account in accounts}
    result.kinds = [KindTotal(k, tokens[k], holders[k]) for k in KINDS]
    return result


def balances_as_of(engine: Engine, as_of_ms: int, accounts: Sequence[str] = ()) -> AsOf:
    """Balances after every posting effective strictly before ``as_of_ms``; a named account
    the ledger never opened is refused (AccountNotFound), whatever its kind."""
    if as_of_ms <= 0:
        raise InvalidRequest("as_of is required", "INVALID_PERIOD")
    if len(accounts) > MAX_ASOF_ACCOUNTS:
        raise InvalidRequest(f"at most {MAX_ASOF_ACCOUNTS} accounts", "TOO_MANY_ACCOUNTS")
    for account in accounts:
        account_kind(account)
    with _read(engine) as conn, conn.begin():
        require_accounts(conn, accounts)
        return _as_of(conn, as_of_ms, list(dict.fromkeys(accounts)))


@dataclass(frozen=True, slots=True)
class PeriodSummary:
    """A period's close: opening + sum of movements' outstanding change = closing."""

    since_ms: int
    until_ms: int
    opening: list[KindTotal]
    closing: list[KindTotal]
    movements: list[ReasonTotal]
    closed: bool = False
    """Final: the period lies wholly before the end of the closed months."""
    closes: list[periods.ClosedPeriod] = field(default_factory=list)
    """The closed months the period overlaps."""

    @property
    def opening_outstanding(self) -> int:
        return sum(k.tokens for k in self.opening if k.kind != AccountKind.BANK)

    @property
    def closing_outstanding(self) -> int:
        return sum(k.tokens for k in self.closing if k.kind != AccountKind.BANK)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (what ``kishpa wallet report --json`` prints)."""
        return {
            "since_ms": self.since_ms,
            "until_ms": self.until_ms,
            "opening_outstanding": self.opening_outstanding,
            "closing_outstanding": self.closing_outstanding,
            "movements": [
                {
                    "reason": m.reason,
                    "postings": m.postings,
                    "tokens": m.tokens,
                    "from_bank": m.from_bank,
                    "to_bank": m.to_bank,
                }
                for m in self.movements
            ],
            "closed": self.closed,
            "opening": {k.kind: {"tokens": k.tokens, "accounts": k.accounts} for k in self.opening},
            "closing": {k.kind: {"tokens": k.tokens, "accounts": k.accounts} for k in self.closing},
        }


def period_summary(engine: Engine, since_ms: int, until_ms: int) -> PeriodSummary:
    """Opening and closing holdings and the movements between, from one snapshot."""
    check_period(since_ms, until_ms)
    with _read(engine) as conn, conn.begin():
        opening = _as_of(conn, since_ms, ())
        closing = _as_of(conn, until_ms, ())
        movements = _reason_totals(conn, since_ms, until_ms)
        closed, closes = period_state(conn, since_ms, until_ms)
    return PeriodSummary(
        since_ms, until_ms, opening.kinds, closing.kinds, movements, closed, closes
    )


def period_state(
    conn: Connection, since_ms: int, until_ms: int
) -> tuple[bool, list[periods.ClosedPeriod]]:
    """Whether ``[since_ms, until_ms)`` is final, and the closes it overlaps."""
    cp = schema.closed_periods.c
    rows = conn.execute(
        select(schema.closed_periods)
        .where(cp.since_ms < until_ms, cp.until_ms > since_ms)
        .order_by(cp.since_ms)
    ).all()
    closed_until = chain.read_head(conn).closed_until_ms
    return until_ms <= closed_until, [periods.row_period(r) for r in rows]


# --- one table, for the drift check -----------------------------------------------------


@dataclass(frozen=True, slots=True)
class LedgerBatch:
    """A batch with a posting naming a table: its id, key and postings."""

    batch_id: int
    request_id: str
    transfers: list[Transfer]


@dataclass(frozen=True, slots=True)
class TableLedger:
    """What the ledger holds for one table."""

    bowl: int
    pot: int
    batches: list[LedgerBatch]


def table_ledger(engine: Engine, table_id: str, rounds: Sequence[int] = ()) -> TableLedger:
    """The table's bowl and pot, and every batch with a posting of the table (only of one
    of ``rounds`` when given: an index read of those rounds, whatever the table's age)."""
    check_name(table_id, "table id")
    a, b, p = schema.accounts.c, schema.batches.c, schema.postings.c
    of_rounds = select(p.batch_id).where(p.table_id == table_id)
    if rounds:
        # Round 0 (a Hand table's first buy-in) is stored as NULL.
        numbered = sorted({r for r in rounds if r})
        of_rounds = of_rounds.where(
            or_(p.round.in_(numbered), p.round.is_(None)) if 0 in rounds else p.round.in_(numbered)
        )
    of_table = of_rounds.distinct().subquery()
    query = (
        select(*(p[name] for name in EXPORT_COLUMNS), b.idempotency_key)
        .join(schema.batches, b.id == p.batch_id)
        .where(p.batch_id.in_(select(of_table.c.batch_id)))
        .order_by(p.batch_id, p.seq)
    )
    accounts = (f"bowl:{table_id}", f"pot:{table_id}")
    with _read(engine) as conn, conn.begin():
        held = {
            str(r[0]): int(r[1])
            for r in conn.execute(select(a.id, a.balance).where(a.id.in_(accounts)))
        }
        batches: list[LedgerBatch] = []
        for row in conn.execute(query):
            if not batches or batches[-1].batch_id != row.batch_id:
                batches.append(LedgerBatch(int(row.batch_id), row.idempotency_key, []))
            batches[-1].transfers.append(_transfer(tuple(row)[:-1]))
    return TableLedger(int(held.get(accounts[0], 0)), int(held.get(accounts[1], 0)), batches)


def table_accounts(
    engine: Engine, page_size: int = 0, page_token: str = ""
) -> tuple[list[tuple[str, int]], str]:
    """Bowls and pots holding tokens, by id, a page at a time (token: the last id)."""
    size = page_size or DEFAULT_TABLE_PAGE
    if not 0 < size <= MAX_TABLE_PAGE:
        raise InvalidRequest(f"page_size must be 1..{MAX_TABLE_PAGE}", "INVALID_PAGE_SIZE")
    after = ""
    if page_token:
        try:
            after = base64.urlsafe_b64decode(page_token.encode()).decode()
            account_kind(after)
        except (ValueError, binascii.Error, UnicodeDecodeError, InvalidRequest):
            raise InvalidRequest("malformed page_token", "INVALID_PAGE_TOKEN") from None
    a = schema.accounts.c
    query = (
        select(a.id, a.balance)
        .where(a.kind.in_(("bowl", "pot")), a.balance != 0, a.id > after)
        .order_by(a.id)
        .limit(size + 1)
    )
    with _read(engine) as conn:
        rows = [(str(r[0]), int(r[1])) for r in conn.execute(query)]
    more = len(rows) > size
    rows = rows[:size]
    token = base64.urlsafe_b64encode(rows[-1][0].encode()).decode() if more else ""
    return rows, token


# --- statements and accounts (finance step 2) -------------------------------------------

DEFAULT_STATEMENT_CHUNK = 5_000
MAX_STATEMENT_CHUNK = 10_000
DEFAULT_ACCOUNT_PAGE = 500
MAX_ACCOUNT_PAGE = 1_000


@dataclass(frozen=True, slots=True)
class StatementLine:
    """One posting of a statement, seen from its account: signed amount (into the account
    positive), the other account, and the balance right after it."""

    transfer_id: int
    batch_id: int
    seq: int
    effective_ms: int
    posted_ms: int
    reason: str
    table_id: str
    round: int | None
    """None when the posting is about no round (no table)."""
    phase: str
    counterparty: str
    amount: int
    balance: int


@dataclass(slots=True)
class Statement:
    """A statement's header and footer; the lines stream separately."""

    account: str
    since_ms: int
    until_ms: int
    opening: int
    closing: int = 0
    closed: bool = False


def statement(
    engine: Engine, account: str, since_ms: int = 0, until_ms: int = 0, chunk: int = 0
) -> Iterator[tuple[Statement, list[StatementLine]]]:
    """The postings of ``account`` effective in ``[since_ms, until_ms)`` (0: from the start,
    until now), in (effective time, id) order, a chunk at a time, each line with the running
    balance. The opening balance is the balance now less what moved since ``since_ms``; the
    closing one (set when the last chunk is yielded) is the opening plus the lines. Every
    chunk is read on one snapshot. An account the ledger never opened: AccountNotFound."""
    size = chunk or DEFAULT_STATEMENT_CHUNK
    if not 0 < size <= MAX_STATEMENT_CHUNK:
        raise InvalidRequest(f"chunk_size must be 1..{MAX_STATEMENT_CHUNK}", "INVALID_CHUNK_SIZE")
    account_kind(account)
    until = until_ms or _MAX_BIGINT
    if since_ms < 0 or until <= since_ms:
        raise InvalidRequest("until must be after since", "INVALID_PERIOD")
    p, a = schema.postings.c, schema.accounts.c
    mine = or_(p.from_account == account, p.to_account == account)
    signed = case((p.to_account == account, p.amount), else_=literal(0) - p.amount)
    with _read(engine) as conn, conn.begin():
        require_accounts(conn, [account])
        if not is_sqlite(engine):
            # The lines are sorted by effective time: in memory, not in a file on disk.
            conn.exec_driver_sql("SET LOCAL work_mem = '64MB'")
        opening = 0  # every account starts at 0: nothing is effective before the epoch
        if since_ms > 0:
            now = conn.execute(select(a.balance).where(a.id == account)).scalar_one_or_none()
            since_then = conn.execute(
                select(func.coalesce(func.sum(signed), 0)).where(mine, p.effective_ms >= since_ms)
            ).scalar_one()
            opening = int(now or 0) - int(since_then)
        head = Statement(account, since_ms, until, opening)
        head.closed = period_state(conn, since_ms, until)[0] if until_ms else False
        query = (
            select(
                p.id,
                p.batch_id,
                p.seq,
                p.effective_ms,
                p.created_ms,
                p.reason,
                p.table_id,
                p.round,
                p.phase,
                p.from_account,
                p.to_account,
                p.amount,
            )
            .where(mine, p.effective_ms >= since_ms, p.effective_ms < until)
            .order_by(p.effective_ms, p.id)
        )
        balance = head.opening
        lines: list[StatementLine] = []
        for row in _stream_rows(conn, query):
            tid, bid, seq, eff, posted, reason, table, rnd, phase, src, dst, amount = row
            delta = int(amount) if dst == account else -int(amount)
            balance += delta
            lines.append(
                StatementLine(
                    tid,
                    bid,
                    seq,
                    eff,
                    posted,
                    reason,
                    table or "",
                    (rnd or 0) if table else None,
                    phase or "",
                    src if dst == account else dst,
                    delta,
                    balance,
                )
            )
            if len(lines) >= size:
                yield head, lines
                lines = []
        head.closing = balance
        yield head, lines


def _stream_rows(conn: Connection, query: Any) -> Iterator[tuple[Any, ...]]:
    """The rows of ``query`` as plain tuples, fetched in batches (binary psycopg cursor on
    PostgreSQL, as :func:`_plain_rows`)."""
    if is_sqlite(conn.engine):
        yield from (tuple(row) for row in conn.execute(query))
        return
    compiled = query.compile(dialect=conn.dialect)
    raw = conn.connection.driver_connection
    assert raw is not None  # a checked-out connection always has one
    with raw.cursor(binary=True) as cursor:
        cursor.execute(str(compiled), compiled.params)
        while batch := cursor.fetchmany(10_000):
            yield from batch


@dataclass(frozen=True, slots=True)
class AccountRow:
    """An account and its balance now."""

    account: str
    kind: str
    balance: int
    created_ms: int


def list_accounts(
    engine: Engine, kind: str = "", page_size: int = 0, page_token: str = ""
) -> tuple[list[AccountRow], str]:
    """Accounts by id, a page at a time (token: the last id), optionally of one kind."""
    size = page_size or DEFAULT_ACCOUNT_PAGE
    if not 0 < size <= MAX_ACCOUNT_PAGE:
        raise InvalidRequest(f"page_size must be 1..{MAX_ACCOUNT_PAGE}", "INVALID_PAGE_SIZE")
    if kind and kind not in KINDS:
        raise InvalidRequest(f"kind must be one of {', '.join(KINDS)}", "INVALID_KIND")
    after = ""
    if page_token:
        try:
            after = base64.urlsafe_b64decode(page_token.encode()).decode()
            account_kind(after)
        except (ValueError, binascii.Error, UnicodeDecodeError, InvalidRequest):
            raise InvalidRequest("malformed page_token", "INVALID_PAGE_TOKEN") from None
    a = schema.accounts.c
    query = select(a.id, a.kind, a.balance, a.created_ms).where(a.id > after)
    if kind:
        query = query.where(a.kind == kind)
    with _read(engine) as conn:
        rows = conn.execute(query.order_by(a.id).limit(size + 1)).all()
    found = [AccountRow(str(r[0]), str(r[1]), int(r[2]), int(r[3])) for r in rows[:size]]
    more = len(rows) > size
    token = base64.urlsafe_b64encode(found[-1].account.encode()).decode() if more else ""
    return found, token
