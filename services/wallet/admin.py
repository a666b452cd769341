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
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from sqlalchemy import and_, insert, or_, select
from sqlalchemy.exc import IntegrityError

from services.common.errors import Category
from services.wallet import periods, schema
from services.wallet.accounts import (
    BANK,
    Reason,
    check_name,
    player_account,
    player_of,
)
from services.wallet.batch import Posting
from services.wallet.errors import (
    IdempotencyKeyReused,
    InsufficientFunds,
    InvalidRequest,
    WalletError,
)
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
REQUESTED: Final = "requested"
"""A credit or debit above the approval threshold, waiting for a second operator."""
APPROVED: Final = "approved"
REFUSED: Final = "refused"
CLOSE_PERIOD: Final = "close_period"
"""A month closed for good (finance step 2, ``services/wallet/periods.py``)."""
"""An operator's call that was refused (role, same approver, reused request id...)."""

RPC_OF_ACTION: Final = {
    CREDIT: "CreditPlayer",
    DEBIT: "DebitPlayer",
    CLOSE_TABLE: "CloseTable",
    REFUND: "CloseTable",
    CLOSE_PERIOD: "ClosePeriod",
}
DEFAULT_APPROVAL_THRESHOLD: Final = 10_000


class SameOperator(WalletError):
    """The operator who asked for an adjustment may not approve it himself."""

    category = Category.FORBIDDEN
    reason = "SAME_OPERATOR"


class ApprovalNotFound(WalletError):
    """No adjustment waits for approval under this request id."""

    category = Category.NOT_FOUND
    reason = "APPROVAL_NOT_FOUND"


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


@dataclass(frozen=True, slots=True)
class Adjustment:
    """What a credit or debit call answered: its entry, the balance, whether it waits."""

    entry: AuditEntry
    balance: int
    pending_approval: bool = False


class Administration:
    """The operator's use cases over one ledger.

    Credits and debits above ``approval_threshold`` tokens only record a ``requested``
    entry; they move tokens when a *different* operator approves them (:meth:`approve`).
    """

    def __init__(
        self, ledger: Ledger, *, approval_threshold: int = DEFAULT_APPROVAL_THRESHOLD
    ) -> None:
        self.ledger = ledger
        self.engine = ledger.engine
        self.approval_threshold = approval_threshold

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

    def credit(self, why: Justification, player_id: str, amount: int) -> Adjustment:
        """Bank -> player, reason ``admin_credit`` (or a request, above the threshold)."""
        return self._adjust(why, player_id, amount, CREDIT)

    def debit(self, why: Justification, player_id: str, amount: int) -> Adjustment:
        """Player -> bank, reason ``admin_debit``; never below zero, never a bank load."""
        return self._adjust(why, player_id, amount, DEBIT)

    def _adjust(self, why: Justification, player_id: str, amount: int, action: str) -> Adjustment:
        why.check()
        account = player_account(player_id)
        if isinstance(amount, bool) or not 1 <= amount <= MAX_ADJUSTMENT:
            raise InvalidRequest(f"amount must be 1-{MAX_ADJUSTMENT} tokens", "INVALID_AMOUNT")
        balance = self.ledger.balance(account)  # NOT_FOUND for a wallet never opened
        subject = {"rpc": RPC_OF_ACTION[action], "player_id": player_id, "amount": amount}
        done = self._claim(why.request_id, subject)
        if action in done:
            return Adjustment(done[action], self.ledger.balance(account))
        if amount > self.approval_threshold:
            if action == DEBIT and balance < amount and REQUESTED not in done:
                # Refused now rather than at the approval: it could not be applied then.
                raise InsufficientFunds(
                    f"{player_id} holds less than {amount}: a debit never goes below zero"
                )
            entry = done.get(REQUESTED) or self._append(
                why, REQUESTED, player_id=player_id, amount=amount, details=subject
            )
            return Adjustment(entry, self.ledger.balance(account), pending_approval=True)
        entry = self._move(why, player_id, amount, action, details=subject)
        return Adjustment(entry, self.ledger.balance(account))

    def _move(
        self,
        why: Justification,
        player_id: str,
        amount: int,
        action: str,
        *,
        details: Mapping[str, Any],
    ) -> AuditEntry:
        account = player_account(player_id)
        if action == CREDIT:
            posting = Posting(BANK, account, amount, Reason.ADMIN_CREDIT.value)
        else:
            posting = Posting(account, BANK, amount, Reason.ADMIN_DEBIT.value)
        try:
            # One key per request id for both directions: a debit sent with a credit's id
            # is a different body under the same key, refused (IDEMPOTENCY_KEY_REUSED).
            result = self.ledger.apply_admin_batch(f"adjust:{why.request_id}", [posting])
        except InsufficientFunds as exc:
            raise InsufficientFunds(
                f"{player_id} holds less than {amount}: a debit never goes below zero"
            ) from exc
        return self._append(
            why,
            action,
            player_id=player_id,
            amount=amount,
            batch_id=result.batch_id,
            details=details,
        )

    def approve(self, approver: str, reason: str, ticket: str, request_id: str) -> Adjustment:
        """A second operator approves the adjustment requested under ``request_id``.

        The approver must differ from the operator who asked (``SAME_OPERATOR``); the
        approval and the credit or debit are both written to the audit log. Approving twice
        answers with the first result.
        """
        why = Justification(approver, reason, ticket, request_id)
        why.check()
        requested = self._find(request_id, REQUESTED)
        if requested is None:
            raise ApprovalNotFound(f"no adjustment waits for approval under {request_id!r}")
        if requested.admin_id == approver:
            raise SameOperator("a second operator must approve: you asked for this one")
        kind = CREDIT if requested.details.get("rpc") == RPC_OF_ACTION[CREDIT] else DEBIT
        account = player_account(requested.player_id)
        done = self._find(request_id, kind)
        if done is None:
            asker = Justification(
                requested.admin_id, requested.reason, requested.ticket, request_id
            )
            done = self._move(
                asker,
                requested.player_id,
                requested.amount,
                kind,
                details={**requested.details, "approved_by": approver},
            )
        self._append(
            why,
            APPROVED,
            player_id=requested.player_id,
            amount=requested.amount,
            batch_id=done.batch_id,
            details={"requested_by": requested.admin_id, "kind": kind},
        )
        return Adjustment(done, self.ledger.balance(account))

    def _claim(self, request_id: str, subject: Mapping[str, Any]) -> dict[str, AuditEntry]:
        """The entries this request id already has, by action; refused if any of them was
        written for another RPC or another body (the one rule of docs/api.md)."""
        a = schema.admin_audit.c
        with self.engine.connect() as conn:
            rows = conn.execute(select(schema.admin_audit).where(a.request_id == request_id)).all()
        entries = {e.action: e for e in (_entry(r._mapping) for r in rows)}
        for entry in entries.values():
            if entry.action == APPROVED:
                continue
            rpc = entry.details.get("rpc") or RPC_OF_ACTION.get(entry.action, "")
            same = rpc == subject["rpc"] and all(
                getattr(entry, k) == v for k, v in subject.items() if k != "rpc"
            )
            if not same:
                raise IdempotencyKeyReused(
                    f"request_id {request_id!r} was already used for another request "
                    f"({rpc or entry.action})"
                )
        return entries

    def record_refusal(
        self, admin_id: str, rpc: str, reason: str, message: str, request_id: str = ""
    ) -> AuditEntry:
        """Write an operator's refused call to the audit log (who, which RPC, why)."""
        # The column is unique per (request id, action): a refusal gets an id of its own
        # (operator request ids never contain ':'), the operator's is in the details.
        own = f"{request_id or '-'}:{uuid.uuid4().hex[:12]}"
        why = Justification(admin_id or "unknown", f"refused: {reason}", rpc, own)
        return self._append(
            why,
            REFUSED,
            details={
                "rpc": rpc,
                "reason": reason,
                "message": message[:300],
                "request_id": request_id,
            },
        )

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
        self.claim_close(why, table_id)
        return self._append(
            why, CLOSE_TABLE, table_id=table_id, details={**details, "rpc": "CloseTable"}
        )

    def close_period(
        self, why: Justification, month: str
    ) -> tuple[periods.ClosedPeriod, bool, AuditEntry]:
        """Close ``month`` for good and audit it; (the close, whether it was closed before
        this call, the audit entry). A retry of the same request writes no second entry."""
        why.check()
        periods.month_bounds(month)
        entries = self._claim(why.request_id, {"rpc": RPC_OF_ACTION[CLOSE_PERIOD]})
        earlier = entries.get(CLOSE_PERIOD)
        if earlier is not None and earlier.details.get("month") != month:
            raise IdempotencyKeyReused(
                f"request_id {why.request_id!r} already closed {earlier.details.get('month')}"
            )
        period, already = periods.close_period(
            self.engine, month, f"admin:{why.admin_id}", why.request_id
        )
        entry = self._append(
            why,
            CLOSE_PERIOD,
            details={
                "rpc": RPC_OF_ACTION[CLOSE_PERIOD],
                "month": month,
                "already_closed": already,
                "chain_seq": period.chain_seq,
                "chain_hash": period.chain_hash,
            },
        )
        return period, already, entry

    def claim_close(self, why: Justification, table_id: str) -> None:
        """Refuse a CloseTable whose request id was used for another request."""
        self._claim(why.request_id, {"rpc": RPC_OF_ACTION[CLOSE_TABLE], "table_id": table_id})

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
