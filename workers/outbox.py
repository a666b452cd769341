"""The workers' side of the settlement outbox in Redis (the contract in docs/workers.md).

The table service writes one phase record (``shared.phase_record``) per round phase into the
table's outbox hash, and puts the table in the unsettled index (``keys.unsettled``); the
workers read the record, and once the wallet applied its postings they mark it settled,
update the table's balances and publish a ``settled`` event in one script (``settle.lua``),
then take the table out of the index when nothing of it is left unsettled. The sweeper
finds tables through the index; :func:`rebuild_unsettled_index` (a SCAN, once a minute)
puts back an entry that was lost.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis

from shared import keys, stream
from shared.phase_record import BadPhaseRecord, PhaseRecord, PhaseRef, parse_phase_record

SETTLE_SCRIPT = (Path(__file__).with_name("settle.lua")).read_text(encoding="utf-8")

TRIMMED_FIELD = "_trimmed"
"""Settled-hash field: the last round whose settled phases settle.lua removed (with the
records and the stream's older events) once its ending phase was settled."""
EVENTS_FROM_FIELD = "_events_from"
"""Settled-hash field: the oldest event id the stream keeps after its last trim."""

# Order of the phases inside one round, per game's vocabulary.
PHASE_RANK = {"start": 0, "buy_in": 0, "end": 1, "payout": 1}
ROUND_ORDER_STRIDE = 16


def phase_order(round_no: int, phase: str) -> int:
    """A number growing with the phases of a table, so newer balances win."""
    return round_no * ROUND_ORDER_STRIDE + PHASE_RANK.get(phase, 0)


def read_phase(client: redis.Redis, ref: PhaseRef) -> PhaseRecord | None:
    """The outbox record of ``ref``, or None when there is none."""
    raw = client.hget(keys.outbox(ref.table_id), ref.field)
    return None if raw is None else checked_record(ref, raw)


def checked_record(ref: PhaseRef, raw: bytes | str) -> PhaseRecord:
    """The record stored under ``ref``'s field, refused if it names another phase."""
    record = parse_phase_record(raw)
    if (record.table_id, record.round_no, record.phase) != (
        ref.table_id,
        ref.round_no,
        ref.phase,
    ):
        raise BadPhaseRecord("phase record names another table, round or phase than its field")
    return record


def read_settlement(client: redis.Redis, ref: PhaseRef) -> dict[str, Any] | None:
    """The settlement written for ``ref`` (batch id, balances, time), or None."""
    raw = client.hget(keys.settled(ref.table_id), keys.phase_field(ref.round_no, ref.phase))
    if raw is None:
        return None
    result: dict[str, Any] = json.loads(raw)
    return result


def mark_settled(
    client: redis.Redis,
    ref: PhaseRef,
    *,
    batch_id: str,
    balances: Mapping[str, int],
    settled_ms: int,
    postings: Sequence[Mapping[str, Any]] = (),
) -> bool:
    """Record the settlement, update the table's balances and publish ``settled``, atomically.

    Returns False when the phase was settled before (then nothing is written again).
    """
    settlement = json.dumps(
        {"batch_id": batch_id, "balances": dict(balances), "settled_ms": settled_ms},
        sort_keys=True,
    )
    event = stream.flatten(
        stream.TableEvent(
            type="settled",
            round=ref.round_no,
            data={
                "phase": ref.phase,
                "batch_id": batch_id,
                "balances": dict(balances),
                "settled_ms": settled_ms,
                # Who paid whom and why ({from, to, amount, reason}), bank loads included.
                "postings": [dict(p) for p in postings],
            },
        )
    )
    pairs: list[str] = []
    for player, balance in sorted(balances.items()):
        pairs += [player, str(balance)]
    script = client.register_script(SETTLE_SCRIPT)
    done, _event_id = script(
        keys=[
            keys.settled(ref.table_id),
            keys.balances(ref.table_id),
            keys.events(ref.table_id),
            keys.state(ref.table_id),
            keys.outbox(ref.table_id),
        ],
        args=[
            keys.phase_field(ref.round_no, ref.phase),
            settlement,
            phase_order(ref.round_no, ref.phase),
            *event,
            *pairs,
        ],
    )
    return int(done) == 1


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _parse_field(name: str) -> tuple[int, str] | None:
    round_text, _, phase = name.partition(":")
    if not round_text.isdigit() or not phase:
        return None
    return int(round_text), phase


@dataclass(frozen=True, slots=True)
class PendingPhase:
    """An unsettled outbox phase and when its record was written (None: unreadable record)."""

    ref: PhaseRef
    created_ms: int | None


def _pending(table_id: str, outbox_fields: list[Any], raws: list[Any]) -> list[PendingPhase]:
    pending = []
    for field, raw in zip(outbox_fields, raws, strict=True):
        parsed = _parse_field(_text(field))
        if parsed is None or raw is None:
            continue
        try:
            created: int | None = parse_phase_record(raw).created_ms
        except BadPhaseRecord:
            created = None  # still worth a task: it will dead-letter the record
        pending.append(PendingPhase(PhaseRef(table_id, *parsed), created))
    return sorted(pending, key=lambda p: phase_order(p.ref.round_no, p.ref.phase))


def phase_fields(client: redis.Redis, table_id: str) -> tuple[list[Any], list[Any]]:
    """The field names of the table's outbox and settled hashes (one round trip)."""
    pipe = client.pipeline(transaction=False)
    pipe.hkeys(keys.outbox(table_id))
    pipe.hkeys(keys.settled(table_id))
    outbox_fields, settled_fields = pipe.execute()
    return outbox_fields, settled_fields


def unsettled_fields(outbox_fields: list[Any], settled_fields: list[Any]) -> list[Any]:
    """The outbox fields without a settlement."""
    settled = {_text(f) for f in settled_fields}
    return [f for f in outbox_fields if _text(f) not in settled]


def pending_phases(client: redis.Redis, table_id: str) -> list[PendingPhase]:
    """The table's unsettled outbox phases, earliest first (by round, start before end)."""
    unsettled = unsettled_fields(*phase_fields(client, table_id))
    if not unsettled:
        return []
    raws = client.hmget(keys.outbox(table_id), unsettled)
    return _pending(table_id, unsettled, raws)


def unsettled_earlier_phases(client: redis.Redis, ref: PhaseRef) -> list[PhaseRef]:
    """Phases of the same table before ``ref`` (by round, start before end) not yet settled.

    Settling out of order could pay out a bowl before the contributions that filled it.
    """
    return earlier_unsettled(ref, *phase_fields(client, ref.table_id))


def earlier_unsettled(
    ref: PhaseRef, outbox_fields: list[Any], settled_fields: list[Any]
) -> list[PhaseRef]:
    """:func:`unsettled_earlier_phases` from the two hashes' field names."""
    settled = {_text(f) for f in settled_fields}
    order = phase_order(ref.round_no, ref.phase)
    earlier = []
    for field in outbox_fields:
        name = _text(field)
        parsed = _parse_field(name)
        if parsed is None or name in settled or phase_order(*parsed) >= order:
            continue
        earlier.append(PhaseRef(ref.table_id, *parsed))
    return sorted(earlier, key=lambda r: phase_order(r.round_no, r.phase))


def later_unsettled(
    ref: PhaseRef, outbox_fields: list[Any], settled_fields: list[Any]
) -> list[PhaseRef]:
    """Phases of the same table after ``ref`` not yet settled, earliest first, from the
    field names of its outbox and settled hashes (:func:`phase_fields`)."""
    settled = {_text(f) for f in settled_fields}
    order = phase_order(ref.round_no, ref.phase)
    later = []
    for field in outbox_fields:
        name = _text(field)
        parsed = _parse_field(name)
        if parsed is None or name in settled or phase_order(*parsed) <= order:
            continue
        later.append(PhaseRef(ref.table_id, *parsed))
    return sorted(later, key=lambda r: phase_order(r.round_no, r.phase))


def table_id_of_outbox(key: bytes | str) -> str:
    """The table id inside an outbox key ``kishpa:table:{<id>}:outbox``."""
    text = _text(key)
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        raise ValueError(f"not a table key: {text!r}")
    return text[start + 1 : end]


def index_unsettled(client: redis.Redis, table_id: str, created_ms: int) -> bool:
    """Put the table in the unsettled index with its earliest unsettled phase's time
    (``ZADD LT``: an earlier time already there is kept), as the table service's commit
    does; True when the table was not indexed before."""
    return bool(client.zadd(keys.unsettled(table_id), {table_id: created_ms}, lt=True))


def _index_score(pending: list[PendingPhase]) -> int:
    # An unreadable record has no time: 0 makes it due at once (its task dead-letters it).
    return min(0 if p.created_ms is None else p.created_ms for p in pending)


def unindex_settled_table(client: redis.Redis, table_id: str) -> list[PendingPhase]:
    """Take a table whose phases all looked settled out of the unsettled index; returns the
    unsettled phases it turns out to have after all (then it stays indexed), usually none.

    The entry goes first, then the outbox is read again: a phase committed meanwhile, whose
    index write may have come before this removal, puts the table back. (Reading first and
    removing after could drop the entry of a phase committed in between.)
    """
    client.zrem(keys.unsettled(table_id), table_id)
    pending = pending_phases(client, table_id)
    if pending:
        index_unsettled(client, table_id, _index_score(pending))
    return pending


def indexed_tables(
    client: redis.Redis, *, before_ms: int | None = None, unreachable: list[str] | None = None
) -> list[tuple[str, float]]:
    """The tables in the unsettled index, with their scores, oldest first, from every shard
    (one pipeline; on a cluster shard by shard, a shard whose master does not answer is
    skipped and named in ``unreachable``); with ``before_ms`` only those with a phase
    possibly created before it."""
    if unreachable is None:
        unreachable = []
    # Inclusive: an unreadable record's score 0 is "due for any time" (even ``before_ms=0``).
    top = "+inf" if before_ms is None else before_ms
    shards: list[Any]
    if hasattr(client, "get_node_from_key"):
        # A cluster: shard by shard, so a master that is down hides only its own shards
        # (its tables cannot be settled meanwhile anyway); the others are swept.
        shards = []
        for key in keys.unsettled_shards():
            try:
                shards.append(client.zrangebyscore(key, "-inf", top, withscores=True))
            except redis.RedisError as exc:
                unreachable.append(f"{key}: {exc!r}")
    else:
        pipe = client.pipeline(transaction=False)
        for key in keys.unsettled_shards():
            pipe.zrangebyscore(key, "-inf", top, withscores=True)
        shards = pipe.execute()
    found = [(_text(member), float(score)) for shard in shards for member, score in shard]
    return sorted(found, key=lambda entry: entry[1])


def pending_tables(
    client: redis.Redis, *, before_ms: int | None = None, unreachable: list[str] | None = None
) -> Iterator[tuple[str, list[PendingPhase]]]:
    """Every indexed table with unsettled outbox phases, and those phases (earliest first),
    the tables in the order of their index scores (oldest first).

    Reads the 16 shards of the unsettled index, never SCAN; each table's phases come from its
    outbox and settled hashes, the source of truth. An entry whose table has nothing
    unsettled left (its settlement died before removing it) is removed on the way. A shard
    or table whose Redis node does not answer is skipped and named in ``unreachable`` (on a
    cluster the other masters' tables go on).
    """
    if unreachable is None:
        unreachable = []
    for table_id, _score in indexed_tables(client, before_ms=before_ms, unreachable=unreachable):
        try:
            # A phase committed while the stale entry was removed is found by the 2nd read.
            pending = pending_phases(client, table_id) or unindex_settled_table(client, table_id)
        except redis.RedisError as exc:
            unreachable.append(f"{table_id}: {exc!r}")
            continue
        if pending:
            yield table_id, pending


def rebuild_unsettled_index(client: redis.Redis, *, scan_count: int = 500) -> int:
    """Index every table with an unsettled outbox phase, from the outboxes themselves (SCAN,
    never KEYS; on a cluster every master); returns how many were missing from the index.

    What makes a lost index write harmless: on a cluster the commit's index write follows
    the commit and may be lost with a dying table service. It only adds (``ZADD LT``):
    entries of settled tables are removed by the settlement and by the sweeps.
    """
    restored = 0
    for key in client.scan_iter(match=keys.outbox_pattern(), count=scan_count, _type="HASH"):
        table_id = table_id_of_outbox(key)
        pending = pending_phases(client, table_id)
        if pending and index_unsettled(client, table_id, _index_score(pending)):
            restored += 1
    return restored


def unsettled_phases(client: redis.Redis, *, created_before_ms: int) -> Iterator[PhaseRef]:
    """Every outbox phase created before ``created_before_ms`` that has no settlement yet
    (and every unreadable one: a task will dead-letter it), from the indexed tables whose
    score says they may have one (``ZRANGEBYSCORE``)."""
    for _table_id, pending in pending_tables(client, before_ms=created_before_ms):
        for phase in pending:
            if phase.created_ms is None or phase.created_ms < created_before_ms:
                yield phase.ref


@dataclass(frozen=True, slots=True)
class PhaseState:
    """Everything a settlement task first needs to know about its phase, read at once."""

    settled: bool
    dead_lettered: bool
    raw_record: bytes | None
    earlier_unsettled: list[PhaseRef]


def phase_state(
    client: redis.Redis, ref: PhaseRef, *, dead_letter_index: str, field: str
) -> PhaseState:
    """One round trip: the phase's record, whether it is settled or dead-lettered (``field``
    of ``dead_letter_index``), and the table's earlier unsettled phases."""
    pipe = client.pipeline(transaction=False)
    pipe.hget(keys.outbox(ref.table_id), ref.field)
    pipe.hkeys(keys.outbox(ref.table_id))
    pipe.hkeys(keys.settled(ref.table_id))
    pipe.hexists(dead_letter_index, field)
    pipe.hget(keys.settled(ref.table_id), TRIMMED_FIELD)
    raw, outbox_fields, settled_fields, dead, trimmed = pipe.execute()
    # Settled, then trimmed with its round (settle.lua): a redelivery, never a new phase.
    gone = raw is None and trimmed is not None and ref.round_no <= int(trimmed)
    return PhaseState(
        settled=gone or ref.field in {_text(f) for f in settled_fields},
        dead_lettered=bool(dead),
        raw_record=raw,
        earlier_unsettled=earlier_unsettled(ref, outbox_fields, settled_fields),
    )


def enqueued_marker(ref: PhaseRef) -> str:
    """Key remembering that ``ref`` was enqueued again recently (expires by itself)."""
    return f"kishpa:sweeper:{{{ref.table_id}}}:{ref.round_no}:{ref.phase}"


def claim_enqueue(client: redis.Redis, ref: PhaseRef, *, now_ms: int, deadline_s: float) -> bool:
    """Whether to enqueue ``ref`` again now: true at most once per deadline per phase, for
    the sweeper and waiting tasks together (SET NX with the deadline as expiry)."""
    ttl_ms = max(int(deadline_s * 1000), 1000)
    return bool(client.set(enqueued_marker(ref), now_ms, nx=True, px=ttl_ms))
