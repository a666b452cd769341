"""Realistic phase records for the tests and the benchmarks (never shipped: ``devkit``).

Builds the outbox entries the table service writes (docs/workers.md, "hand-off contract")
for a plausible round: a deal from the real 106-tile set, a joker held at the start, and a
winner whose 14 tiles win. The records pass the rules engine's validation
(``games.kishpa.record``); :func:`poisoned_end_record` builds one it rejects.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from games.kishpa.record import START_FIELDS
from games.kishpa.tiles import COLOURS, NUMBERS
from shared.phase_record import PhaseRecord

KISHPA = "R5"  # joker R6
JOKER = "R6"
WINNING_HAND = [
    "B9", "B10", "B11", "B12", "B13",  # a run of five: the long run a win needs
    "Y7", "B7", "K7",
    "K1", "K2", "K3",
    "Y10", "Y11", "Y12",
]  # fmt: skip
FINAL_DISCARD = "Y2"
NOT_WINNING_HAND = [
    "B1", "B3", "B5", "B8", "R9", "R11", "R13", "Y1", "Y3", "Y5", "Y8", "K5", "K9", "K12",
]  # fmt: skip


def _full_set() -> list[str]:
    faces = [f"{c.value}{n}" for _ in range(2) for c in COLOURS for n in NUMBERS]
    return [*faces, "DR", "DK"]


def _take(pool: list[str], faces: Sequence[str]) -> None:
    for face in faces:
        pool.remove(face)


def round_record(
    players: Sequence[str],
    *,
    bowl: int = 0,
    winner: str | None = None,
    previous_winner: str | None = None,
    last_round: bool = False,
    starter: int = 0,
    winner_hand: Sequence[str] = WINNING_HAND,
) -> dict[str, Any]:
    """A whole round in the ``kishpa rules settle`` format (start and end fields)."""
    winner = players[1 % len(players)] if winner is None else winner
    pool = _full_set()
    _take(pool, [KISHPA])
    start_hands: dict[str, list[str]] = {}
    _take(pool, [JOKER])  # the starter holds a joker, so the kishpa stays
    for seat, player in enumerate(players):
        held = [JOKER] if seat == starter else []
        dealt = (15 if seat == starter else 14) - len(held)
        start_hands[player] = held + pool[:dealt]
        del pool[:dealt]
    end_pool = _full_set()
    _take(end_pool, [KISHPA, *winner_hand, FINAL_DISCARD])
    end_hands: dict[str, list[str]] = {}
    for player in players:
        if player == winner:
            end_hands[player] = list(winner_hand)
        else:
            end_hands[player] = end_pool[:14]
            del end_pool[:14]
    record: dict[str, Any] = {
        "players": list(players),
        "kishpa": KISHPA,
        "start_hands": start_hands,
        "end_hands": end_hands,
        "winner": winner,
        "final_discard": FINAL_DISCARD,
        "bowl": bowl,
        "last_round": last_round,
    }
    if previous_winner is not None:
        record["previous_winner"] = previous_winner
    return record


def start_part(record: dict[str, Any]) -> dict[str, Any]:
    """Only the fields known when the round starts (what the start phase record holds)."""
    return {k: v for k, v in record.items() if k in START_FIELDS}


def poisoned_end_record(players: Sequence[str]) -> dict[str, Any]:
    """A round whose claimed winner does not hold a winning hand: the rules reject it."""
    return round_record(players, winner_hand=NOT_WINNING_HAND)


def phase_entry(
    table_id: str, round_no: int, phase: str, record: dict[str, Any], created_ms: int
) -> str:
    """The outbox value (JSON) for one phase, exactly as the table service writes it."""
    body = start_part(record) if phase == "start" else record
    return PhaseRecord(table_id, "kishpa", round_no, phase, body, created_ms).to_json()
