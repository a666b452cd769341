"""The phase record: the settlement outbox entry the table service writes and the workers read.

One record per round phase (Kishpa ``start``/``end``, Hand ``buy_in``/``payout``), stored as
JSON in the table's outbox hash (``keys.outbox``) under the field ``"<round>:<phase>"``
(``keys.phase_field``) by the same atomic commit that reached the phase::

    {"table_id": str, "game": str, "round": int, "phase": str,
     "record": {...the game's round record...}, "created_ms": int,
     "trace": "00-<trace id>-<span id>-01"}   (optional: the commit's W3C traceparent)

:meth:`PhaseRecord.to_json` writes it and :func:`parse_phase_record` reads it back: one type
for both sides, so the two cannot drift apart.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from shared import keys


class BadPhaseRecord(ValueError):
    """A phase record that cannot be read: settling it again will not help."""


@dataclass(frozen=True, slots=True)
class PhaseRef:
    """The ids naming one round phase of one table (what a settlement task is given)."""

    table_id: str
    round_no: int
    phase: str

    @property
    def field(self) -> str:
        """The phase's field in the table's outbox and settled hashes."""
        return keys.phase_field(self.round_no, self.phase)


@dataclass(frozen=True, slots=True)
class PhaseRecord:
    """One outbox entry: what settlement of one round phase needs."""

    table_id: str
    game: str
    round_no: int
    phase: str
    record: dict[str, Any]
    """The game's round record (JSON-able); its rules turn it into postings."""
    created_ms: int
    trace: str = ""
    """W3C ``traceparent`` of the commit that wrote it ("" when tracing is off)."""

    @property
    def ref(self) -> PhaseRef:
        return PhaseRef(self.table_id, self.round_no, self.phase)

    @property
    def field(self) -> str:
        """The record's field in the table's outbox hash."""
        return keys.phase_field(self.round_no, self.phase)

    def to_json(self) -> str:
        """The stored form (compact, keys sorted)."""
        stored: dict[str, Any] = {
            "table_id": self.table_id,
            "game": self.game,
            "round": self.round_no,
            "phase": self.phase,
            "record": dict(self.record),
            "created_ms": self.created_ms,
        }
        if self.trace:
            stored["trace"] = self.trace
        return json.dumps(stored, separators=(",", ":"), sort_keys=True)


def parse_phase_record(raw: bytes | str) -> PhaseRecord:
    """Decode an outbox value, refusing anything that does not follow the contract."""
    try:
        obj = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadPhaseRecord(f"phase record is not JSON: {exc}") from exc
    if not isinstance(obj, dict):
        raise BadPhaseRecord("phase record is not a JSON object")
    try:
        table_id, game, round_no = obj["table_id"], obj["game"], obj["round"]
        phase, record, created_ms = obj["phase"], obj["record"], obj["created_ms"]
    except KeyError as exc:
        raise BadPhaseRecord(f"phase record lacks {exc.args[0]!r}") from exc
    if not (isinstance(table_id, str) and isinstance(game, str) and isinstance(phase, str)):
        raise BadPhaseRecord("table_id, game and phase must be strings")
    if not (isinstance(round_no, int) and isinstance(created_ms, int)):
        raise BadPhaseRecord("round and created_ms must be integers")
    if not isinstance(record, dict):
        raise BadPhaseRecord("record must be a JSON object")
    trace = obj.get("trace", "")
    if not isinstance(trace, str):
        raise BadPhaseRecord("trace must be a string")
    return PhaseRecord(table_id, game, round_no, phase, record, created_ms, trace)
