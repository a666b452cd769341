"""The tests' deadline waits: they return the first truthy value and fail by the deadline."""

from __future__ import annotations

import time

import pytest

from tests.support.waiting import wait_until, wait_until_sync

pytestmark = pytest.mark.unit


async def test_wait_until_returns_the_first_truthy_value_of_an_async_predicate() -> None:
    calls = []

    async def third_time() -> str | None:
        calls.append(1)
        return "ready" if len(calls) == 3 else None

    assert await wait_until(third_time, timeout=5, interval=0.001) == "ready"
    assert len(calls) == 3


async def test_wait_until_fails_at_the_deadline_naming_what_it_waited_for() -> None:
    start = time.monotonic()
    with pytest.raises(AssertionError, match="waiting for the moon"):
        await wait_until(lambda: False, timeout=0.2, interval=0.01, message="the moon")
    assert 0.2 <= time.monotonic() - start < 2


def test_wait_until_sync_polls_a_plain_predicate() -> None:
    values = iter([0, 0, 7])
    assert wait_until_sync(lambda: next(values), timeout=5, interval=0.001) == 7
    with pytest.raises(AssertionError, match=r"timed out after 0\.1s"):
        wait_until_sync(lambda: None, timeout=0.1, interval=0.01)
