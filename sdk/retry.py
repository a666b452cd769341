"""Retrying calls whose server was unreachable: bounded attempts, jittered backoff.

Only safe because every mutation carries a ``request_id`` the client chose once: the retry
sends the same one, and the server answers a repeat with its first answer.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass

import grpc

RETRYABLE = frozenset({grpc.StatusCode.UNAVAILABLE})
"""Codes after which a unary call is sent again (same request id)."""
STREAM_RETRYABLE = frozenset(
    {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.CANCELLED}
)
"""Codes after which a stream is reopened: a server shutting down cancels its streams."""


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How often and how patiently to retry an unreachable server."""

    attempts: int = 5
    """Tries in all (1 = never retry)."""
    first_delay_s: float = 0.1
    max_delay_s: float = 2.0

    def delay(self, attempt: int) -> float:
        """Seconds to wait before try ``attempt + 1`` (full jitter, capped)."""
        ceiling = min(self.max_delay_s, self.first_delay_s * 2**attempt)
        # Jitter only spreads retries of many clients; it needs no unpredictability.
        return random.uniform(ceiling / 2, ceiling)  # noqa: S311

    async def sleep(self, attempt: int) -> None:
        """Wait before the next try."""
        await asyncio.sleep(self.delay(attempt))


NO_RETRY = RetryPolicy(attempts=1)
