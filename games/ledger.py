"""Postings: the one type for a movement of tokens, shared by the games, the workers and the
wallet, and the closed set of reasons tokens move for.

The games write postings between their own account names (player ids, ``bowl``, ``pot``;
``games.kishpa.ledger``, ``games.hand.ledger``); the settlement worker turns those names into
wallet accounts (``player:<id>``, ``bowl:<table>``, ``pot:<table>``) and fills in the table,
round and phase the batch settles; the wallet records the same type. Standard library only,
so the rules can use it.

A posting the rules make is checked where it is made (:func:`posting`: a positive whole
amount between two different accounts, a known reason); the wallet checks the postings it is
sent with its own refusals (``services/wallet/batch.py``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class Reason(StrEnum):
    """Why tokens move: the closed set (docs/rules/kishpa.md §10, Hand's pot, the wallet's own).

    The wire enum ``kishpa.wallet.v1.TransferReason`` has one value per member, in the same
    order (``TRANSFER_REASON_`` + the upper-cased value; a test keeps them equal): reports
    list reasons in this order.
    """

    # Kishpa (games/kishpa)
    BOWL_CONTRIBUTION = "bowl_contribution"
    BONUS_DOLL = "bonus_doll"
    BONUS_JOKER = "bonus_joker"
    BONUS_ONE = "bonus_one"
    BONUS_KISHPA = "bonus_kishpa"
    WIN = "win"
    BOWL_WIN = "bowl_win"
    BOWL_SPLIT = "bowl_split"
    # The wallet's loads from the bank
    BANK_LOAD = "bank_load"
    OPENING_GRANT = "opening_grant"
    PLAYER_LOAD = "player_load"
    # Hand (games/hand)
    POT_BUY_IN = "pot_buy_in"
    POT_PAYOUT = "pot_payout"
    # The audited operator corrections
    ADMIN_CREDIT = "admin_credit"
    ADMIN_DEBIT = "admin_debit"
    ADMIN_REFUND = "admin_refund"


@dataclass(frozen=True, slots=True)
class Posting:
    """One movement of ``amount`` whole tokens from one account to another.

    ``reason`` is a :class:`Reason` value (a member is its text); ``table_id``, ``round`` and
    ``phase`` say which settlement it belongs to (empty for a game's own postings and for
    the wallet's loads and corrections).
    """

    from_account: str
    to_account: str
    amount: int
    reason: str
    table_id: str = ""
    round: int = 0
    phase: str = ""

    def to_dict(self) -> dict[str, Any]:
        """The record form (``kishpa rules settle``, outbox records, ``settled`` events):
        ``{"from", "to", "amount", "reason"}``."""
        return {
            "from": self.from_account,
            "to": self.to_account,
            "amount": self.amount,
            "reason": str(self.reason),
        }

    @classmethod
    def from_dict(cls, obj: Mapping[str, object]) -> Posting:
        """The record form back, checked (``ValueError`` on anything malformed)."""
        amount = obj["amount"]
        if not isinstance(amount, int):
            raise ValueError("a posting amount must be an integer")
        return posting(str(obj["from"]), str(obj["to"]), amount, Reason(str(obj["reason"])))

    def to_json(self) -> dict[str, Any]:
        """Every field as a JSON-ready dict (the wallet's form)."""
        # Spelled out: dataclasses.asdict deep-copies every field, on the wallet's hot path.
        return {
            "from_account": self.from_account,
            "to_account": self.to_account,
            "amount": self.amount,
            "reason": self.reason,
            "table_id": self.table_id,
            "round": self.round,
            "phase": self.phase,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Posting:
        """The posting from :meth:`to_json` output."""
        return cls(**data)


def posting(from_account: str, to_account: str, amount: int, reason: Reason) -> Posting:
    """A game's posting, checked: a positive whole number of tokens between two accounts."""
    if isinstance(amount, bool) or not isinstance(amount, int) or amount <= 0:
        raise ValueError(f"a posting moves a positive whole number of tokens: {amount!r}")
    if from_account == to_account:
        raise ValueError(f"a posting cannot move tokens from {from_account} to itself")
    if not isinstance(reason, Reason):
        raise ValueError(f"unknown posting reason {reason!r}")
    return Posting(from_account, to_account, amount, reason)


def net_movements(postings: Iterable[Posting]) -> dict[str, int]:
    """Each account's net change (positive = received). The values always sum to zero."""
    net: Counter[str] = Counter()
    for p in postings:
        net[p.from_account] -= p.amount
        net[p.to_account] += p.amount
    return dict(net)


def postings_to_dicts(postings: Iterable[Posting]) -> list[dict[str, Any]]:
    """The record form of a list of postings."""
    return [p.to_dict() for p in postings]
