"""Audited administration over the ledger: credits, debits, table refunds, and the audit log.

Every operator action moves tokens only as a wallet batch of its own reason
(``admin_credit``, ``admin_debit``, ``admin_refund``; the ledger refuses these reasons from
anyone else) and then appends one row to ``admin_audit``, which the database itself keeps
append-only (migration 0002: UPDATE and DELETE raise). Both steps are idempotent by the
operator's ``request_id``: a retry after a crash between them replays the batch (its first
result) and writes the missing entry, so every admin batch ends with its audit entry.

Refunds of a closed table follow its rules: what is in the bowl (Kishpa) or the pot (Hand)
goes back to the players who paid what is in it. The ledger tells who: walking the account's
postings in order, contributions accumulate per payer and an outflow that empties it (a bowl
taken or split, a pot paid out) starts over. Methods block: call them off the event loop.
"""

from __future__ import annotations

import base64
import binascii
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from sqlalchemy import and_, insert, or_, select
from sqlalchemy.exc import IntegrityError

from services.wallet import schema
from services.wallet.accounts import (
    BANK,
    Reason,
    check_name,
    player_account,
    player_of,
)
from services.wallet.batch import Posting
from services.wallet.errors import InsufficientFunds, InvalidRequest, WalletError
from services.wallet.ledger import Ledger

MAX_ADJUSTMENT: Final = 1_000_000
MAX_REASON: Final = 500
MAX_TICKET: Final = 100
MAX_REQUEST_ID: Final = 64
DEFAULT_PAGE: Final = 50
MAX_PAGE: Final = 500

CREDIT: Final = "credit"
DEBIT: Final = "debit"
CLOSE_TABLE: Final = "close_table"
REFUND: Final = "refund"


class RefundAmbiguous(WalletError):
    """The ledger of a bowl or pot cannot be split back to its payers exactly."""

    reason = "REFUND_AMBIGUOUS"


@dataclass(frozen=True, slots=True)
class Justification:
    """Why an operator acts: who, why, which ticket, and his request id."""

    admin_id: str
    reason: str
    ticket: str
    request_id: str

    def check(self) -> None:
        """Refuse an action without its reason, ticket or request id (nothing changes)."""
        if not self.admin_id:
            raise InvalidRequest("the operator is unknown", "ADMIN_REQUIRED")
        if not 1 <= len(self.reason.strip()) <= MAX_REASON:
            raise InvalidRequest(f"reason must be 1-{MAX_REASON} characters", "MISSING_REASON")
        if not 1 <= len(self.ticket.strip()) <= MAX_TICKET or not self.ticket.isprintable():
            raise InvalidRequest(
                f"ticket must be 1-{MAX_TICKET} printable characters", "MISSING_TICKET"
            )
        rid = self.request_id
        if not 1 <= len(rid) <= MAX_REQUEST_ID or not rid.isprintable() or ":" in rid:
            raise InvalidRequest(
                f"request_id must be 1-{MAX_REQUEST_ID} printable characters without ':'",
                "BAD_REQUEST_ID",
            )


@dataclass(frozen=True, slots=True)
class AuditEntry:
    """One row of the audit log."""

    entry_id: int
    created_ms: int
    admin_id: str
    action: str
    player_id: str
    table_id: str
    amount: int
    reason: str
    ticket: str
    request_id: str
    batch_id: int
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class PlayerTable:
    """A table a player moved tokens at, from his postings."""

    table_id: str
    rounds: int
    net: int
    first_ms: int
    last_ms: int


def refunds_owed(postings: Sequence[tuple[str, str, int]], account: str) -> dict[str, int]:
    """Who paid what is in ``account`` now, from its postings ``(from, to, amount)`` in order.

    Contributions accumulate per payer; an outflow that empties the account starts over; an
    outflow that leaves some behind cannot be attributed and is refused.
    """
    owed: dict[str, int] = {}
    balance = 0
    for source, target, amount in postings:
        if target == account:
            balance += amount
            owed[source] = owed.get(source, 0) + amount
        elif source == account:
            balance -= amount
            if balance == 0:
                owed = {}
            else:
                raise RefundAmbiguous(
                    f"{account} paid out {amount} and kept {balance}: the refund cannot be "
                    "attributed to its payers"
                )
    if sum(owed.values()) != balance:
        raise RefundAmbiguous(f"{account}: contributions do not add up to its balance")
    return {payer: amount for payer, amount in owed.items() if amount}


def _entry(row: Any) -> AuditEntry:
    return AuditEntry(
        entry_id=int(row["id"]),
        created_ms=int(row["created_ms"]),
        admin_id=str(row["admin_id"]),
        action=str(row["action"]),
        player_id=str(row["player_id"] or ""),
        table_id=str(row["table_id"] or ""),
        amount=int(row["amount"]),
        reason=str(row["reason"]),
        ticket=str(row["ticket"]),
        request_id=str(row["request_id"]),
        batch_id=int(row["batch_id"] or 0),
        details=json.loads(row["details"] or "{}"),
    )


def _token(last_id: int) -> str:
    return base64.urlsafe_b64encode(str(last_id).encode()).decode()


def _from_token(token: str) -> int:
    try:
        return int(base64.urlsafe_b64decode(token.encode()).decode())
    except (ValueError, binascii.Error):
        raise InvalidRequest("malformed page_token", "BAD_PAGE_TOKEN") from None


class Administration:
    """The operator's use cases over one ledger."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self.engine = ledger.engine

    # --- the audit log ---------------------------------------------------------------

    def _append(
        self,
        why: Justification,
        action: str,
        *,
        player_id: str = "",
        table_id: str = "",
        amount: int = 0,
        batch_id: int = 0,
        details: Mapping[str, Any] | None = None,
    ) -> AuditEntry:
        """Write one entry, or return the one this request already wrote."""
        row = {
            "created_ms": int(time.time() * 1000),
            "admin_id": why.admin_id,
            "action": action,
            "player_id": player_id or None,
            "table_id": table_id or None,
            "amount": amount,
            "reason": why.reason.strip(),
            "ticket": why.ticket.strip(),
            "request_id": why.request_id,
            "batch_id": batch_id or None,
            "details": json.dumps(dict(details or {}), sort_keys=True),
        }
        try:
            with self.engine.begin() as conn:
                conn.execute(insert(schema.admin_audit).values(**row))
        except IntegrityError:
            pass  # a retry of this request: its entry is already there
        found = self._find(why.request_id, action)
        if found is None:
            raise RuntimeError("the audit entry was neither written nor found")
        return found

    def _find(self, request_id: str, action: str) -> AuditEntry | None:
        a = schema.admin_audit.c
        with self.engine.connect() as conn:
            row = conn.execute(
                select(schema.admin_audit).where(
                    and_(a.request_id == request_id, a.action == action)
                )
            ).first()
        return None if row is None else _entry(row._mapping)

    def audit_entries(
        self, *, player_id: str = "", table_id: str = "", page_size: int = 0, page_token: str = ""
    ) -> tuple[list[AuditEntry], str]:
        """The audit log, newest first, optionally about one player or table."""
        size = page_size or DEFAULT_PAGE
        if not 0 < size <= MAX_PAGE:
            raise InvalidRequest(f"page_size must be 1..{MAX_PAGE}")
        a = schema.admin_audit.c
        query = select(schema.admin_audit).order_by(a.id.desc()).limit(size + 1)
        if player_id:
            query = query.where(a.player_id == player_id)
        if table_id:
            query = query.where(a.table_id == table_id)
        if page_token:
            query = query.where(a.id < _from_token(page_token))
        with self.engine.connect() as conn:
            rows = conn.execute(query).all()
        entries = [_entry(r._mapping) for r in rows[:size]]
        more = len(rows) > size
        return entries, _token(entries[-1].entry_id) if more else ""

    # --- money -----------------------------------------------------------------------

    def credit(self, why: Justification, player_id: str, amount: int) -> tuple[AuditEntry, int]:
        """Bank -> player, reason ``admin_credit``; returns the entry and the balance after."""
        return self._adjust(why, player_id, amount, CREDIT)

    def debit(self, why: Justification, player_id: str, amount: int) -> tuple[AuditEntry, int]:
        """Player -> bank, reason ``admin_debit``; never below zero, never a bank load."""
        return self._adjust(why, player_id, amount, DEBIT)

    def _adjust(
        self, why: Justification, player_id: str, amount: int, action: str
    ) -> tuple[AuditEntry, int]:
        why.check()
        account = player_account(player_id)
        if isinstance(amount, bool) or not 1 <= amount <= MAX_ADJUSTMENT:
            raise InvalidRequest(f"amount must be 1-{MAX_ADJUSTMENT} tokens", "INVALID_AMOUNT")
        self.ledger.balance(account)  # NOT_FOUND for a wallet never opened
        if action == CREDIT:
            posting = Posting(BANK, account, amount, Reason.ADMIN_CREDIT.value)
        else:
            posting = Posting(account, BANK, amount, Reason.ADMIN_DEBIT.value)
        try:
            result = self.ledger.apply_admin_batch(f"{action}:{why.request_id}", [posting])
        except InsufficientFunds as exc:
            raise InsufficientFunds(
                f"{player_id} holds less than {amount}: a debit never goes below zero"
            ) from exc
        entry = self._append(
            why, action, player_id=player_id, amount=amount, batch_id=result.batch_id
        )
        return entry, self.ledger.balance(account)

    def refund_table(self, why: Justification, table_id: str) -> tuple[AuditEntry, list[Posting]]:
        """Give what is in the table's bowl and pot back to those who paid it (one batch)."""
        why.check()
        check_name(table_id, "table id")
        postings: list[Posting] = []
        for kind in ("bowl", "pot"):
            account = f"{kind}:{table_id}"
            for payer, amount in sorted(refunds_owed(self._history(account), account).items()):
                if player_of(payer) is None:
                    raise RefundAmbiguous(f"{account} holds tokens paid by {payer}, not a player")
                postings.append(
                    Posting(account, payer, amount, Reason.ADMIN_REFUND.value, table_id)
                )
        batch_id = 0
        if postings:
            # One refund per table, whoever asks and however often: the key is the table's.
            batch_id = self.ledger.apply_admin_batch(f"refund:{table_id}", postings).batch_id
        details = {
            "refunds": [
                {"player_id": player_of(p.to_account), "amount": p.amount, "from": p.from_account}
                for p in postings
            ]
        }
        entry = self._append(
            why,
            REFUND,
            table_id=table_id,
            amount=sum(p.amount for p in postings),
            batch_id=batch_id,
            details=details,
        )
        return entry, postings

    def record_close(
        self, why: Justification, table_id: str, details: Mapping[str, Any]
    ) -> AuditEntry:
        """The audit entry of closing a table (the table service did the closing)."""
        why.check()
        return self._append(why, CLOSE_TABLE, table_id=table_id, details=details)

    def _history(self, account: str) -> list[tuple[str, str, int]]:
        p = schema.postings.c
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(p.from_account, p.to_account, p.amount)
                .where(or_(p.from_account == account, p.to_account == account))
                # The refund itself is left out: asked again, the same refund is computed
                # and the ledger replays its first batch (key ``refund:<table>``).
                .where(p.reason != Reason.ADMIN_REFUND.value)
                .order_by(p.id)
            ).all()
        return [(r.from_account, r.to_account, int(r.amount)) for r in rows]

    # --- reads -----------------------------------------------------------------------

    def player_tables(self, player_id: str) -> list[PlayerTable]:
        """Every table the player has a posting at, newest first."""
        account = player_account(player_id)
        p = schema.postings.c
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(p.table_id, p.round, p.from_account, p.to_account, p.amount, p.created_ms)
                .where(or_(p.from_account == account, p.to_account == account))
                .where(p.table_id.is_not(None))
                .where(p.table_id != "")
                .order_by(p.id)
            ).all()
        tables: dict[str, dict[str, Any]] = {}
        for r in rows:
            t = tables.setdefault(
                r.table_id, {"rounds": set(), "net": 0, "first": r.created_ms, "last": 0}
            )
            t["rounds"].add(r.round)
            t["net"] += int(r.amount) if r.to_account == account else -int(r.amount)
            t["last"] = r.created_ms
        out = [
            PlayerTable(tid, len(t["rounds"] - {None, 0}), t["net"], t["first"], t["last"])
            for tid, t in tables.items()
        ]
        return sorted(out, key=lambda t: t.last_ms, reverse=True)
