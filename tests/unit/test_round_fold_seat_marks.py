"""The archive's round fold keeps what a deal's start event says of its seats (record
version 3, issue 32), so the archived record and the live one carry the same seat marks;
a deal started before seats were named stays record version 0."""

from __future__ import annotations

from typing import Any

from archive.round_fold import fold_round
from archive.round_proto import for_player, public_bytes, public_proto
from kishpa.table.v1 import table_pb2
from shared.stream import StoredEvent, TableEvent

PLAYERS = ["ann", "bot-1", "cat"]


def _game(start: dict[str, Any]) -> list[StoredEvent]:
    return [
        StoredEvent(
            "1-0",
            TableEvent("seed_committed", round=0, data={"deal": 1, "commitment": "c0"}),
        ),
        StoredEvent(
            "2-0",
            TableEvent("round_started", round=1, data={"players": PLAYERS, **start}),
        ),
        StoredEvent(
            "3-0",
            TableEvent("round_ended", round=1, data={"server_seed": "s", "client_seeds": []}),
        ),
    ]


def test_the_deals_seat_marks_are_folded_sorted_and_put_on_the_wire() -> None:
    marks = {
        "bot_seats": [1],
        "declared_seats": [2, 0],
        "awaited_seats": [0, 2],
        "autoplay_seats": [],
        "awaited_until_ms": 1_796_600_000_250,
    }
    record = fold_round("t1", 1, _game(marks), table_players=[], sit_down_seeds={})
    assert record is not None
    wire = public_proto(record)
    assert wire.record_version == 3
    assert list(wire.bot_seats) == [1]
    assert list(wire.declared_seats) == [0, 2]
    assert list(wire.awaited_seats) == [0, 2]
    assert list(wire.autoplay_seats) == []
    assert wire.HasField("awaited_until")
    assert wire.awaited_until.seconds == 1_796_600_000
    assert wire.awaited_until.nanos == 250_000_000
    # The archived bytes carry them, and so does a player's own form cut from them.
    archived = table_pb2.RoundRecord.FromString(public_bytes(record))
    mine = for_player(archived, "cat")
    assert mine is not None
    assert (mine.record_version, list(mine.declared_seats)) == (3, [0, 2])


def test_a_deal_that_named_no_seats_is_record_version_0_without_a_deadline() -> None:
    record = fold_round("t1", 1, _game({}), table_players=[], sit_down_seeds={})
    assert record is not None
    wire = public_proto(record)
    assert wire.record_version == 0
    assert not wire.HasField("awaited_until")
    assert list(wire.bot_seats) == []
