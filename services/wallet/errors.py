"""Domain errors of the wallet.

Each error carries a machine-readable ``reason`` (the gRPC ErrorInfo reason) and a ``code``
naming the gRPC status it maps to; the mapping itself lives in ``services.common.errors``.
"""

from __future__ import annotations


class WalletError(Exception):
    """Base class: the wallet refuses a request. Nothing was changed."""

    code = "FAILED_PRECONDITION"
    reason = "WALLET_REFUSED"

    def __init__(self, message: str, reason: str | None = None) -> None:
        super().__init__(message)
        if reason is not None:
            self.reason = reason


class InvalidRequest(WalletError):
    """Malformed input: bad account id, amount, reason, empty batch, missing key."""

    code = "INVALID_ARGUMENT"
    reason = "INVALID_ARGUMENT"


class AccountNotFound(WalletError):
    """A player account that was never opened."""

    code = "NOT_FOUND"
    reason = "ACCOUNT_NOT_FOUND"


class InsufficientFunds(WalletError):
    """A bowl or pot would go below zero."""

    code = "FAILED_PRECONDITION"
    reason = "INSUFFICIENT_FUNDS"


class IdempotencyKeyReused(WalletError):
    """The idempotency key was already used for a different batch."""

    code = "ALREADY_EXISTS"
    reason = "IDEMPOTENCY_KEY_REUSED"


class BalanceOverflow(WalletError):
    """A balance would leave the range the ledger stores (signed 64-bit)."""

    code = "FAILED_PRECONDITION"
    reason = "BALANCE_OVERFLOW"
