"""Per-player call rates counted in the process and shared through Redis in batches.

A player's every RPC is counted against a rate (``"120/second"``). Asking Redis on each call
cost a round trip per RPC (a third of a cheap read's CPU, ``bench_capacity.py``); here each
process keeps its own tally and one flush every ``flush_s`` adds what it admitted to the
shared counters (one pipelined ``INCRBY`` + ``EXPIRE`` per active counter) and learns the
totals of every replica.

The estimate is the sliding-window counter of the ``limits`` library: the previous window's
total weighted by how much of it still overlaps the last ``expiry`` seconds, plus the current
window's. Within one process it is exact. Across replicas, a process learns the others'
calls at its next flush, so a player whose calls are spread over ``R`` replicas may exceed a
rate by what the other ``R - 1`` admitted in one flush interval: an abuse limit, not a quota.
Like the rest of the limiter it fails open: a flush that cannot reach Redis drops its
counts and logs a warning.
"""

from __future__ import annotations

import asyncio
import math
import time
from dataclasses import dataclass
from typing import Any

from limits import RateLimitItem

from services.common.logging import get_logger
from services.common.outage import REDIS
from services.common.tasks import cancel_and_wait

_log = get_logger(__name__)

FLUSH_S = 0.05
"""How often a process shares its counts (and how stale its view of other replicas is)."""


@dataclass(slots=True)
class _Window:
    """What this process knows of one counter: the current window and the one before."""

    start: float
    expiry: int
    known: int = 0
    """The shared total of the current window at the last flush (this process's included)."""
    pending: int = 0
    """Calls admitted here and not yet added to the shared total."""
    previous: int = 0
    """The shared total of the previous window, as last known."""


class SharedRates:
    """Counts calls per key against :class:`RateLimitItem` rates; shares counts in batches."""

    def __init__(self, redis: Any, key_prefix: str, *, flush_s: float = FLUSH_S) -> None:
        self.redis = redis
        self.key_prefix = key_prefix
        self.flush_s = flush_s
        self._windows: dict[str, _Window] = {}
        self._dirty: set[str] = set()
        self._carry: dict[str, _Window] = {}
        """Windows that ended with calls not yet shared."""
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._warned_at = 0.0
        self._forgot_at = 0.0

    def _key(self, name: str, window: _Window) -> str:
        return f"{self.key_prefix}:{name}:{int(window.start)}"

    def hit(self, item: RateLimitItem, name: str) -> float | None:
        """Count one call of ``name`` (a key with its own hash tag); None when admitted,
        else the seconds until a call may be admitted again (the call is not counted)."""
        now = time.time()
        expiry = item.get_expiry()
        start = math.floor(now / expiry) * expiry
        window = self._windows.get(name)
        if window is None or window.expiry != expiry or window.start != start:
            previous = 0
            if window is not None and (window.expiry, window.start) == (expiry, start - expiry):
                previous = window.known + window.pending
            if window is not None and window.pending:
                self._carry[name] = window  # flushed under its own window's key
                self._dirty.add(name)
            window = self._windows[name] = _Window(start, expiry, previous=previous)
        weight = 1.0 - (now - start) / expiry
        if window.previous * weight + window.known + window.pending + 1 > item.amount:
            return max(0.05, start + expiry - now)
        window.pending += 1
        self._dirty.add(name)
        self._flush_later()
        return None

    def _flush_later(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._flusher())
        self._wake.set()

    async def _flusher(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            await self.flush()
            await asyncio.sleep(self.flush_s)

    async def flush(self) -> None:
        """Add the pending counts to the shared totals and learn the totals."""
        names, self._dirty = self._dirty, set()
        batch: list[tuple[str, _Window, int]] = []
        for name in names:
            for window in (self._carry.pop(name, None), self._windows.get(name)):
                if window is not None and window.pending:
                    batch.append((name, window, window.pending))
        if not batch:
            return
        try:
            async with self.redis.pipeline(transaction=False) as pipe:
                for name, window, count in batch:
                    key = self._key(name, window)
                    pipe.incrby(key, count)
                    pipe.expire(key, 2 * window.expiry)
                replies = await pipe.execute()
        except Exception as exc:
            now = time.monotonic()
            if REDIS.absorbs(exc, where="rate_limits"):
                pass  # an outage: logged once, as such
            elif now - self._warned_at > 10:
                self._warned_at = now
                _log.warning("limits.unavailable", limit="player rates", error=repr(exc))
            for _, window, count in batch:
                window.pending -= count  # fail open: these calls are forgotten
            return
        for (name, window, count), total in zip(batch, replies[::2], strict=True):
            window.pending -= count
            window.known = int(total)
            current = self._windows.get(name)
            if current is not None and current.start == window.start + window.expiry:
                current.previous = int(total)  # a carried window: the new one's previous
        self._forget_idle()

    def _forget_idle(self) -> None:
        """Drop counters two windows old (bounded memory: active players only), at most
        every 10 s (a pass visits every counter)."""
        now = time.time()
        if len(self._windows) < 1024 or now - self._forgot_at < 10:
            return
        self._forgot_at = now
        for name, window in list(self._windows.items()):
            if window.start + 2 * window.expiry < now and not window.pending:
                del self._windows[name]

    async def close(self) -> None:
        """Share what is pending and stop the flusher."""
        if self._task is not None:
            await cancel_and_wait(self._task)
        await self.flush()
