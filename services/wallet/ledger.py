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

from services.wallet import chain, postgres, schema
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
    effective_ms: int = 0
    """When it counts (finance step 2): ``created_ms`` unless a closed period moved it."""


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
        # The first instant not in a closed period (None: not read yet). A batch planned
        # with a stale value is caught under the chain head's lock and tried again.
        self._closed_until: int | None = None

    # --- mutations -------------------------------------------------------------------

    def apply_batch(self, key: str, postings: Sequence[Posting]) -> BatchResult:
        """Apply ``postings`` atomically under idempotency key ``key`` (client keys)."""
        check_client_batch(key, postings)
        return self._apply(key, postings)

    def apply_group(
        self, batches: Sequence[tuple[str, Sequence[Posting]]]
    ) -> list[BatchResult | Exception]:
        """Apply client batches as ``apply_batch`` does each, sharing one transaction (and
        so one commit) where they can; the outcome of each, in order.

        Each batch stays atomic and idempotent on its own: one that is refused (malformed,
        short of funds, an unopened player) is left out and the others apply. Batches that
        cannot share the transaction go alone afterwards, through ``apply_batch``: a key
        repeated inside the group (its later copies then replay the first) and a batch that
        would create a bowl or pot (so a refused batch still leaves no account behind). If
        the shared transaction fails as a whole (a concurrent twin took a key, the database
        went away mid-commit), every batch of it is retried alone, where idempotency sorts
        out what did commit.
        """
        outcomes: list[BatchResult | Exception | None] = [None] * len(batches)
        shared: list[int] = []
        alone: list[int] = []
        keys: set[str] = set()
        for i, (key, postings) in enumerate(batches):
            try:
                check_client_batch(key, postings)
                validate_batch(key, postings)
            except WalletError as exc:
                outcomes[i] = exc
                continue
            creatable = {
                a for a in touched_accounts(postings) if account_kind(a) is not AccountKind.PLAYER
            }
            if key in keys or creatable - self._known:
                alone.append(i)
            else:
                keys.add(key)
                shared.append(i)
        if len(shared) == 1:
            alone[:0] = shared
        elif shared:
            try:
                with self.engine.begin() as conn:
                    self._apply_shared(conn, batches, shared, outcomes)
            except Exception:  # every batch of it is retried alone below
                for i in shared:
                    outcomes[i] = None
                alone[:0] = shared
        for i in alone:
            try:
                outcomes[i] = self._apply(*batches[i])
            except Exception as exc:  # it is this batch's outcome
                outcomes[i] = exc
        return [_settled(o) for o in outcomes]

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
            for attempt in range(3):
                try:
                    with self.engine.begin() as conn:
                        result = self._apply_locked(
                            conn, key, digest, postings, accounts, creatable - self._known
                        )
                    break
                except chain.PeriodClosedMeanwhile:
                    if attempt == 2:
                        raise
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
        effective = self._effective(conn, now)
        result_balances = {x: plan.balances[x] for x in own}
        changed = {x: d for x, d in plan.deltas().items() if d or x == BANK}
        if self._sqlite:
            after = self._update_core(conn, changed)
        else:
            write = postgres.BatchWrite(
                key,
                digest,
                _result_parts(plan.applied, result_balances, BANK in changed),
                0 if BANK in changed else None,
                plan.applied,
            )
            ids, after = postgres.write_batches(conn, changed, [write], now, effective)
            batch_id = ids[key]
        if BANK in changed and BANK not in after:
            raise RuntimeError("ledger invariant broken: the bank account is missing")
        if any(after[x] != result_balances[x] for x in after if x != BANK):
            raise RuntimeError("ledger invariant broken: a locked balance changed")
        if BANK in after:
            result_balances[BANK] = after[BANK]
        result = BatchResult(0, plan.applied, dict(sorted(result_balances.items())))
        if self._sqlite:
            batch_id = self._insert_core(conn, key, digest, result, now, effective)
        self._chain(conn, [chain.Written(batch_id, key, digest, now, effective, plan.applied)])
        return BatchResult(batch_id, result.applied, result.balances)

    def _effective(self, conn: Connection, now: int) -> int:
        """A batch's effective time: now, or the first open instant when now is closed."""
        if self._closed_until is None:
            self._closed_until = chain.read_head(conn).closed_until_ms
        return max(now, self._closed_until)

    def _chain(self, conn: Connection, written: list[chain.Written]) -> None:
        """Append the transaction's batches to the chain (the last lock it takes)."""
        try:
            chain.append(conn, written)
        except chain.PeriodClosedMeanwhile as exc:
            self._closed_until = int(exc.args[0])
            raise

    def _apply_shared(
        self,
        conn: Connection,
        batches: Sequence[tuple[str, Sequence[Posting]]],
        shared: list[int],
        outcomes: list[BatchResult | Exception | None],
    ) -> None:
        """Plan and write the batches ``shared`` in this one transaction; fills ``outcomes``.

        Every account any of them touches (but the bank) is locked first, in the one sorted
        order, so two groups (or a group and a lone batch) never deadlock. Replays are found
        after the locks: a twin that held them has committed by then. Each batch is planned
        against the balances the earlier ones of the group left.
        """
        touched = {i: touched_accounts(batches[i][1]) for i in shared}
        own = sorted({a for i in shared for a in touched[i] if a != BANK})
        balances = self._lock(conn, own, set())
        keys = [batches[i][0] for i in shared]
        if self._sqlite:
            stored = {k: v for k in keys if (v := self._stored(conn, k)) is not None}
        else:
            stored = postgres.find_batches(conn, keys)
        now = _now_ms()
        effective = self._effective(conn, now)
        planned: list[_Planned] = []
        bank_moved = 0  # into the bank by the group so far
        for i in shared:
            key, postings = batches[i]
            digest = body_hash(postings)
            if key in stored:
                try:
                    outcomes[i] = _replay(key, digest, *stored[key])
                except WalletError as exc:
                    outcomes[i] = exc
                continue
            mine = [x for x in touched[i] if x != BANK]
            missing = [x for x in mine if x not in balances]
            if missing:
                outcomes[i] = AccountNotFound(
                    f"no such account: {', '.join(missing)} (open the wallet first)"
                )
                continue
            try:
                plan = plan_batch(postings, {**{x: balances[x] for x in mine}, BANK: 0})
            except WalletError as exc:
                outcomes[i] = exc
                continue
            deltas = {x: d for x, d in plan.deltas().items() if d or x == BANK}
            bank_moved += deltas.get(BANK, 0)
            balances.update({x: plan.balances[x] for x in mine})
            planned.append(
                _Planned(
                    i, key, digest, plan.applied, deltas, {x: balances[x] for x in mine}, bank_moved
                )
            )
        if not planned:
            return
        if self._sqlite:
            results = self._write_shared_sqlite(conn, planned, now, effective)
            after = {x: balances[x] for x in own}
        else:
            results, after = self._write_shared_postgres(conn, planned, bank_moved, now, effective)
        if any(after[x] != balances[x] for x in after if x != BANK):
            raise RuntimeError("ledger invariant broken: a locked balance changed")
        self._chain(
            conn,
            [
                chain.Written(result.batch_id, item.key, item.digest, now, effective, item.applied)
                for item, result in zip(planned, results, strict=True)
            ],
        )
        for item, result in zip(planned, results, strict=True):
            outcomes[item.index] = result

    def _write_shared_sqlite(
        self, conn: Connection, planned: list[_Planned], now: int, effective: int
    ) -> list[BatchResult]:
        """SQLite: the batches one after the other (the transaction's one commit is the gain)."""
        results = []
        for item in planned:
            after = self._update_core(conn, item.deltas)
            balances = dict(item.balances)
            if BANK in after:
                balances[BANK] = after[BANK]
            result = BatchResult(0, item.applied, dict(sorted(balances.items())))
            batch_id = self._insert_core(conn, item.key, item.digest, result, now, effective)
            results.append(BatchResult(batch_id, result.applied, result.balances))
        return results

    @staticmethod
    def _write_shared_postgres(
        conn: Connection, planned: list[_Planned], bank_moved: int, now: int, effective: int
    ) -> tuple[list[BatchResult], dict[str, int]]:
        """PostgreSQL: every batch of the group in one write statement. The bank's balance
        after a batch is the bank's after the statement less what the later batches moved."""
        changed: dict[str, int] = {}
        for item in planned:
            for x, d in item.deltas.items():
                changed[x] = changed.get(x, 0) + d
        writes = [
            postgres.BatchWrite(
                item.key,
                item.digest,
                _result_parts(item.applied, item.balances, BANK in item.deltas),
                bank_moved - item.bank_moved if BANK in item.deltas else None,
                item.applied,
            )
            for item in planned
        ]
        ids, after = postgres.write_batches(conn, changed, writes, now, effective)
        if BANK in changed and BANK not in after:
            raise RuntimeError("ledger invariant broken: the bank account is missing")
        results = []
        for item in planned:
            balances = dict(item.balances)
            if BANK in item.deltas:
                balances[BANK] = after[BANK] - (bank_moved - item.bank_moved)
            results.append(BatchResult(ids[item.key], item.applied, dict(sorted(balances.items()))))
        return results, after

    def _stored(self, conn: Connection, key: str) -> tuple[int, str, str] | None:
        b = schema.batches.c
        row = conn.execute(
            select(b.id, b.body_hash, b.result).where(b.idempotency_key == key)
        ).one_or_none()
        return None if row is None else (int(row.id), row.body_hash, row.result)

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
    def _insert_core(
        conn: Connection, key: str, digest: str, result: BatchResult, now: int, effective: int
    ) -> int:
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
                    "effective_ms": effective,
                }
                for seq, p in enumerate(result.applied)
            ],
        )
        return int(batch_id)

    def _find(self, conn: Connection, key: str, digest: str) -> BatchResult | None:
        stored = self._stored(conn, key)
        return None if stored is None else _replay(key, digest, *stored)

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


@dataclass(frozen=True, slots=True)
class _Planned:
    """A batch of a shared transaction, planned: ``deltas`` (the bank always included when
    touched), the non-bank ``balances`` after it, and ``bank_moved``, what the group had moved
    into the bank up to and including it."""

    index: int
    key: str
    digest: str
    applied: tuple[Posting, ...]
    deltas: dict[str, int]
    balances: dict[str, int]
    bank_moved: int


def check_client_batch(key: str, postings: Sequence[Posting]) -> None:
    """What a client's batch may not do: use the wallet's own key namespace or admin reasons."""
    if key.startswith(INTERNAL_KEY_PREFIX):
        raise InvalidRequest(f"request_id may not start with {INTERNAL_KEY_PREFIX!r}")
    for p in postings:
        if p.reason in ADMIN_REASONS:
            raise InvalidRequest(
                f"reason {p.reason!r} is posted only by the audited admin service",
                reason="ADMIN_REASON",
            )


def _replay(key: str, digest: str, batch_id: int, first_digest: str, result: str) -> BatchResult:
    """The first result of a stored batch, or a refusal if the key came with other postings."""
    if first_digest != digest:
        raise IdempotencyKeyReused(f"request_id {key!r} was already used for a different batch")
    return BatchResult.from_json(batch_id, result, replayed=True)


def _settled(outcome: BatchResult | Exception | None) -> BatchResult | Exception:
    if outcome is None:
        raise RuntimeError("a batch of a group was left without an outcome")
    return outcome


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
        int(row["id"]),
        int(row["batch_id"]),
        int(row["seq"]),
        posting,
        int(row["created_ms"]),
        int(row["effective_ms"]),
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
