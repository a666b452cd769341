"""Account ids, posting reasons and the limits every request is checked against.

The reasons are ``games.ledger.Reason``, the one closed set the games, the workers and the
wallet share.
"""

from __future__ import annotations

import re
from enum import StrEnum

from games.ledger import Reason as Reason  # re-exported: the wallet's modules import it here
from services.wallet.errors import InvalidRequest

BANK = "bank"
STARTING_TOKENS = 2_000
LOAD_TOKENS = 50
ILS_PER_TOKEN = 2
MAX_AMOUNT = 10**12
MAX_POSTINGS = 1_000
MAX_KEY_LENGTH = 200
INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)

_NAME = r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,99}"
_ACCOUNT_RE = re.compile(rf"(?P<kind>player|bowl|pot):(?P<name>{_NAME})")
_PLAIN_RE = re.compile(_NAME)


class AccountKind(StrEnum):
    """What an account is; only the bank may go below zero."""

    PLAYER = "player"
    BOWL = "bowl"
    POT = "pot"
    BANK = "bank"


ADMIN_REASONS = frozenset({Reason.ADMIN_CREDIT, Reason.ADMIN_DEBIT, Reason.ADMIN_REFUND})
"""Reasons only the audited AdminService posts (``services/wallet/admin.py``)."""


def account_kind(account: str) -> AccountKind:
    """Return the kind of a well-formed account id, or raise InvalidRequest."""
    if account == BANK:
        return AccountKind.BANK
    match = _ACCOUNT_RE.fullmatch(account)
    if match is None:
        raise InvalidRequest(
            f"unknown account {account!r}: expected 'player:<id>', 'bowl:<table>', "
            "'pot:<table>' or 'bank'",
            reason="UNKNOWN_ACCOUNT",
        )
    return AccountKind(match["kind"])


def player_account(player_id: str) -> str:
    """The account id of a player's wallet."""
    check_name(player_id, "player id")
    return f"player:{player_id}"


def player_of(account: str) -> str | None:
    """The player id of a player account, else None."""
    return account.removeprefix("player:") if account.startswith("player:") else None


def check_name(value: str, what: str) -> None:
    """Refuse an id that cannot be part of an account id (keeps ids printable and short)."""
    if _PLAIN_RE.fullmatch(value) is None:
        raise InvalidRequest(f"malformed {what} {value!r}")


def ils(tokens: int) -> int:
    """The ILS value of a number of tokens."""
    return tokens * ILS_PER_TOKEN


def parse_reason(reason: str) -> Reason:
    """Return the Reason for its text, or raise InvalidRequest."""
    try:
        return Reason(reason)
    except ValueError:
        allowed = ", ".join(r.value for r in Reason)
        raise InvalidRequest(
            f"unknown reason {reason!r}; allowed: {allowed}", reason="UNKNOWN_REASON"
        ) from None
