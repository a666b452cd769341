"""Wake WatchQueue streams when their ticket changes: one pub/sub connection per process.

The scripts publish ``<prefix>:ticket-changed:<ticket id>`` on every change. One pattern
subscription fans the messages out to the streams waiting in this process, so a thousand
watchers cost one Redis connection, not a thousand. A lost message only delays an update:
watchers also look again every second.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import structlog
from redis.asyncio import Redis

from services.common.outage import REDIS
from services.common.tasks import cancel_and_wait
from services.matchmaking.keys import Keys

log = structlog.get_logger("kishpa.matchmaking")
RECONNECT_DELAY_S = 1.0


class TicketNotifier:
    """Fans ticket-change messages out to the local watchers of each ticket."""

    def __init__(self, redis: Redis, keys: Keys) -> None:
        self._redis = redis
        self._prefix = keys.ticket_channel("")
        self._waiters: dict[str, set[asyncio.Event]] = {}
        self._task: asyncio.Task[None] | None = None

    @contextlib.asynccontextmanager
    async def listen(self, ticket_id: str) -> AsyncIterator[asyncio.Event]:
        """An event set whenever ``ticket_id`` changes (clear it after each wake-up)."""
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run())
        event = asyncio.Event()
        self._waiters.setdefault(ticket_id, set()).add(event)
        try:
            yield event
        finally:
            waiters = self._waiters.get(ticket_id)
            if waiters is not None:
                waiters.discard(event)
                if not waiters:
                    del self._waiters[ticket_id]

    async def _run(self) -> None:
        while True:
            pubsub = self._redis.pubsub()
            try:
                await pubsub.psubscribe(self._prefix + "*")
                async for message in pubsub.listen():
                    self._deliver(message)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if not REDIS.absorbs(exc, where="matchmaking_notifier"):
                    log.warning("matchmaking.notifier_reconnecting", exc_info=True)
                await asyncio.sleep(RECONNECT_DELAY_S)
            finally:
                with contextlib.suppress(Exception):
                    await pubsub.aclose()

    def _deliver(self, message: dict[str, Any]) -> None:
        if message.get("type") != "pmessage":
            return
        channel = message["channel"]
        text = channel.decode() if isinstance(channel, bytes) else str(channel)
        for event in self._waiters.get(text.removeprefix(self._prefix), ()):
            event.set()

    async def close(self) -> None:
        """Stop listening."""
        if self._task is not None:
            await cancel_and_wait(self._task)
            self._task = None
