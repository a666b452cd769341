"""Retrying calls whose server was unreachable: the platform's one policy (:mod:`shared.retry`).

Only safe because every mutation carries a ``request_id`` the client chose once: the retry
sends the same one, and the server answers a repeat with its first answer.

:class:`RetryPolicy` is :class:`shared.retry.Backoff`: capped, jittered exponential pauses
for at most ``budget_s`` seconds (30 by default, ``KISHPA_RETRY_BUDGET_S``), optionally at
most ``attempts`` tries.
"""

from __future__ import annotations

from shared.retry import (
    RETRYABLE_CODES,
    STREAM_REOPEN_CODES,
    Attempts,
    Backoff,
    client_backoff,
    client_budget_s,
    code_in,
    is_retryable,
    retrying,
)

RetryPolicy = Backoff
"""How patiently to retry an unreachable server (the SDK's name for :class:`Backoff`)."""
RETRYABLE = RETRYABLE_CODES
"""Codes after which a unary call is sent again (same request id)."""
STREAM_RETRYABLE = STREAM_REOPEN_CODES
"""Codes after which a stream is reopened: a server shutting down cancels its streams."""
NO_RETRY = Backoff(budget_s=0.0, attempts=1)
"""Never retry (tests that want to see every refusal)."""

__all__ = [
    "NO_RETRY",
    "RETRYABLE",
    "STREAM_RETRYABLE",
    "Attempts",
    "RetryPolicy",
    "client_backoff",
    "client_budget_s",
    "code_in",
    "is_retryable",
    "retrying",
]
