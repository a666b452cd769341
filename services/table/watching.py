"""Watching: a player's or a spectator's stream of a table's events, as he may see them.

Live events come from the process's shared fan-out (:mod:`services.table.fanout`); what a
viewer may see of each is ``TableEvent.for_viewer`` (``shared/stream.py``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from services.common.redis_client import pubsub_source
from services.table.core import (
    READ_BATCH,
    TableCore,
    check_may_watch,
)
from services.table.fanout import StreamHub, parse_id
from shared import keys
from shared.stream import StoredEvent, stored_event


class Watching(TableCore):
    def _new_hub(self) -> StreamHub[StoredEvent]:
        return StreamHub(
            self.store.redis,
            pubsub_source(self.store.redis),
            stream_key=keys.events,
            channel=keys.notify,
            decode=stored_event,
        )

    async def _started_hub(self) -> StreamHub[StoredEvent]:
        """The shared fan-out (a ``Tables`` built without one starts its own on first use)."""
        if self.hub is None:
            self.hub = self._new_hub()
            self._own_hub = True
        # A table the hub reads from Redis was moved on by another writer: its kept state
        # is stale (watchers subscribe through here, so this is set before any read).
        self.hub.on_read = self.store.cache.forget
        await self.hub.start()
        return self.hub

    async def aclose(self) -> None:
        """Stop a fan-out this object started itself (the server stops the one it gave)."""
        if self.hub is not None and self._own_hub:
            await self.hub.stop()

    async def watch(
        self, player_id: str, table_id: str, after_id: str = "", *, settle_poll_ms: int = 1000
    ) -> AsyncIterator[StoredEvent]:
        """Every event of :meth:`watch_batches`, one by one."""
        async for batch in self.watch_batches(
            player_id, table_id, after_id, settle_poll_ms=settle_poll_ms
        ):
            for stored in batch:
                yield stored

    async def watch_batches(
        self, player_id: str, table_id: str, after_id: str = "", *, settle_poll_ms: int = 1000
    ) -> AsyncIterator[list[StoredEvent]]:
        """Every event after ``after_id``, then live ones, as this player may see them, in
        batches: each batch holds what was ready at once (at least one event, at most
        ``READ_BATCH``), so a commit's events travel together.

        Live events come from the process's shared fan-out (:mod:`services.table.fanout`):
        the watcher subscribes first, then catches up from ``after_id`` with plain reads,
        then takes the hub's batches, skipping ids it already delivered, so every event
        comes once and in order. A watcher that falls too far behind is cut off with
        ``RESOURCE_EXHAUSTED``/``WATCH_TOO_SLOW`` and resumes from its last id.

        Public data always; private facts only those of the player's own seat; wholly private
        events of other seats are skipped. After ``table_closed`` the stream goes on until
        the workers have settled the table's last phase (so the watcher receives the final
        balances), for at most ``settlement_wait_ms``, re-checking every ``settle_poll_ms``.
        """
        table, _ = await self._load(table_id)
        check_may_watch(table, player_id)
        seat = table.seat_of(player_id)
        cursor = after_id or "0-0"
        cursor_key = parse_id(cursor)
        # From a given event on, every later one must still be kept (else EVENTS_TRIMMED:
        # the watcher reloads the view); without one, the stream is read from its oldest.
        whole = bool(after_id)
        closed_at: int | None = None
        hub = await self._started_hub()

        async def admit(batch: list[StoredEvent]) -> list[StoredEvent]:
            """Advance past ``batch``; what this viewer may see of it."""
            nonlocal seat, closed_at, cursor, cursor_key, whole
            whole = whole or bool(batch)
            visible: list[StoredEvent] = []
            for stored in batch:
                cursor = stored.id
                event = stored.event
                if event.type in ("player_joined", "player_left"):
                    # Seats move only before the game starts, before any private fact exists.
                    table, _ = await self._load(table_id)
                    seat = table.seat_of(player_id)
                if event.type == "table_closed":
                    closed_at = self.clock()
                shown = event.for_viewer(seat)
                if shown is not None:
                    visible.append(StoredEvent(stored.id, shown))
            cursor_key = parse_id(cursor)
            return visible

        async with hub.subscribe(table_id) as subscription:
            catching_up = True
            while True:
                if catching_up:
                    # Plain reads (no BLOCK): what the stream holds after ``cursor`` now.
                    batch = await self.store.read_events(
                        table_id, cursor, count=READ_BATCH, whole=whole
                    )
                    catching_up = len(batch) == READ_BATCH
                else:
                    wait: float | None = None
                    if closed_at is not None:
                        left = self.settlement_wait_ms - (self.clock() - closed_at)
                        pending = left > 0 and await self.store.unsettled_phases(table_id) > 0
                        if not pending:
                            # One last plain read: an entry whose wake-up is still on its way.
                            catching_up = True
                            batch = await self.store.read_events(
                                table_id, cursor, count=READ_BATCH, whole=whole
                            )
                            visible = await admit(batch)
                            if visible:
                                yield visible
                            if len(batch) < READ_BATCH:
                                return
                            continue
                        wait = min(left, settle_poll_ms) / 1000
                    # Hold nothing of the last batch while waiting: thousands of idle
                    # watchers holding theirs make every garbage collection walk them.
                    batch = visible = []
                    entries = await subscription.next_batch(wait)
                    batch = [e.value for e in entries if e.key > cursor_key]
                    del entries
                for start in range(0, len(batch), READ_BATCH):
                    visible = await admit(batch[start : start + READ_BATCH])
                    if visible:
                        yield visible
