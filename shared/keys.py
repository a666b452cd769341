"""Every Redis key of a table, built in one place.

Keys of one table share the hash tag ``{<table_id>}`` so a table lives in one Redis Cluster
slot and one Lua script may touch all of them atomically. Cross-table indexes (the deadline
index, the unsettled-table index the sweeper reads) are sharded, one hash tag per shard, and
always rebuildable from the per-table keys, which stay the source of truth.
"""

from __future__ import annotations

PREFIX = "kishpa"
INDEX_SHARDS = 16
"""Shards of every cross-table index (deadlines, unsettled tables, dead letters), by hash-slot
range: shard
``k`` holds the tables whose slot is in ``[k * 1024, (k + 1) * 1024)`` and its key's hash
tag is chosen to fall in that range too. On a Redis Cluster, whose masters own contiguous
slot ranges, a table's index entry therefore lives on its own master (except in the few
shards whose range straddles two masters): a master that is down stops only its own
tables' timers and sweeps. Changing the count re-homes entries: the timers rebuild the
deadline index and the sweeper the unsettled index every minute; drain dead letters first."""
STATE_VERSION = 1
"""The table-state format this code writes. A replica claims deadlines only from the
indexes of the versions in :data:`READABLE_VERSIONS`, so during a rolling deploy an old
replica never claims a table that newer code rewrote in a format it cannot read."""
READABLE_VERSIONS = (1,)


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
    """SCAN pattern finding every table's outbox: only the slow rebuild of the unsettled
    index walks it (:func:`unsettled`), never a sweep."""
    return f"{PREFIX}:table:*:outbox"


CLUSTER_SLOTS = 16384


def _crc16_table() -> tuple[int, ...]:
    table = []
    for byte in range(256):
        crc = byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else (crc << 1)
        table.append(crc & 0xFFFF)
    return tuple(table)


_CRC16 = _crc16_table()


def key_slot(tag: str) -> int:
    """The Redis Cluster hash slot of a key whose whole name is ``tag`` (CRC16/XMODEM
    mod 16384, as Redis computes it; here for the tags themselves, no ``{}`` parsing)."""
    crc = 0
    for byte in tag.encode():
        crc = ((crc << 8) & 0xFFFF) ^ _CRC16[((crc >> 8) ^ byte) & 0xFF]
    return crc % CLUSTER_SLOTS


def shard_of(table_id: str) -> int:
    """The index shard of a table: the range of its keys' hash slot."""
    return key_slot(table_id) * INDEX_SHARDS // CLUSTER_SLOTS


def _shard_tags() -> tuple[str, ...]:
    """For each shard, the shortest tag ``s<n>`` whose hash slot lies in the shard's range."""
    tags: dict[int, str] = {}
    n = 0
    while len(tags) < INDEX_SHARDS:
        tag = f"s{n}"
        tags.setdefault(key_slot(tag) * INDEX_SHARDS // CLUSTER_SLOTS, tag)
        n += 1
    return tuple(tags[k] for k in range(INDEX_SHARDS))


SHARD_TAGS = _shard_tags()


def shard_tag(shard: int) -> str:
    """The hash tag (without braces) of a shard's index keys: its slot is in the shard."""
    return SHARD_TAGS[shard]


def deadline_shard(shard: int, version: int = STATE_VERSION) -> str:
    """Sorted set table_id -> next deadline (ms) of one shard of the tables written in
    state format ``version``; an index, rebuildable by SCAN."""
    return f"{PREFIX}:deadlines:v{version}:{{{shard_tag(shard)}}}"


def deadlines(table_id: str, version: int = STATE_VERSION) -> str:
    """The deadline index key that holds ``table_id``."""
    return deadline_shard(shard_of(table_id), version)


def deadline_shards(versions: tuple[int, ...] = READABLE_VERSIONS) -> list[str]:
    """Every deadline index key a replica reading ``versions`` claims from."""
    return [deadline_shard(s, v) for v in versions for s in range(INDEX_SHARDS)]


def phase_field(round_no: int, phase: str) -> str:
    """Field name of a round phase in the outbox and settled hashes."""
    return f"{round_no}:{phase}"


def unsettled_shard(shard: int) -> str:
    """Sorted set table_id -> created_ms of the table's earliest unsettled outbox phase, for
    the tables of one shard: where the sweeper looks instead of SCANning every outbox.

    Only an index: the outbox and settled hashes say what is unsettled. An entry is added
    (``ZADD LT``, so the score is the earliest phase's) by the commit that writes a phase
    record: inside ``commit.lua`` on one node; right after it on a cluster, where the shard
    is in another slot. It leaves when the settlement finds the table with nothing
    unsettled. The score is a lower bound: settling the earliest phase does not raise it. A
    missing entry (a table service that died between its commit and the write on a
    cluster) is put back by the sweeper's periodic SCAN rebuild; a stale one is dropped by
    the next sweep. A dead-lettered phase keeps its table indexed: it is unsettled.
    """
    return f"{PREFIX}:unsettled:{{{shard_tag(shard)}}}"


def unsettled(table_id: str) -> str:
    """The unsettled index key that holds ``table_id``."""
    return unsettled_shard(shard_of(table_id))


def unsettled_shards() -> list[str]:
    """Every shard of the unsettled index (what a sweep reads)."""
    return [unsettled_shard(s) for s in range(INDEX_SHARDS)]
