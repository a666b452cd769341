"""The state a process last committed for each table, so that its next action on that table
needs no read first: one Redis round trip (the commit) instead of two (load, then commit).

Only an optimisation. ``commit.lua`` accepts a commit computed on a kept state only if the
table still has that version *and* that revision (a random token written with each commit),
so a kept state that another process, a re-created table or a Redis restart made stale is
refused, and the commit is computed again on the state the refusal returns.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

STATE_CACHE_TABLES = 4096
"""Tables whose last committed state a process keeps (least recently used dropped first);
a state is a few KiB of JSON."""


@dataclass(frozen=True, slots=True)
class KeptState:
    """A table's state as this process committed it: stored bytes, so every use parses its
    own copy (a computation that fails half-way cannot spoil the next one)."""

    version: int
    raw: bytes
    deadline_ms: int | None
    rev: str


class StateCache:
    """An LRU map of table id to :class:`KeptState`, bounded by ``limit`` (0: keep none)."""

    def __init__(self, limit: int = STATE_CACHE_TABLES) -> None:
        self.limit = limit
        self._kept: OrderedDict[str, KeptState] = OrderedDict()

    def __len__(self) -> int:
        return len(self._kept)

    def get(self, table_id: str) -> KeptState | None:
        kept = self._kept.get(table_id)
        if kept is not None:
            self._kept.move_to_end(table_id)
        return kept

    def keep(self, table_id: str, state: KeptState) -> None:
        if self.limit <= 0:
            return
        current = self._kept.get(table_id)
        if current is None or current.version <= state.version:
            self._kept[table_id] = state
        # else two commits' replies came back out of order: keep the newer
        self._kept.move_to_end(table_id)
        while len(self._kept) > self.limit:
            self._kept.popitem(last=False)

    def forget(self, table_id: str) -> None:
        self._kept.pop(table_id, None)
