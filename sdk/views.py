"""Reading ``kishpa.table.v1.TableView`` fields that may be unset (no seat, no turn)."""

from __future__ import annotations

from kishpa.table.v1 import table_pb2


def my_seat(view: table_pb2.TableView) -> int | None:
    """The caller's seat, or None when he is not seated."""
    return view.my_seat if view.HasField("my_seat") else None


def turn_seat(view: table_pb2.TableView) -> int | None:
    """Whose turn it is, or None (no round, a window is open, or the round ended)."""
    if not view.HasField("round") or not view.round.HasField("turn_seat"):
        return None
    return view.round.turn_seat


def my_turn(view: table_pb2.TableView) -> bool:
    """True when it is the caller's turn."""
    seat = my_seat(view)
    return seat is not None and turn_seat(view) == seat
