"""Domain errors of the wallet.

Each error carries a machine-readable ``reason`` (the gRPC ErrorInfo reason) and a
``category``; the one table from categories to status codes is ``services.common.errors``.
"""

from __future__ import annotations

from services.common.errors import Category, DomainError


class WalletError(DomainError):
    """Base class: the wallet refuses a request. Nothing was changed."""

    category = Category.REFUSED
    reason = "WALLET_REFUSED"

    def __init__(self, message: str, reason: str | None = None) -> None:
        super().__init__(message)
        if reason is not None:
            self.reason = reason


class InvalidRequest(WalletError):
    """Malformed input: bad account id, amount, reason, empty batch, missing key."""

    category = Category.INVALID
    reason = "INVALID_ARGUMENT"


class AccountNotFound(WalletError):
    """A player account that was never opened."""

    category = Category.NOT_FOUND
    reason = "ACCOUNT_NOT_FOUND"


class InsufficientFunds(WalletError):
    """A bowl or pot would go below zero."""

    category = Category.REFUSED
    reason = "INSUFFICIENT_FUNDS"


class IdempotencyKeyReused(WalletError):
    """The idempotency key was already used for a different batch."""

    category = Category.CONFLICT
    reason = "IDEMPOTENCY_KEY_REUSED"


class BalanceOverflow(WalletError):
    """A balance would leave the range the ledger stores (signed 64-bit)."""

    category = Category.REFUSED
    reason = "BALANCE_OVERFLOW"
