"""The state of one deal, its plain-value form and the view each seat may see.

The state is stored by the table service (Redis) as :meth:`DealState.to_dict`; every value
is a plain ``str``/``int``/``bool``/``None``/``list``/``dict``. The stock lists the cards
top first; the discard pile lists them bottom first (its top is the last card).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from games.hand.cards import CARD_COUNT, card_text
from games.hand.errors import HandMoveError, Reason
from games.hand.melds import Meld, MeldKind, make_meld
from games.hand.ruleset import RuleSet

STATE_FORMAT = 1


class Phase(StrEnum):
    DRAW = "draw"
    """The seat to act must draw (from the stock or the discard pile)."""
    PLAY = "play"
    """The seat to act has drawn: he may meld, lay off, release jokers; he ends by discarding."""
    ENDED = "ended"


class EndReason(StrEnum):
    WENT_OUT = "went_out"
    STOCK_EXHAUSTED = "stock_exhausted"


@dataclass(slots=True)
class DealState:
    """Everything about one deal. Mutated only on copies, inside ``turns.apply``."""

    rules: RuleSet
    starter: int
    hands: list[list[int]]
    stock: list[int]
    discard_pile: list[int]
    melds: list[Meld] = field(default_factory=list)
    opened_turn: list[int] = field(default_factory=list)
    """Per seat, the turn number in which he opened, or -1."""
    turn: int = 0
    turn_no: int = 0
    phase: Phase = Phase.PLAY
    drawn_card: int | None = None
    must_use: int | None = None
    """The card taken from the discard pile this turn, until it is melded or laid off."""
    undo: dict[str, Any] | None = None
    """The state before this turn's discard-pile draw, for :class:`UndoTurn` and timeouts."""
    winner: int | None = None
    hand_win: bool = False
    end_reason: EndReason | None = None
    scores: list[int] | None = None
    deal_no: int = 0
    commitment: str = ""

    @property
    def seats(self) -> int:
        return len(self.hands)

    @property
    def top_discard(self) -> int | None:
        return self.discard_pile[-1] if self.discard_pile else None

    def has_opened(self, seat: int) -> bool:
        return self.opened_turn[seat] >= 0

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-serialisable values (the inverse of :meth:`from_dict`)."""
        return {
            "format": STATE_FORMAT,
            "rules": self.rules.to_dict(),
            "starter": self.starter,
            "hands": [list(h) for h in self.hands],
            "stock": list(self.stock),
            "discard_pile": list(self.discard_pile),
            "melds": [m.to_dict() for m in self.melds],
            "opened_turn": list(self.opened_turn),
            "turn": self.turn,
            "turn_no": self.turn_no,
            "phase": self.phase.value,
            "drawn_card": self.drawn_card,
            "must_use": self.must_use,
            "undo": self.undo,
            "winner": self.winner,
            "hand_win": self.hand_win,
            "end_reason": None if self.end_reason is None else self.end_reason.value,
            "scores": None if self.scores is None else list(self.scores),
            "deal_no": self.deal_no,
            "commitment": self.commitment,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DealState:
        """Rebuild a state stored with :meth:`to_dict`; inconsistent data is refused."""
        try:
            if data.get("format") != STATE_FORMAT:
                raise ValueError(f"unknown state format {data.get('format')!r}")
            end_reason = data["end_reason"]
            scores = data["scores"]
            state = cls(
                rules=RuleSet.from_dict(dict(data["rules"])),
                starter=int(data["starter"]),
                hands=[[int(c) for c in h] for h in data["hands"]],
                stock=[int(c) for c in data["stock"]],
                discard_pile=[int(c) for c in data["discard_pile"]],
                melds=[Meld.from_dict(m) for m in data["melds"]],
                opened_turn=[int(t) for t in data["opened_turn"]],
                turn=int(data["turn"]),
                turn_no=int(data["turn_no"]),
                phase=Phase(data["phase"]),
                drawn_card=_opt_int(data["drawn_card"]),
                must_use=_opt_int(data["must_use"]),
                undo=None if data["undo"] is None else dict(data["undo"]),
                winner=_opt_int(data["winner"]),
                hand_win=bool(data["hand_win"]),
                end_reason=None if end_reason is None else EndReason(end_reason),
                scores=None if scores is None else [int(s) for s in scores],
                deal_no=int(data["deal_no"]),
                commitment=str(data["commitment"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise HandMoveError(f"malformed deal state: {exc}", Reason.INVALID_STATE) from exc
        check_consistent(state)
        return state

    def copy(self) -> DealState:
        """An independent copy (the engine never mutates a state it was handed).

        Melds are immutable and the undo snapshot is never mutated, so both are shared.
        """
        return replace(
            self,
            hands=[list(h) for h in self.hands],
            stock=list(self.stock),
            discard_pile=list(self.discard_pile),
            melds=list(self.melds),
            opened_turn=list(self.opened_turn),
            scores=None if self.scores is None else list(self.scores),
        )


def _opt_int(value: Any) -> int | None:
    return None if value is None else int(value)


def card_places(state: DealState) -> Counter[int]:
    """How many places hold each card id (stock, discard pile, hands, melds)."""
    places: Counter[int] = Counter(state.stock)
    places.update(state.discard_pile)
    for hand in state.hands:
        places.update(hand)
    for meld in state.melds:
        places.update(meld.cards)
    return places


def check_consistent(state: DealState) -> None:
    """Raise INVALID_STATE unless every card is in exactly one place and every meld is valid."""

    def bad(message: str) -> HandMoveError:
        return HandMoveError(f"inconsistent deal state: {message}", Reason.INVALID_STATE)

    places = card_places(state)
    if set(places) != set(range(CARD_COUNT)) or any(n != 1 for n in places.values()):
        twice = sorted(c for c, n in places.items() if n != 1)
        raise bad(f"cards not in exactly one place (twice: {twice})")
    if not state.rules.min_seats <= state.seats <= state.rules.max_seats:
        raise bad(f"{state.seats} seats")
    if len(state.opened_turn) != state.seats or not 0 <= state.turn < state.seats:
        raise bad("seat data does not match the seats")
    if not 0 <= state.starter < state.seats:
        raise bad("no such starter")
    for meld in state.melds:
        kind = MeldKind(meld.kind)
        rebuilt = make_meld(meld.cards, meld.owner, state.rules, kind)
        if (rebuilt.rank, rebuilt.suit) != (meld.rank, meld.suit):
            raise bad(f"meld {meld} is recorded at the wrong place")
    if state.must_use is not None and state.must_use not in state.hands[state.turn]:
        raise bad(f"{card_text(state.must_use)} must be used but is not in hand")
    if state.phase is Phase.ENDED and state.scores is None:
        raise bad("an ended deal has no scores")


def seats_to_act(state: DealState) -> list[int]:
    """The seats the table service waits for (and sets a turn deadline for)."""
    return [] if state.phase is Phase.ENDED else [state.turn]


def seat_view(state: DealState, seat: int) -> dict[str, Any]:
    """What one seat may see: his own hand, and only public facts about the others."""
    if not 0 <= seat < state.seats:
        raise HandMoveError(f"no seat {seat} at this table", Reason.UNKNOWN_SEAT)
    ended = state.phase is Phase.ENDED
    return {
        "seat": seat,
        "deal_no": state.deal_no,
        "starter": state.starter,
        "turn": state.turn,
        "phase": state.phase.value,
        "hand": list(state.hands[seat]),
        "hand_sizes": [len(h) for h in state.hands],
        "stock_size": len(state.stock),
        "discard_pile": list(state.discard_pile),
        "melds": [dict(m.to_dict(), id=i) for i, m in enumerate(state.melds)],
        "opened": [t >= 0 for t in state.opened_turn],
        "opened_turn": list(state.opened_turn),
        "turn_no": state.turn_no,
        "must_use": state.must_use if state.turn == seat else None,
        "can_undo": state.undo is not None and state.turn == seat,
        "winner": state.winner,
        "hand_win": state.hand_win,
        "scores": state.scores,
        "hands": [list(h) for h in state.hands] if ended else None,
        "commitment": state.commitment,
    }
