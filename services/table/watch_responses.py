"""The WatchTable messages of a batch of stream entries, built once per form for every watcher.

The watchers of a table in one process receive the same batch of entries from the shared
fan-out (:mod:`services.table.fanout`), each as his seat may see it: an entry with a private
part goes to its seat with it and to everyone else without it, a wholly private entry only to
its seat (``TableEvent.for_viewer``). So the watchers of a table need at most a few distinct
sets of messages per batch, and usually one for the seats that see nothing private plus one
for the seat that does. Building each set once (the event conversions, the response that
copies them) and handing the same message objects to every watcher that needs them saves
that work for the others. grpc serializes each message as it sends it and never changes it;
nor does any caller.
"""

from __future__ import annotations

from collections.abc import Sequence

from kishpa.table.v1 import table_pb2
from services.table.convert import Converter
from shared.stream import StoredEvent

SHARED_RESPONSES = 4096
"""Batches whose messages are kept for a table's other watchers (oldest dropped first)."""

Key = tuple[str, bool, tuple[tuple[str, bool], ...]]


class WatchResponses:
    """A bounded map of (table, batched, the batch's entries and forms) to its messages."""

    def __init__(self, convert: Converter, limit: int = SHARED_RESPONSES) -> None:
        self.convert = convert
        self.limit = limit
        self._kept: dict[Key, list[table_pb2.WatchTableResponse]] = {}

    def of(
        self, game: str, table_id: str, batch: Sequence[StoredEvent], batched: bool
    ) -> list[table_pb2.WatchTableResponse]:
        """The messages that carry ``batch`` (entries already filtered for the viewer): one
        with every event when ``batched``, else one per event; none for internal entries.

        The messages are shared: callers send them and never change them.
        """
        # An entry's message is told by its id and whether its private part is shown
        # (the key of Converter.shared_event).
        key: Key = (
            table_id,
            batched,
            tuple((s.id, s.event.private_data is not None) for s in batch),
        )
        kept = self._kept.get(key)
        if kept is not None:
            return kept
        converted = (self.convert.shared_event(game, table_id, s) for s in batch)
        events = [e for e in converted if e is not None]
        if batched:
            responses = [table_pb2.WatchTableResponse(events=events)] if events else []
        else:
            responses = [table_pb2.WatchTableResponse(event=e) for e in events]
        if len(self._kept) >= self.limit:
            del self._kept[next(iter(self._kept))]  # the oldest: its watchers have all had it
        self._kept[key] = responses
        return responses
