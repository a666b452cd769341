"""The ledger store: applies batches atomically and idempotently on PostgreSQL or SQLite.

Each batch is one transaction. The touched accounts other than the bank are locked in sorted
order (``SELECT ... FOR UPDATE`` on PostgreSQL; SQLite's ``BEGIN IMMEDIATE`` serialises
writers), so concurrent batches on overlapping accounts neither lose updates nor deadlock.
The bank takes only relative updates, always last, so it never joins a lock cycle. The
idempotency key is unique: a replay, or a concurrent twin, fails its insert (or its plan) and
then reads and returns the first result, so the common path pays no extra read.
"""

from __future__ import annotations

import base64
import binascii
import json
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Engine, case, insert, or_, select, update
from sqlalchemy.exc import IntegrityError

from services.wallet import postgres, schema
from services.wallet.accounts import (
    ADMIN_REASONS,
    BANK,
    LOAD_TOKENS,
    STARTING_TOKENS,
    AccountKind,
    Reason,
    account_kind,
    check_name,
    parse_reason,
    player_account,
)
from services.wallet.batch import Posting, body_hash, plan_batch, touched_accounts, validate_batch
from services.wallet.database import is_sqlite
from services.wallet.errors import (
    AccountNotFound,
    IdempotencyKeyReused,
    InvalidRequest,
    WalletError,
)

# Keys the wallet uses for its own batches; clients may not use this namespace.
INTERNAL_KEY_PREFIX = "wallet:"
# Keeps "wallet:load:<player id>:<request id>" within the 200-character key column.
MAX_LOAD_REQUEST_ID = 64
DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 500


def _now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True, slots=True)
class BatchResult:
    """The outcome of a batch: the same value on the first call and on every replay."""

    batch_id: int
    applied: tuple[Posting, ...]
    balances: dict[str, int]
    replayed: bool = False

    def to_json(self) -> str:
        """What the batches table stores (the id lives in its own column)."""
        return json.dumps(
            {"applied": [p.to_json() for p in self.applied], "balances": self.balances},
            separators=(",", ":"),
        )

    @classmethod
    def from_json(cls, batch_id: int, text: str, *, replayed: bool) -> BatchResult:
        """The result stored by ``to_json``."""
        data = json.loads(text)
        applied = tuple(Posting.from_json(p) for p in data["applied"])
        return cls(batch_id, applied, dict(data["balances"]), replayed)


@dataclass(frozen=True, slots=True)
class Transfer:
    """A recorded posting."""

    transfer_id: int
    batch_id: int
    seq: int
    posting: Posting
    created_ms: int


@dataclass(frozen=True, slots=True)
class TransferFilter:
    """Filters of ``Ledger.list_transfers``; empty fields do not filter."""

    account: str = ""
    table_id: str = ""
    round: int = 0
    reason: str = ""


class Ledger:
    """Double-entry ledger of tokens over a SQLAlchemy engine. Methods block: call them off
    the event loop."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._sqlite = is_sqlite(engine)
        # Accounts are never deleted, so once seen an account need not be checked again.
        self._known: set[str] = set()

    # --- mutations -------------------------------------------------------------------

    def apply_batch(self, key: str, postings: Sequence[Posting]) -> BatchResult:
        """Apply ``postings`` atomically under idempotency key ``key`` (client keys)."""
        if key.startswith(INTERNAL_KEY_PREFIX):
            raise InvalidRequest(f"request_id may not start with {INTERNAL_KEY_PREFIX!r}")
        for p in postings:
            if p.reason in ADMIN_REASONS:
                raise InvalidRequest(
                    f"reason {p.reason!r} is posted only by the audited admin service",
                    reason="ADMIN_REASON",
                )
        return self._apply(key, postings)

    def apply_admin_batch(self, name: str, postings: Sequence[Posting]) -> BatchResult:
        """Apply an operator's batch under the internal key ``wallet:admin:<name>``."""
        return self._apply(f"{INTERNAL_KEY_PREFIX}admin:{name}", postings)

    def open_wallet(self, player_id: str, *, grant: bool = True) -> tuple[int, bool]:
        """Open a player's wallet, granting the starting tokens once (``grant=False``: open
        it empty, for a player whose device had its grant already).

        The wallet's row is created in the same transaction as its grant, so a wallet that
        exists was opened, with or without the grant; it is never granted later.
        Returns (balance now, True if this call opened the wallet)."""
        account = player_account(player_id)
        # Services open wallets before every settlement: answer an opened one with a read.
        with self._read() as conn:
            balance = conn.execute(
                select(schema.accounts.c.balance).where(schema.accounts.c.id == account)
            ).scalar_one_or_none()
        if balance is not None:
            return int(balance), False
        if not grant:
            with self.engine.begin() as conn:
                self._insert_missing(conn, [account])
            self._remember([account])
            return self.balance(account), True
        opening = Posting(BANK, account, STARTING_TOKENS, Reason.OPENING_GRANT.value)
        result = self._apply(f"{INTERNAL_KEY_PREFIX}open:{player_id}", [opening], create=[account])
        if not result.replayed:
            return result.balances[account], True
        return self.balance(account), False

    def load_tokens(self, player_id: str, request_id: str) -> BatchResult:
        """Load 50 tokens from the bank into an opened wallet; idempotent per request id."""
        account = player_account(player_id)
        if not request_id or len(request_id) > MAX_LOAD_REQUEST_ID or not request_id.isprintable():
            raise InvalidRequest(
                f"request_id (1 to {MAX_LOAD_REQUEST_ID} printable characters) is required"
            )
        load = Posting(BANK, account, LOAD_TOKENS, Reason.PLAYER_LOAD.value)
        return self._apply(f"{INTERNAL_KEY_PREFIX}load:{player_id}:{request_id}", [load])

    # --- reads -----------------------------------------------------------------------

    def balance(self, account: str) -> int:
        """The balance of ``account``; an unopened player is NotFound, an unused bowl is 0."""
        kind = account_kind(account)
        with self._read() as conn:
            value = conn.execute(
                select(schema.accounts.c.balance).where(schema.accounts.c.id == account)
            ).scalar_one_or_none()
        if value is None:
            if kind is AccountKind.PLAYER:
                raise AccountNotFound(f"no wallet {account!r}: open it first")
            return 0
        return int(value)

    def list_transfers(
        self, filters: TransferFilter, page_size: int = 0, page_token: str = ""
    ) -> tuple[list[Transfer], str]:
        """Postings matching ``filters``, newest first, and the next page's token."""
        p = schema.postings.c
        size = page_size or DEFAULT_PAGE_SIZE
        if not 0 < size <= MAX_PAGE_SIZE:
            raise InvalidRequest(f"page_size must be 1..{MAX_PAGE_SIZE}")
        query = select(schema.postings).order_by(p.id.desc()).limit(size + 1)
        if filters.account:
            account_kind(filters.account)
            query = query.where(
                or_(p.from_account == filters.account, p.to_account == filters.account)
            )
        if filters.table_id:
            check_name(filters.table_id, "table id")
            query = query.where(p.table_id == filters.table_id)
        if filters.round:
            query = query.where(p.round == filters.round)
        if filters.reason:
            query = query.where(p.reason == parse_reason(filters.reason).value)
        if page_token:
            query = query.where(p.id < _decode_token(page_token))
        with self._read() as conn:
            rows = conn.execute(query).all()
        transfers = [_transfer(row._mapping) for row in rows[:size]]
        more = len(rows) > size
        return transfers, _encode_token(transfers[-1].transfer_id) if more else ""

    # --- internals -------------------------------------------------------------------

    def _read(self) -> Any:
        conn = self.engine.connect()
        if self._sqlite:
            conn = conn.execution_options(sqlite_begin="DEFERRED")
        return conn

    def _apply(
        self, key: str, postings: Sequence[Posting], *, create: Sequence[str] = ()
    ) -> BatchResult:
        """Apply a batch; bowls and pots it names (and ``create``) are created on first use,
        inside the batch's transaction, so a refused batch leaves no account behind."""
        validate_batch(key, postings)
        digest = body_hash(postings)
        accounts = touched_accounts(postings)
        creatable = {a for a in accounts if account_kind(a) is not AccountKind.PLAYER}
        creatable.update(create)
        try:
            with self.engine.begin() as conn:
                result = self._apply_locked(
                    conn, key, digest, postings, accounts, creatable - self._known
                )
            self._remember(creatable)
            return result
        except (IntegrityError, WalletError):
            # The key may be taken: by an earlier batch (a replay: its first result is the
            # answer, even if the same postings could not apply now) or by a concurrent twin
            # that committed first. Replays are rare, so they alone pay for this read.
            with self._read() as conn:
                first = self._find(conn, key, digest)
            if first is None:
                raise
            return first

    def _apply_locked(
        self,
        conn: Connection,
        key: str,
        digest: str,
        postings: Sequence[Posting],
        accounts: list[str],
        new: set[str],
    ) -> BatchResult:
        own = [x for x in accounts if x != BANK]
        balances = self._lock(conn, own, new)
        missing = [x for x in own if x not in balances]
        if missing:
            raise AccountNotFound(f"no such account: {', '.join(missing)} (open the wallet first)")
        # The bank is not locked and may not be read consistently; its balance after the
        # batch comes from the relative UPDATE (no limit applies to it).
        plan = plan_batch(postings, {**balances, BANK: 0})
        now = _now_ms()
        result_balances = {x: plan.balances[x] for x in own}
        changed = {x: d for x, d in plan.deltas().items() if d or x == BANK}
        if self._sqlite:
            after = self._update_core(conn, changed)
        else:
            batch_id, after = postgres.write_batch(
                conn,
                key=key,
                digest=digest,
                result_parts=_result_parts(plan.applied, result_balances, BANK in changed),
                changed=changed,
                applied=plan.applied,
                now=now,
            )
        if BANK in changed and BANK not in after:
            raise RuntimeError("ledger invariant broken: the bank account is missing")
        if any(after[x] != result_balances[x] for x in after if x != BANK):
            raise RuntimeError("ledger invariant broken: a locked balance changed")
        if BANK in after:
            result_balances[BANK] = after[BANK]
        result = BatchResult(0, plan.applied, dict(sorted(result_balances.items())))
        if self._sqlite:
            batch_id = self._insert_core(conn, key, digest, result, now)
        return BatchResult(batch_id, result.applied, result.balances)

    def _lock(self, conn: Connection, own: list[str], new: set[str]) -> dict[str, int]:
        """Balances of ``own`` (sorted), locked until the transaction ends; those of ``new``
        that do not exist yet are created first, in this transaction (zero balance)."""
        if not self._sqlite:
            if new:
                return self._create_and_lock(conn, own, new)
            return postgres.lock_accounts(conn, own)
        # SQLite: BEGIN IMMEDIATE already holds the database's write lock.
        self._insert_missing(conn, sorted(new))
        a = schema.accounts.c
        query = select(a.id, a.balance).where(a.id.in_(own)).order_by(a.id)
        return {row.id: int(row.balance) for row in conn.execute(query)}

    @staticmethod
    def _update_core(conn: Connection, changed: dict[str, int]) -> dict[str, int]:
        """One relative UPDATE for every changed account, bank included (SQLite)."""
        if not changed:
            return {}
        a = schema.accounts.c
        rows = conn.execute(
            update(schema.accounts)
            .where(a.id.in_(sorted(changed)))
            .values(balance=a.balance + case(changed, value=a.id))
            .returning(a.id, a.balance)
        )
        return {row.id: int(row.balance) for row in rows}

    @staticmethod
    def _insert_core(conn: Connection, key: str, digest: str, result: BatchResult, now: int) -> int:
        """Insert the batch (unique key) with its result, then its postings (SQLite)."""
        batch_id = conn.execute(
            insert(schema.batches)
            .values(idempotency_key=key, body_hash=digest, result=result.to_json(), created_ms=now)
            .returning(schema.batches.c.id)
        ).scalar_one()
        conn.execute(
            insert(schema.postings),
            [
                {
                    "batch_id": batch_id,
                    "seq": seq,
                    "from_account": p.from_account,
                    "to_account": p.to_account,
                    "amount": p.amount,
                    "reason": p.reason,
                    "table_id": p.table_id or None,
                    "round": p.round or None,
                    "phase": p.phase or None,
                    "created_ms": now,
                }
                for seq, p in enumerate(result.applied)
            ],
        )
        return int(batch_id)

    def _find(self, conn: Connection, key: str, digest: str) -> BatchResult | None:
        b = schema.batches.c
        row = conn.execute(
            select(b.id, b.body_hash, b.result).where(b.idempotency_key == key)
        ).one_or_none()
        if row is None:
            return None
        if row.body_hash != digest:
            raise IdempotencyKeyReused(f"request_id {key!r} was already used for a different batch")
        return BatchResult.from_json(int(row.id), row.result, replayed=True)

    def _create_and_lock(self, conn: Connection, own: list[str], new: set[str]) -> dict[str, int]:
        """PostgreSQL, first use of an account: insert-or-skip and lock each account in the
        one sorted order, so a batch creating a bowl and one locking it never deadlock."""
        balances: dict[str, int] = {}
        for account in own:  # sorted
            if account in new:
                self._insert_missing(conn, [account])
            balances.update(postgres.lock_accounts(conn, [account]))
        return balances

    def _insert_missing(self, conn: Connection, accounts: Sequence[str]) -> None:
        now = _now_ms()
        for account in accounts:
            stmt = _insert_ignore(self._sqlite).values(
                id=account, kind=account_kind(account).value, balance=0, created_ms=now
            )
            conn.execute(stmt)

    def _remember(self, accounts: Iterable[str]) -> None:
        # Accounts are never deleted: once committed, no batch needs to create them again.
        self._known.update(accounts)


# Stands for the bank's balance in a result's JSON until the database supplies it.
_BANK_SLOT = "\x00bank\x00"


def _result_parts(
    applied: tuple[Posting, ...], balances: dict[str, int], with_bank: bool
) -> tuple[str, str]:
    """The stored result's JSON (as ``BatchResult.to_json``) split where the bank's balance
    after the batch goes; ("<whole JSON>", "") when the batch leaves the bank alone."""
    if not with_bank:
        return BatchResult(0, applied, dict(sorted(balances.items()))).to_json(), ""
    slotted: dict[str, int | str] = {**balances, BANK: _BANK_SLOT}
    text = json.dumps(
        {"applied": [p.to_json() for p in applied], "balances": dict(sorted(slotted.items()))},
        separators=(",", ":"),
    )
    head, slot, tail = text.partition(json.dumps(_BANK_SLOT))
    if not slot:
        raise RuntimeError("the bank's slot is missing from a batch result")
    return head, tail


def _insert_ignore(sqlite: bool) -> Any:
    if sqlite:
        from sqlalchemy.dialects.sqlite import insert as sqlite_insert

        return sqlite_insert(schema.accounts).on_conflict_do_nothing()
    from sqlalchemy.dialects.postgresql import insert as pg_insert

    return pg_insert(schema.accounts).on_conflict_do_nothing()


def _transfer(row: Any) -> Transfer:
    posting = Posting(
        row["from_account"],
        row["to_account"],
        int(row["amount"]),
        row["reason"],
        row["table_id"] or "",
        int(row["round"] or 0),
        row["phase"] or "",
    )
    return Transfer(
        int(row["id"]), int(row["batch_id"]), int(row["seq"]), posting, int(row["created_ms"])
    )


_MAX_BIGINT = 2**63 - 1


def _encode_token(last_id: int) -> str:
    return base64.urlsafe_b64encode(f"t1:{last_id}".encode()).decode()


def _decode_token(token: str) -> int:
    try:
        text = base64.urlsafe_b64decode(token.encode()).decode()
        version, _, number = text.partition(":")
        if version != "t1" or not number.isdigit() or len(number) > 19:
            raise ValueError(version)
        last_id = int(number)
        # Transfer ids are BIGINT: a forged larger number must not reach the database.
        if not 0 < last_id <= _MAX_BIGINT:
            raise ValueError(number)
        return last_id
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise InvalidRequest("malformed page_token", "INVALID_PAGE_TOKEN") from None
