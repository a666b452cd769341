"""The actions a seat (or the table service, for a timeout) can ask of a deal."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from games.hand.errors import HandMoveError, Reason
from games.hand.melds import MeldKind


@dataclass(frozen=True, slots=True)
class DrawStock:
    """Draw the top card of the stock."""

    seat: int


@dataclass(frozen=True, slots=True)
class DrawDiscard:
    """Take the top card of the discard pile; it must be used in a meld or lay-off this turn."""

    seat: int


@dataclass(frozen=True, slots=True)
class MeldSpec:
    """Cards for one new meld; a run lists its cards low to high (which places jokers)."""

    cards: tuple[int, ...]
    kind: MeldKind | None = None


@dataclass(frozen=True, slots=True)
class LayMelds:
    """Lay new melds from hand; a player's first melds are his opening (51 or more)."""

    seat: int
    melds: tuple[MeldSpec, ...]


@dataclass(frozen=True, slots=True)
class LayOff:
    """Add one card to a meld on the table (``end`` "low"/"high" for a run, if it matters)."""

    seat: int
    meld_id: int
    card: int
    end: str | None = None


@dataclass(frozen=True, slots=True)
class ReleaseJoker:
    """Put real card(s) in place of a meld's joker and take the joker into hand."""

    seat: int
    meld_id: int
    cards: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Discard:
    """End the turn by discarding a card; discarding the last card goes out."""

    seat: int
    card: int


@dataclass(frozen=True, slots=True)
class UndoTurn:
    """Take back a turn begun from the discard pile: the card goes back, melds return."""

    seat: int


@dataclass(frozen=True, slots=True)
class TimeOut:
    """The turn's time ran out: draw from the stock and discard the drawn card."""

    seat: int


Action = DrawStock | DrawDiscard | LayMelds | LayOff | ReleaseJoker | Discard | UndoTurn | TimeOut

_SIMPLE: dict[str, type[DrawStock | DrawDiscard | UndoTurn | TimeOut]] = {
    "draw_stock": DrawStock,
    "draw_discard": DrawDiscard,
    "undo_turn": UndoTurn,
    "time_out": TimeOut,
}


def action_to_dict(action: Action) -> dict[str, Any]:
    """Plain JSON-serialisable form of an action (the inverse of :func:`action_from_dict`)."""
    match action:
        case LayMelds(seat, melds):
            return {
                "type": "lay_melds",
                "seat": seat,
                "melds": [
                    {"cards": list(m.cards), "kind": None if m.kind is None else m.kind.value}
                    for m in melds
                ],
            }
        case LayOff(seat, meld_id, card, end):
            return {"type": "lay_off", "seat": seat, "meld_id": meld_id, "card": card, "end": end}
        case ReleaseJoker(seat, meld_id, cards):
            return {"type": "release_joker", "seat": seat, "meld_id": meld_id, "cards": list(cards)}
        case Discard(seat, card):
            return {"type": "discard", "seat": seat, "card": card}
    name = next(k for k, v in _SIMPLE.items() if isinstance(action, v))
    return {"type": name, "seat": action.seat}


def action_from_dict(data: dict[str, Any]) -> Action:
    """Rebuild an action from :func:`action_to_dict`; malformed input is an INVALID_STATE."""
    try:
        kind = data["type"]
        seat = int(data["seat"])
        if kind in _SIMPLE:
            return _SIMPLE[kind](seat)
        if kind == "lay_melds":
            return LayMelds(
                seat,
                tuple(
                    MeldSpec(
                        tuple(int(c) for c in m["cards"]),
                        None if m.get("kind") is None else MeldKind(m["kind"]),
                    )
                    for m in data["melds"]
                ),
            )
        if kind == "lay_off":
            return LayOff(seat, int(data["meld_id"]), int(data["card"]), data.get("end"))
        if kind == "release_joker":
            return ReleaseJoker(seat, int(data["meld_id"]), tuple(int(c) for c in data["cards"]))
        if kind == "discard":
            return Discard(seat, int(data["card"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise HandMoveError(f"malformed action {data!r}: {exc}", Reason.MALFORMED_ACTION) from exc
    raise HandMoveError(f"unknown action type {data.get('type')!r}", Reason.MALFORMED_ACTION)
