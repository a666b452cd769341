"""The dead-letter list: phases that settlement refused for good, kept for operators.

The dead letters are sharded like every cross-table index (``keys.INDEX_SHARDS``, by the
table's hash-slot range), each shard in one Redis Cluster slot: ``kishpa:deadletter:{<tag>}``
is a Redis list of JSON entries ``{"table_id", "round", "phase", "reason", "time_ms"}``
(newest first); ``kishpa:deadletter:{<tag>}:phases`` is a hash naming every dead-lettered
phase of the shard once, so a phase delivered again is not listed twice and the sweeper
leaves it alone. An operator who fixed the cause releases the phase with
``kishpa worker release <table_id> <round> <phase>`` and the sweeper settles it again.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import redis

from shared import keys
from shared.phase_record import PhaseRef

DEADLETTER_PREFIX = "kishpa:deadletter"


def deadletter_list(shard: int) -> str:
    """The list of one shard's dead letters, newest first."""
    return f"{DEADLETTER_PREFIX}:{{{keys.shard_tag(shard)}}}"


def deadletter_index(shard: int) -> str:
    """The hash naming each dead-lettered phase of a shard once (same slot as its list)."""
    return f"{DEADLETTER_PREFIX}:{{{keys.shard_tag(shard)}}}:phases"


def index_of(ref: PhaseRef) -> str:
    """The dead-letter index (hash) of the shard that ``ref``'s table belongs to."""
    return deadletter_index(keys.shard_of(ref.table_id))


def _keys_of(ref: PhaseRef) -> tuple[str, str]:
    shard = keys.shard_of(ref.table_id)
    return deadletter_list(shard), deadletter_index(shard)


# HSETNX then LPUSH in one step: a phase is listed once however often it is delivered.
_PUSH_ONCE = """
if redis.call('HSETNX', KEYS[2], ARGV[1], ARGV[2]) == 1 then
  redis.call('LPUSH', KEYS[1], ARGV[2])
  return 1
end
return 0
"""


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """One refused phase and why."""

    table_id: str
    round_no: int
    phase: str
    reason: str
    time_ms: int

    def to_json(self) -> str:
        return json.dumps(
            {
                "table_id": self.table_id,
                "round": self.round_no,
                "phase": self.phase,
                "reason": self.reason,
                "time_ms": self.time_ms,
            },
            sort_keys=True,
        )

    @classmethod
    def from_json(cls, raw: bytes | str) -> DeadLetter:
        obj: dict[str, Any] = json.loads(raw)
        return cls(obj["table_id"], obj["round"], obj["phase"], obj["reason"], obj["time_ms"])


def index_field(ref: PhaseRef) -> str:
    """The phase's name in the dead-letter index."""
    return f"{ref.table_id}|{ref.round_no}:{ref.phase}"


def push_dead_letter(client: redis.Redis, ref: PhaseRef, *, reason: str, time_ms: int) -> bool:
    """List ``ref`` as refused; False when it was listed already."""
    letter = DeadLetter(ref.table_id, ref.round_no, ref.phase, reason, time_ms)
    pushed = client.eval(_PUSH_ONCE, 2, *_keys_of(ref), index_field(ref), letter.to_json())
    return int(pushed) == 1


def is_dead_lettered(client: redis.Redis, ref: PhaseRef) -> bool:
    """Whether ``ref`` is in the dead-letter list (and so not to be swept again)."""
    return bool(client.hexists(_keys_of(ref)[1], index_field(ref)))


def list_dead_letters(client: redis.Redis, *, limit: int = 100) -> list[DeadLetter]:
    """The newest ``limit`` dead letters, newest first (merged from every shard)."""
    letters = [
        DeadLetter.from_json(raw)
        for shard in range(keys.INDEX_SHARDS)
        for raw in client.lrange(deadletter_list(shard), 0, limit - 1)
    ]
    letters.sort(key=lambda letter: letter.time_ms, reverse=True)
    return letters[:limit]


def release_dead_letter(client: redis.Redis, ref: PhaseRef) -> bool:
    """Take ``ref`` off the dead-letter list so it is settled again; False if not listed."""
    listed, index = _keys_of(ref)
    raw = client.hget(index, index_field(ref))
    if raw is None:
        return False
    pipe = client.pipeline(transaction=True)
    pipe.lrem(listed, 0, raw.decode() if isinstance(raw, bytes) else raw)
    pipe.hdel(index, index_field(ref))
    pipe.execute()
    return True
