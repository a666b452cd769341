"""Table events and their Redis Stream entry format (shared with the settlement workers).

Every fact that happens at a table is one entry of the table's stream (``keys.events``).
An entry has these fields, all strings:

=============== ===========================================================================
``type``        what happened (``round_started``, ``drew``, ``discarded``, ``settled`` ...)
``round``       the round number (0 before the first round)
``seat``        the seat the event is about, or ``-1``
``data``        JSON object of public facts: every watcher of the table may see them
``private_seat`` optional: the one seat that may see ``private_data``
``private_data`` optional: JSON object only that seat may see (the tile he drew, his hand)
=============== ===========================================================================

A watcher receives ``data`` always and ``private_data`` only when he sits at
``private_seat``: hidden information never leaves the server for anyone else. An entry of
type ``private`` is wholly private (even that it happened shows something, e.g. that a seat
may reveal the kishpa): only ``private_seat`` receives it, as the event
``private_data = {"type", "seat", "data"}`` describes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

NO_SEAT = -1
PRIVATE = "private"
"""Type of a stream entry that only its ``private_seat`` may even know exists."""


@dataclass(frozen=True, slots=True)
class TableEvent:
    """One fact of a table: public ``data`` plus optional ``private_data`` for one seat."""

    type: str
    round: int = 0
    seat: int = NO_SEAT
    data: Mapping[str, Any] = field(default_factory=dict)
    private_seat: int | None = None
    private_data: Mapping[str, Any] | None = None

    def visible_to(self, seat: int | None) -> Mapping[str, Any] | None:
        """The private part this viewer may see (None for every other viewer)."""
        if self.private_seat is None or seat is None or seat != self.private_seat:
            return None
        return self.private_data

    def for_viewer(self, seat: int | None) -> TableEvent | None:
        """The event as this viewer may see it, or None when he may not see it at all."""
        if self.type == PRIVATE:
            if seat is None or seat != self.private_seat or self.private_data is None:
                return None
            inner = self.private_data
            return TableEvent(
                str(inner.get("type", PRIVATE)),
                self.round,
                int(inner.get("seat", NO_SEAT)),
                {},
                seat,
                dict(inner.get("data", {})),
            )
        if self.private_seat is not None and self.visible_to(seat) is None:
            return TableEvent(self.type, self.round, self.seat, self.data)
        return self


@dataclass(frozen=True, slots=True)
class StoredEvent:
    """An event as read back from the stream, with its stream id (what clients resume from)."""

    id: str
    event: TableEvent


def _dumps(obj: Mapping[str, Any]) -> str:
    return json.dumps(obj, separators=(",", ":"), sort_keys=True)


def encode(event: TableEvent) -> dict[str, str]:
    """The stream entry fields of an event."""
    fields = {
        "type": event.type,
        "round": str(event.round),
        "seat": str(event.seat),
        "data": _dumps(event.data),
    }
    if event.private_seat is not None:
        fields["private_seat"] = str(event.private_seat)
        fields["private_data"] = _dumps(event.private_data or {})
    return fields


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def decode(fields: Mapping[bytes, bytes] | Mapping[str, str]) -> TableEvent:
    """Rebuild an event from its stream entry fields (bytes or str keys and values)."""
    f = {_text(k): _text(v) for k, v in fields.items()}
    private_seat = f.get("private_seat")
    return TableEvent(
        type=f["type"],
        round=int(f.get("round", "0")),
        seat=int(f.get("seat", str(NO_SEAT))),
        data=json.loads(f.get("data", "{}")),
        private_seat=int(private_seat) if private_seat is not None else None,
        private_data=json.loads(f["private_data"]) if "private_data" in f else None,
    )


def stored_event(entry_id: str, fields: Mapping[bytes, bytes] | Mapping[str, str]) -> StoredEvent:
    """A stream entry as read back (what the shared fan-out decodes once for all watchers)."""
    return StoredEvent(entry_id, decode(fields))


def flatten(event: TableEvent) -> list[str]:
    """The entry as ``[n, k1, v1, ..., kn, vn]`` for the commit script's ARGV."""
    return flat_fields(encode(event))


def flat_fields(fields: Mapping[str, str]) -> list[str]:
    """Encoded entry fields as ``[n, k1, v1, ..., kn, vn]``."""
    out = [str(len(fields))]
    for key, value in fields.items():
        out += [key, value]
    return out
