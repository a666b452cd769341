"""The stream entry format of table events and who may see their private part."""

from __future__ import annotations

import pytest

from services.table.engine import Deadline, Table, TableSettings
from shared.stream import NO_SEAT, TableEvent, decode, encode, flatten

pytestmark = pytest.mark.unit


def test_public_event_round_trips_without_private_fields() -> None:
    event = TableEvent("discarded", 3, 1, {"tile": 7, "face": "R8"})
    fields = encode(event)
    assert set(fields) == {"type", "round", "seat", "data"}
    assert decode(fields) == event
    assert decode({k.encode(): v.encode() for k, v in fields.items()}) == event


def test_private_part_is_visible_only_to_its_seat() -> None:
    event = TableEvent("drew", 2, 3, {"source": "pile"}, 3, {"tile": 41})
    back = decode(encode(event))
    assert back == event
    assert back.visible_to(3) == {"tile": 41}
    assert back.visible_to(0) is None
    assert back.visible_to(None) is None


def test_flatten_counts_field_pairs_for_the_commit_script() -> None:
    flat = flatten(TableEvent("x", 0, NO_SEAT, {}))
    assert flat[0] == "4"
    assert len(flat) == 1 + 2 * 4


def test_table_envelope_round_trips() -> None:
    table = Table(
        table_id="t",
        game_name="kishpa",
        creator="a",
        settings=TableSettings(seats=3, turn_seconds=5),
        created_ms=1,
        players=["a", "b"],
        status="playing",
        client_seeds={"a": "x"},
        rack_orders={"a": [3, 1, 2]},
        timeouts={"1": 2},
        autoplay=[1],
        deadline=Deadline(99, "turn", (1,)),
        game={"anything": [1, 2]},
    )
    assert Table.from_dict(table.to_dict()) == table
    assert table.seat_of("b") == 1
    assert table.seat_of("zed") is None
