"""Events of a deal: what happened, and who may see it.

A public event (``private_to`` None) goes to everyone at the table and never names a card
in another player's hand or the stock order; a private event goes to one seat only (the
cards he was dealt, the card he drew from the stock).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Event:
    """One fact of the deal. ``seat`` is the acting seat, or -1 for the table."""

    kind: str
    seat: int = -1
    data: dict[str, Any] = field(default_factory=dict)
    private_to: int | None = None

    @property
    def is_public(self) -> bool:
        return self.private_to is None

    def visible_to(self, seat: int) -> bool:
        """Whether this seat may see the event."""
        return self.private_to is None or self.private_to == seat

    def stream_parts(self) -> dict[str, Any]:
        """The event in the table stream's shape (``shared/stream.py``).

        A public event is ``type``/``seat``/``data``; a private one becomes a wholly private
        entry (``type`` "private", empty ``data``) whose ``private_data`` holds the event.
        """
        if self.private_to is None:
            return {
                "type": self.kind,
                "seat": self.seat,
                "data": self.data,
                "private_seat": None,
                "private_data": None,
            }
        return {
            "type": "private",
            "seat": self.seat,
            "data": {},
            "private_seat": self.private_to,
            "private_data": {"type": self.kind, "seat": self.seat, "data": self.data},
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "seat": self.seat,
            "data": self.data,
            "private_to": self.private_to,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Event:
        return cls(
            kind=str(data["kind"]),
            seat=int(data["seat"]),
            data=dict(data["data"]),
            private_to=None if data.get("private_to") is None else int(data["private_to"]),
        )
