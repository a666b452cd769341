"""Batches of postings: validation, the body hash and the pure plan of how a batch applies.

``plan_batch`` is the functional core of the ledger: given the balances of the touched
accounts it returns the postings to record (the automatic bank loads of
docs/rules/kishpa.md section 5 included) and the balances after, or refuses. The stores only
lock, read, and write the plan.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from games.ledger import Posting as Posting  # re-exported: the one posting type (games.ledger)
from services.wallet.accounts import (
    BANK,
    INT64_MAX,
    INT64_MIN,
    LOAD_TOKENS,
    MAX_AMOUNT,
    MAX_KEY_LENGTH,
    MAX_POSTINGS,
    AccountKind,
    Reason,
    account_kind,
    check_name,
    parse_reason,
)
from services.wallet.errors import BalanceOverflow, InsufficientFunds, InvalidRequest

# A settlement never needs more than a handful of loads; a runaway count means a bug upstream.
MAX_LOADS_PER_BATCH = 10_000
_PHASES = frozenset({"", "start", "end", "buy_in", "payout"})


@dataclass(frozen=True, slots=True)
class Plan:
    """What applying a batch does: postings to record and balances after."""

    applied: tuple[Posting, ...]
    balances: dict[str, int]

    def deltas(self) -> dict[str, int]:
        """Net change per account (accounts with no net change included as 0)."""
        out: dict[str, int] = {}
        for p in self.applied:
            out[p.from_account] = out.get(p.from_account, 0) - p.amount
            out[p.to_account] = out.get(p.to_account, 0) + p.amount
        return out


def validate_batch(key: str, postings: Sequence[Posting]) -> None:
    """Refuse a malformed batch with InvalidRequest; checks everything that needs no database."""
    if not key:
        raise InvalidRequest("request_id (the idempotency key) is required", "MISSING_REQUEST_ID")
    if len(key) > MAX_KEY_LENGTH or not key.isprintable():
        raise InvalidRequest(f"request_id must be at most {MAX_KEY_LENGTH} printable characters")
    if not postings:
        raise InvalidRequest("a batch needs at least one posting", "EMPTY_BATCH")
    if len(postings) > MAX_POSTINGS:
        raise InvalidRequest(f"a batch holds at most {MAX_POSTINGS} postings", "TOO_MANY_POSTINGS")
    for i, p in enumerate(postings):
        where = f"posting {i}"
        account_kind(p.from_account)
        account_kind(p.to_account)
        if p.from_account == p.to_account:
            raise InvalidRequest(f"{where}: from and to are the same account {p.from_account!r}")
        if isinstance(p.amount, bool) or not isinstance(p.amount, int):
            raise InvalidRequest(f"{where}: amount must be a whole number of tokens")
        if not 0 < p.amount <= MAX_AMOUNT:
            raise InvalidRequest(
                f"{where}: amount {p.amount} outside 1..{MAX_AMOUNT}", "INVALID_AMOUNT"
            )
        parse_reason(p.reason)
        if p.table_id:
            check_name(p.table_id, f"{where}: table id")
        if not 0 <= p.round <= 2**31 - 1:
            raise InvalidRequest(f"{where}: round must be >= 0")
        if p.phase not in _PHASES:
            raise InvalidRequest(f"{where}: unknown phase {p.phase!r}")


def body_hash(postings: Iterable[Posting]) -> str:
    """A stable hash of a batch's body, to tell a replay from a reused key."""
    canonical = json.dumps([p.to_json() for p in postings], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def touched_accounts(postings: Iterable[Posting]) -> list[str]:
    """Every account a batch names, sorted (the order locks are taken in)."""
    return sorted({a for p in postings for a in (p.from_account, p.to_account)})


def plan_batch(postings: Sequence[Posting], balances: Mapping[str, int]) -> Plan:
    """Apply ``postings`` in order to ``balances`` (every touched non-bank account).

    A player who cannot pay is first loaded from the bank in 50-token loads, each recorded
    as a ``bank_load`` posting; a bowl or pot that cannot pay refuses the whole batch, and so
    does a player an operator debits (``admin_debit`` corrects a balance, it never loads).
    """
    now = dict(balances)
    now.setdefault(BANK, 0)
    applied: list[Posting] = []
    loads = 0

    def move(p: Posting) -> None:
        now[p.from_account] -= p.amount
        now[p.to_account] += p.amount
        for account in (p.from_account, p.to_account):
            if not INT64_MIN <= now[account] <= INT64_MAX:
                raise BalanceOverflow(f"balance of {account} would overflow")
        applied.append(p)

    for p in postings:
        kind = account_kind(p.from_account)
        shortfall = p.amount - now[p.from_account]
        if shortfall > 0 and kind is AccountKind.PLAYER and p.reason != Reason.ADMIN_DEBIT:
            needed = -(-shortfall // LOAD_TOKENS)
            loads += needed
            if loads > MAX_LOADS_PER_BATCH:
                raise InsufficientFunds(
                    f"{p.from_account} would need more than {MAX_LOADS_PER_BATCH} bank loads",
                    reason="LOAD_LIMIT_EXCEEDED",
                )
            load = Posting(
                BANK,
                p.from_account,
                LOAD_TOKENS,
                Reason.BANK_LOAD.value,
                p.table_id,
                p.round,
                p.phase,
            )
            for _ in range(needed):
                move(load)
        elif shortfall > 0 and kind is not AccountKind.BANK:
            raise InsufficientFunds(
                f"{p.from_account} holds {now[p.from_account]}, cannot pay {p.amount}"
            )
        move(p)
    return Plan(tuple(applied), now)
