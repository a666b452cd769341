"""Deadline enforcement: every table-service replica runs this loop; whichever is alive acts.

Due tables are claimed, shard by shard, from the deadline index with a lease (claim.lua), then the
timeout is applied through the same versioned commit as a player's action, so two replicas
can never both apply it. A replica that dies after claiming leaves the lease to run out and
another replica claims the table again.
"""

from __future__ import annotations

import asyncio
import contextlib

import structlog

from services.common.errors import Unavailable
from services.common.outage import REDIS, is_transient_redis_error
from services.table.service import Tables

log = structlog.get_logger("kishpa.table.timers")

POLL_SECONDS = 0.1
LEASE_MS = 2000
CLAIM_BATCH = 50
REINDEX_SECONDS = 60.0
"""How often the deadline index is rebuilt from the tables (it is only an index)."""


async def _apply(tables: Tables, table_id: str) -> None:
    try:
        await tables.handle_deadline(table_id)
    except Exception as exc:
        # Redis away, or not durable under `required`: the lease expires and the deadline
        # is claimed again. An outage is not a bug: it is logged once, as an outage.
        if is_transient_redis_error(exc):
            REDIS.failed(exc, where="table_timers")
        elif isinstance(exc, Unavailable):
            log.warning("deadline_deferred", table_id=table_id, error=str(exc))
        else:
            # One broken table must not stop the timers of every other table.
            log.exception("deadline_failed", table_id=table_id)


async def _tick(tables: Tables, lease_ms: int) -> int:
    """Claim the due tables and apply their deadlines; how many were claimed."""
    claimed = await tables.store.claim_due(tables.clock(), lease_ms=lease_ms, limit=CLAIM_BATCH)
    REDIS.answered()  # the claim went through: Redis answers
    # Tables are independent: a batch is applied concurrently.
    await asyncio.gather(*(_apply(tables, table_id) for table_id in claimed))
    return len(claimed)


async def run_timers(
    tables: Tables,
    stop: asyncio.Event,
    *,
    poll_seconds: float = POLL_SECONDS,
    lease_ms: int = LEASE_MS,
    reindex_seconds: float = REINDEX_SECONDS,
) -> None:
    """Apply passed deadlines until ``stop`` is set."""
    loop = asyncio.get_running_loop()
    next_reindex = loop.time()
    while not stop.is_set():
        try:
            if loop.time() >= next_reindex:
                # Scheduled first: a failing rebuild (a Redis node down) must not starve the
                # claims of the shards that are up.
                next_reindex = loop.time() + reindex_seconds
                await tables.store.rebuild_deadline_index()
            if await _tick(tables, lease_ms) >= CLAIM_BATCH:
                continue  # more may be due right now
        except Exception as exc:
            if is_transient_redis_error(exc):
                REDIS.failed(exc, where="table_timers")  # one line per outage, no trace
            else:
                log.exception("timer_loop_error")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), poll_seconds)
