"""Every Redis key of a table, built in one place.

Keys of one table share the hash tag ``{<table_id>}`` so a table lives in one Redis Cluster
slot and one Lua script may touch all of them atomically. Global indexes (the timer index)
are separate keys and are always rebuildable from the per-table keys.
"""

from __future__ import annotations

PREFIX = "kishpa"


def _table(table_id: str, part: str) -> str:
    return f"{PREFIX}:table:{{{table_id}}}:{part}"


def state(table_id: str) -> str:
    """JSON of the table's whole state (hidden parts included), with its version."""
    return _table(table_id, "state")


def events(table_id: str) -> str:
    """Redis Stream of the table's events (ids are what clients resume from)."""
    return _table(table_id, "events")


def notify(table_id: str) -> str:
    """Pub/sub channel told the newest event id whenever the table's stream grows.

    The same name as the stream key (channels and keys are separate name spaces): the
    scripts that append (``commit.lua``, ``settle.lua``) publish to ``KEYS[events]`` without
    being handed another argument. The shared fan-out subscribes it per watched table.
    """
    return events(table_id)


def requests(table_id: str) -> str:
    """Hash request_id -> the first answer, so a replayed mutation returns it unchanged."""
    return _table(table_id, "requests")


def outbox(table_id: str) -> str:
    """Hash ``"<round>:<phase>"`` -> JSON phase record for settlement (the outbox)."""
    return _table(table_id, "outbox")


def settled(table_id: str) -> str:
    """Hash ``"<round>:<phase>"`` -> JSON settlement result, written by the workers."""
    return _table(table_id, "settled")


def balances(table_id: str) -> str:
    """Hash player id -> wallet balance after the latest settlement."""
    return _table(table_id, "balances")


def outbox_pattern() -> str:
    """SCAN pattern finding every table's outbox (the sweeper's source of truth)."""
    return f"{PREFIX}:table:*:outbox"


def deadlines() -> str:
    """Global sorted set table_id -> next deadline (ms); an index, rebuildable by SCAN."""
    return f"{PREFIX}:deadlines"


def phase_field(round_no: int, phase: str) -> str:
    """Field name of a round phase in the outbox and settled hashes."""
    return f"{round_no}:{phase}"
