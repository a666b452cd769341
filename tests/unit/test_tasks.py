"""cancel_and_wait ends a background task even when one cancellation is lost inside it."""

from __future__ import annotations

import asyncio

from services.common.tasks import cancel_and_wait


async def test_a_task_that_swallows_its_first_cancellation_still_ends() -> None:
    cancels_seen = 0

    async def loop_that_survives_errors() -> None:
        # A library call that turns the CancelledError into an ordinary error, which the
        # loop logs and survives, then back to waiting for work that never comes.
        nonlocal cancels_seen
        while True:
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                cancels_seen += 1
                if cancels_seen > 1:
                    raise

    task = asyncio.create_task(loop_that_survives_errors())
    await asyncio.sleep(0)
    await asyncio.wait_for(cancel_and_wait(task), 5)
    assert task.cancelled()
    assert cancels_seen == 2


async def test_a_finished_task_is_left_alone() -> None:
    async def done() -> int:
        return 7

    task = asyncio.create_task(done())
    await task
    await cancel_and_wait(task)
    assert task.result() == 7
