"""Stopping background tasks reliably."""

from __future__ import annotations

import asyncio
from typing import Any

from services.common.logging import get_logger

_log = get_logger(__name__)

CANCEL_ATTEMPTS = 20
CANCEL_WAIT_S = 0.25


async def cancel_and_wait(task: asyncio.Task[Any]) -> None:
    """Cancel a background task and wait until it has ended.

    One ``cancel()`` is not always enough: a cancellation that lands inside a library call
    can come out of it as an ordinary error, which a loop that logs errors and goes on then
    survives, leaving the task waiting for work forever (and a ``stop()`` that awaits it
    hanging). So the cancellation is repeated until the task ends.
    """
    cancels = 0
    while not task.done() and cancels < CANCEL_ATTEMPTS:
        task.cancel()
        cancels += 1
        await asyncio.wait({task}, timeout=CANCEL_WAIT_S)
    if not task.done():
        _log.warning("task_ignores_cancellation", task=task.get_name())
        return
    if cancels > 1:
        _log.info("task_cancel_repeated", task=task.get_name(), cancels=cancels)
    if not task.cancelled() and task.exception() is not None:
        _log.warning("task_failed", task=task.get_name(), error=repr(task.exception()))
