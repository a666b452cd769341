"""Melds: sets and runs, their values, laying off and releasing jokers.

A *set* is 3–4 cards of one rank, all of different suits. A *run* is 3 or more cards of one
suit in sequence; the ace is low (``A 2 3``) or high (``Q K A``), never in the middle. A joker
stands for any card. A run's cards are kept from low to high and each sits at a *position*
1–14 (1 is the low ace, 14 the high ace), so a joker in a run always stands for one known
card. In a set a joker stands for a missing suit of the set's rank and takes its value.

Every function here is pure; refusals raise :class:`HandMoveError` with a reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

from games.hand.cards import ACE, SUITS, Face, Suit, card_text, face_of, is_joker
from games.hand.errors import HandMoveError, Reason
from games.hand.ruleset import RuleSet

HIGH_ACE_POSITION = 14


class MeldKind(StrEnum):
    SET = "set"
    RUN = "run"


@dataclass(frozen=True, slots=True)
class Meld:
    """A meld on the table, visible to everyone.

    For a set ``rank`` is the set's rank and ``suit`` is None; for a run ``rank`` is the
    position of its first card and ``suit`` its suit. ``owner`` is the seat that laid it.
    """

    kind: MeldKind
    cards: tuple[int, ...]
    rank: int
    suit: Suit | None
    owner: int

    @property
    def jokers(self) -> tuple[int, ...]:
        return tuple(c for c in self.cards if is_joker(c))

    @property
    def high(self) -> int:
        """A run's last position."""
        return self.rank + len(self.cards) - 1

    @property
    def is_closed_four(self) -> bool:
        """A full set holding a joker: its joker can never be released."""
        return self.kind is MeldKind.SET and len(self.cards) == 4 and bool(self.jokers)

    def stands_for(self, index: int) -> Face:
        """The face the card at ``index`` stands for (a set's joker: its rank, suit None)."""
        if self.kind is MeldKind.RUN:
            assert self.suit is not None
            return position_face(self.rank + index, self.suit)
        card = self.cards[index]
        return Face(self.rank, None) if is_joker(card) else face_of(card)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind.value,
            "cards": list(self.cards),
            "rank": self.rank,
            "suit": None if self.suit is None else self.suit.value,
            "owner": self.owner,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Meld:
        suit = data["suit"]
        return cls(
            kind=MeldKind(data["kind"]),
            cards=tuple(int(c) for c in data["cards"]),
            rank=int(data["rank"]),
            suit=None if suit is None else Suit(suit),
            owner=int(data["owner"]),
        )

    def __str__(self) -> str:
        return " ".join(card_text(c) for c in self.cards)


def position_face(position: int, suit: Suit) -> Face:
    """The card at a run position: 1 and 14 are the ace."""
    return Face(ACE if position == HIGH_ACE_POSITION else position, suit)


def rank_value(rank: int, rules: RuleSet) -> int:
    """A card's value in hand or in a set: A = 11, J Q K = 10, 2–10 face value."""
    if rank == ACE:
        return rules.ace_value
    return rules.court_value if rank > 10 else rank


def position_value(position: int, rules: RuleSet) -> int:
    """A run card's value for the opening count: the low ace counts 1, the high ace 11."""
    if position == 1:
        return rules.low_ace_value
    if position == HIGH_ACE_POSITION:
        return rules.ace_value
    return rank_value(position, rules)


def card_penalty(card_id: int, rules: RuleSet) -> int:
    """What a card left in hand costs: a joker 25, otherwise its value (A = 11)."""
    if is_joker(card_id):
        return rules.joker_penalty
    return rank_value(face_of(card_id).rank, rules)


def hand_penalty(cards: Sequence[int], rules: RuleSet) -> int:
    """The value of the cards left in a hand."""
    return sum(card_penalty(c, rules) for c in cards)


def meld_value(meld: Meld, rules: RuleSet) -> int:
    """A meld's value; each joker counts as the card it stands for."""
    if meld.kind is MeldKind.SET:
        return rank_value(meld.rank, rules) * len(meld.cards)
    return sum(position_value(meld.rank + i, rules) for i in range(len(meld.cards)))


def _refuse(message: str, reason: str = Reason.INVALID_MELD) -> HandMoveError:
    return HandMoveError(message, reason)


def _as_set(cards: Sequence[int], owner: int, rules: RuleSet) -> Meld | None:
    real = [face_of(c) for c in cards if not is_joker(c)]
    if not real or len(cards) > rules.max_set_size:
        return None
    rank = real[0].rank
    suits = [f.suit for f in real]
    if any(f.rank != rank for f in real) or len(set(suits)) != len(suits):
        return None
    return Meld(MeldKind.SET, tuple(cards), rank, None, owner)


def _as_run_in_order(cards: Sequence[int], owner: int, rules: RuleSet) -> Meld | None:
    """The run these cards form in the order given (low to high), if any."""
    if len(cards) > rules.max_run_length:
        return None
    first = next((i for i, c in enumerate(cards) if not is_joker(c)), None)
    if first is None:
        return None
    face = face_of(cards[first])
    assert face.suit is not None
    starts = [p - first for p in ((1, HIGH_ACE_POSITION) if face.rank == ACE else (face.rank,))]
    for low in starts:
        if low < 1 or low + len(cards) - 1 > HIGH_ACE_POSITION:
            continue
        if all(
            is_joker(c) or face_of(c) == position_face(low + i, face.suit)
            for i, c in enumerate(cards)
        ):
            return Meld(MeldKind.RUN, tuple(cards), low, face.suit, owner)
    return None


def _as_run(cards: Sequence[int], owner: int, rules: RuleSet) -> Meld | None:
    run = _as_run_in_order(cards, owner, rules)
    if run is not None or any(is_joker(c) for c in cards):
        return run
    # Without jokers the order is implied: try the ace low, then high (more value).
    by_rank = sorted(cards, key=lambda c: face_of(c).rank)
    aces_high = [c for c in by_rank if face_of(c).rank != ACE] + [
        c for c in by_rank if face_of(c).rank == ACE
    ]
    return _as_run_in_order(aces_high, owner, rules) or _as_run_in_order(by_rank, owner, rules)


def make_meld(
    cards: Sequence[int], owner: int, rules: RuleSet, kind: MeldKind | None = None
) -> Meld:
    """Check that ``cards`` form a set or a run and return the meld.

    A run's cards are read low to high in the order given, which places its jokers; without
    jokers any order is accepted. When the cards could be either (one real card and jokers)
    a set is chosen unless ``kind`` says otherwise.
    """

    def shown() -> str:
        return " ".join(card_text(c) for c in cards)

    if len(cards) < rules.min_meld_size:
        raise _refuse(f"a meld needs at least {rules.min_meld_size} cards: {shown()}")
    if len(set(cards)) != len(cards):
        raise _refuse(f"a card appears twice in {shown()}", Reason.DUPLICATE_CARD)
    jokers = sum(1 for c in cards if is_joker(c))
    if jokers > rules.max_jokers_per_meld:
        raise _refuse(f"a meld holds at most {rules.max_jokers_per_meld} jokers: {shown()}")
    if rules.meld_needs_real_card and jokers == len(cards):
        raise _refuse(f"a meld needs at least one real card: {shown()}")
    meld = None
    if kind in (None, MeldKind.SET):
        meld = _as_set(cards, owner, rules)
    if meld is None and kind in (None, MeldKind.RUN):
        meld = _as_run(cards, owner, rules)
    if meld is None:
        raise _refuse(
            f"{shown()} is neither a set (3-4 cards of one rank, different suits) nor a run "
            "(3+ cards of one suit in sequence, the ace only at an end)"
        )
    return meld


def _layoff_set(meld: Meld, card: int, rules: RuleSet) -> Meld:
    if len(meld.cards) >= rules.max_set_size:
        raise _refuse(f"the set {meld} is already complete", Reason.INVALID_LAYOFF)
    if is_joker(card):
        if len(meld.jokers) >= rules.max_jokers_per_meld:
            raise _refuse(f"the set {meld} holds enough jokers", Reason.INVALID_LAYOFF)
        return replace(meld, cards=(*meld.cards, card))
    face = face_of(card)
    present = {face_of(c).suit for c in meld.cards if not is_joker(c)}
    if face.rank != meld.rank or face.suit in present:
        raise _refuse(
            f"{card_text(card)} does not add a new suit to the set {meld}", Reason.INVALID_LAYOFF
        )
    return replace(meld, cards=(*meld.cards, card))


def _layoff_run(meld: Meld, card: int, rules: RuleSet, end: str | None) -> Meld:
    assert meld.suit is not None
    if len(meld.cards) >= rules.max_run_length:
        raise _refuse(f"the run {meld} cannot grow", Reason.INVALID_LAYOFF)
    if is_joker(card) and len(meld.jokers) >= rules.max_jokers_per_meld:
        raise _refuse(f"the run {meld} holds enough jokers", Reason.INVALID_LAYOFF)
    ends = ("high", "low") if end is None else (end,)
    for side in ends:
        if side == "high":
            position = meld.high + 1
            if position <= HIGH_ACE_POSITION and (
                is_joker(card) or face_of(card) == position_face(position, meld.suit)
            ):
                return replace(meld, cards=(*meld.cards, card))
        elif side == "low":
            position = meld.rank - 1
            if position >= 1 and (
                is_joker(card) or face_of(card) == position_face(position, meld.suit)
            ):
                return replace(meld, cards=(card, *meld.cards), rank=position)
        else:
            raise _refuse(f"an end is 'low' or 'high', not {side!r}", Reason.INVALID_LAYOFF)
    raise _refuse(f"{card_text(card)} does not extend the run {meld}", Reason.INVALID_LAYOFF)


def lay_off(meld: Meld, card: int, rules: RuleSet, end: str | None = None) -> Meld:
    """Add one card to a meld: a new suit to a 3-card set, or a card at an end of a run.

    ``end`` ("low"/"high") picks the end of a run; without it the high end is tried first
    (it only matters for a joker, or an ace on a run ``2 … K``).
    """
    if meld.kind is MeldKind.SET:
        return _layoff_set(meld, card, rules)
    return _layoff_run(meld, card, rules, end)


def release_joker(meld: Meld, cards: Sequence[int], rules: RuleSet) -> tuple[Meld, tuple[int, ...]]:
    """Put real cards in place of a meld's joker(s); return the new meld and the jokers freed.

    From a run: one real card, the very card a joker stands for, takes its place. From a set
    of three holding a joker: real cards of every missing suit complete a real four and the
    joker(s) come free. A closed four (a four holding a joker) is refused.
    """
    if not meld.jokers:
        raise _refuse(f"the meld {meld} holds no joker", Reason.INVALID_RELEASE)
    if any(is_joker(c) for c in cards) or len(set(cards)) != len(cards) or not cards:
        raise _refuse("a joker is released by distinct real cards", Reason.INVALID_RELEASE)
    if meld.kind is MeldKind.RUN:
        if len(cards) != 1:
            raise _refuse("a run's joker is released by exactly one card", Reason.INVALID_RELEASE)
        face = face_of(cards[0])
        for index, held in enumerate(meld.cards):
            if is_joker(held) and meld.stands_for(index) == face:
                new_cards = (*meld.cards[:index], cards[0], *meld.cards[index + 1 :])
                return replace(meld, cards=new_cards), (held,)
        raise _refuse(
            f"no joker in the run {meld} stands for {card_text(cards[0])}", Reason.INVALID_RELEASE
        )
    if meld.is_closed_four:
        raise _refuse(
            f"the set {meld} is a closed four: its joker can never be released",
            Reason.CLOSED_FOUR,
        )
    real = [c for c in meld.cards if not is_joker(c)]
    missing = set(SUITS) - {face_of(c).suit for c in real}
    given = [face_of(c) for c in cards]
    if (
        any(f.rank != meld.rank for f in given)
        or {f.suit for f in given} != missing
        or len(given) != len(missing)
    ):
        wanted = " ".join(str(Face(meld.rank, s)) for s in SUITS if s in missing)
        raise _refuse(
            f"releasing the joker of {meld} takes every missing suit: {wanted}",
            Reason.INVALID_RELEASE,
        )
    freed = meld.jokers
    if len(real) + len(cards) > rules.max_set_size:  # pragma: no cover - four suits at most
        raise _refuse("a set holds at most four cards", Reason.INVALID_RELEASE)
    return replace(meld, cards=(*real, *cards)), freed
