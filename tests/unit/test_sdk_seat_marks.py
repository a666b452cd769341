"""The deal's seats as a client sees them live (``round_started.seats``) against the record:
a record whose bot flags or declarations differ from what the deal showed fails
(``SEATS_MISMATCH``), even where the record alone agrees with itself (a bot flag dropped from
a seat that never contributed). The deal is docs/fairness.md's Kishpa ``table`` vector."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kishpa.table.v1 import table_pb2
from sdk import fairness
from services.table.wire_events import event_message
from shared.stream import StoredEvent, TableEvent
from tests.support.fairness_vectors import table_evidence, vectors

pytestmark = pytest.mark.unit

MARKS = ("bot_seats", "declared_seats", "awaited_seats", "autoplay_seats", "awaited_until_ms")


def _kishpa_vector() -> dict[str, Any]:
    (vector,) = [v for v in vectors("table") if v["game"] == "kishpa"]
    return vector


def _watch(v: dict[str, Any]) -> fairness.RoundEvidence:
    """Seat 0's live view of the vector's deal through a RoundWitness."""
    witness = fairness.RoundWitness()
    started = {
        "players": ["ann", "bot", "cat"],
        "starter": v["starter"],
        "commitment": v["commitment"],
        "kishpa": fairness.face(v["kishpa"]),
        **{name: v[name] for name in MARKS},
    }
    witness.observe("round_started", 1, -1, started)
    witness.observe("dealt", 1, 0, {}, {"hand": [{"id": t} for t in v["hands"][0]]})
    witness.observe("kishpa_replaced", 1, -1, {"kishpa": fairness.face(v["replacement"])})
    for seat, tile, left in v["draws"]:
        if seat == 0:
            witness.observe("drew", 1, 0, {"source": "pile", "pile": left}, {"tile_id": tile})
    ended = {
        "server_seed": v["server_seed"],
        "client_seeds": v["client_seeds"],
        "commitment": v["commitment"],
    }
    verdict = witness.observe("round_ended", 1, -1, ended)
    assert verdict is not None
    assert verdict.ok, verdict.summary()
    live = witness.ended(1)
    assert live is not None
    return live


def test_the_record_matching_what_was_shown_live_verifies() -> None:
    v = _kishpa_vector()
    merged = fairness.with_record(_watch(v), table_evidence(v))
    result = fairness.verify_round(merged)
    assert result.ok, result.summary()
    assert "the seats' marks: 1 house bot (seat 2), 2 awaited" in result.summary()


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("bot_seats", []),  # a bot flag dropped: the record alone cannot tell
        ("declared_seats", [0]),
        ("awaited_until_ms", 0),
        ("record_version", 0),  # the marks left out of the record altogether
    ],
)
def test_a_record_whose_seats_differ_from_the_live_deal_fails(field: str, value: Any) -> None:
    v = _kishpa_vector()
    changed = copy.deepcopy(v)
    changed[field] = value
    if field == "declared_seats":
        changed["awaited_seats"] = [0]  # consistent with itself, not with the live deal
    record = table_evidence(changed)
    alone = fairness.verify_round(record)
    if field in ("bot_seats", "awaited_until_ms", "record_version"):
        assert alone.ok, alone.summary()  # nothing for the record alone to catch
    result = fairness.verify_round(fairness.with_record(_watch(v), record))
    assert fairness.SEATS_MISMATCH in {f.check for f in result.failures}, result.summary()


def test_the_wire_start_event_carries_the_seats_to_the_witness() -> None:
    data = {
        "players": ["ann", "bot-1", "bot-2"],
        "starter": 0,
        "commitment": "ab" * 32,
        "kishpa_id": 3,
        "joker": "R5",
        "hand_sizes": [15, 14, 14],
        "pile": 62,
        "bot_seats": [1, 2],
        "declared_seats": [],
        "awaited_seats": [0],
        "autoplay_seats": [],
        "awaited_until_ms": 1_767_225_603_000,
    }
    stored = StoredEvent("1767225600000-0", TableEvent("round_started", 1, -1, data))
    message = event_message(stored, lambda t: "R4", "kishpa")
    assert isinstance(message, table_pb2.TableEvent)
    seats = message.round_started.seats
    assert list(seats.bot_seats) == [1, 2]
    assert list(seats.awaited_seats) == [0]
    assert seats.awaited_until.ToMilliseconds() == 1_767_225_603_000
    witness = fairness.RoundWitness()
    witness.observe_message(message)
    live = witness._rounds[1]
    assert (live.record_version, live.bot_seats, live.awaited_seats) == (3, [1, 2], [0])
    assert live.awaited_until_ms == 1_767_225_603_000
    # A deal dealt before the table committed in advance names no seats.
    bare = {k: x for k, x in data.items() if k not in MARKS}
    older = event_message(
        StoredEvent("1-0", TableEvent("round_started", 1, -1, bare)), str, "kishpa"
    )
    assert older is not None
    assert not older.round_started.HasField("seats")
