"""Wait for a condition with a deadline, never for a fixed time.

A test that sleeps "long enough" is slow on a quiet machine and flaky on a busy one; these
poll the condition instead and fail with a message that says what never happened.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, overload

T = TypeVar("T")


@overload
async def wait_until(
    predicate: Callable[[], Awaitable[T]],
    *,
    timeout: float,  # noqa: ASYNC109
    interval: float = ...,
    message: str = ...,
) -> T: ...


@overload
async def wait_until(
    predicate: Callable[[], T],
    *,
    timeout: float,  # noqa: ASYNC109
    interval: float = ...,
    message: str = ...,
) -> T: ...


async def wait_until(
    predicate: Callable[[], Any],
    *,
    # A deadline on the condition, not a cancellation of the caller (asyncio.timeout's job):
    # the predicate always gets its last try and the failure says what never happened.
    timeout: float,  # noqa: ASYNC109
    interval: float = 0.05,
    message: str = "the condition",
) -> Any:
    """Poll ``predicate`` (plain or async) until it returns something truthy, and return that.

    Raises ``AssertionError`` naming ``message`` once ``timeout`` seconds have passed; the
    predicate is always tried once more at the deadline, so a slow poll cannot lose a result.
    """
    deadline = time.monotonic() + timeout
    while True:
        outcome = predicate()
        value = await outcome if inspect.isawaitable(outcome) else outcome
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {message}")
        await asyncio.sleep(interval)


def wait_until_sync(
    predicate: Callable[[], T],
    *,
    timeout: float,
    interval: float = 0.05,
    message: str = "the condition",
) -> T:
    """:func:`wait_until` for code outside an event loop (the predicate is a plain function)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {message}")
        time.sleep(interval)
