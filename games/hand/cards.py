"""Cards, faces, the 106-card double pack and the text notation (``AS``, ``10H``, ``J1``).

A *card* is one physical copy, named by a stable id 0–105. A *face* is what it shows; the
rules only look at faces. Ids are laid out as::

    id = copy * 52 + suit_index * 13 + (rank - 1)   for 0 <= id < 104 (suits S H D C)
    104 = J1, 105 = J2 (the two jokers)

Ranks are 1 (ace) to 13 (king). Text is rank then suit letter: ``AS``, ``2H`` … ``10H``,
``JD``, ``QD``, ``KC``; jokers are ``J1`` and ``J2`` (``J`` followed by a suit is the jack).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from games.hand.errors import CardNotationError


class Suit(StrEnum):
    SPADES = "S"
    HEARTS = "H"
    DIAMONDS = "D"
    CLUBS = "C"


SUITS: tuple[Suit, ...] = (Suit.SPADES, Suit.HEARTS, Suit.DIAMONDS, Suit.CLUBS)
RANKS = range(1, 14)
ACE = 1
KING = 13
CARD_COUNT = 106
PACK_SIZE = 52
JOKER_IDS: tuple[int, int] = (104, 105)

_RANK_TEXT = {1: "A", 11: "J", 12: "Q", 13: "K"}
_RANK_BY_TEXT = {**{str(n): n for n in range(2, 11)}, "A": 1, "J": 11, "Q": 12, "K": 13}


@dataclass(frozen=True, slots=True, order=True)
class Face:
    """What a card shows: a suit and a rank 1–13, or a joker (``suit`` None, rank 0)."""

    rank: int
    suit: Suit | None

    @property
    def is_joker(self) -> bool:
        return self.suit is None

    def __str__(self) -> str:
        if self.suit is None:
            return "J?"
        return _RANK_TEXT.get(self.rank, str(self.rank)) + self.suit.value

    def __repr__(self) -> str:
        return f"Face({self})"


JOKER_FACE = Face(0, None)


def is_joker(card_id: int) -> bool:
    """True for the two joker ids."""
    return card_id >= PACK_SIZE * 2


def face_of(card_id: int) -> Face:
    """The face shown by the card with this id."""
    if type(card_id) is int and 0 <= card_id < CARD_COUNT:
        return _FACES[card_id]
    check_id(card_id)
    return _FACES[card_id]


_FACES: tuple[Face, ...] = (
    *(Face(i % 13 + 1, SUITS[i // 13]) for i in range(PACK_SIZE)),
    *(Face(i % 13 + 1, SUITS[i // 13]) for i in range(PACK_SIZE)),
    JOKER_FACE,
    JOKER_FACE,
)


def check_id(card_id: int) -> None:
    """Raise :class:`CardNotationError` unless ``card_id`` names one of the 106 cards."""
    if not isinstance(card_id, int) or isinstance(card_id, bool) or not 0 <= card_id < 106:
        raise CardNotationError(f"card id {card_id!r} is out of range 0-{CARD_COUNT - 1}")


def ids_of(face: Face) -> tuple[int, int]:
    """The ids of both copies of a face (for a joker: J1 and J2)."""
    if face.suit is None:
        return JOKER_IDS
    base = SUITS.index(face.suit) * 13 + face.rank - 1
    return (base, base + PACK_SIZE)


def card_text(card_id: int) -> str:
    """The notation of one card: ``AS``, ``10H``, ``QD``; jokers ``J1`` and ``J2``."""
    if is_joker(card_id):
        check_id(card_id)
        return f"J{card_id - JOKER_IDS[0] + 1}"
    return str(face_of(card_id))


def parse_card(text: str, copy: int = 0) -> int:
    """Parse one card into an id (case-insensitive; blanks around it ignored).

    A face exists twice; ``copy`` (0 or 1) picks which physical card the id names. ``J1``
    and ``J2`` are the two jokers and ignore ``copy``.
    """
    if not isinstance(text, str):
        raise CardNotationError(f"a card must be written as text like 'AS', got {text!r}")
    if copy not in (0, 1):
        raise CardNotationError(f"a face exists in copies 0 and 1, not {copy!r}")
    key = text.strip().upper()
    if key in ("J1", "J2"):
        return JOKER_IDS[int(key[1]) - 1]
    rank = _RANK_BY_TEXT.get(key[:-1])
    suit = key[-1:]
    if rank is None or suit not in {s.value for s in SUITS}:
        raise CardNotationError(
            f"unknown card {text!r}: write a rank A, 2-10, J, Q or K and a suit S, H, D or C "
            "(like 'AS', '10H', 'QD'), or a joker 'J1' or 'J2'"
        )
    return ids_of(Face(rank, Suit(suit)))[copy]


def parse_cards(texts: Iterable[str]) -> list[int]:
    """Parse many cards into distinct ids: a face written twice names both of its copies.

    Raises :class:`CardNotationError` for malformed text or a face written more often than
    the pack holds it.
    """
    seen: dict[int, int] = {}
    ids: list[int] = []
    for text in texts:
        first = parse_card(text)
        count = seen.get(first, 0)
        limit = 1 if is_joker(first) else 2
        if count >= limit:
            raise CardNotationError(
                f"{text.strip().upper()} appears {count + 1} times but the pack has {limit}"
            )
        seen[first] = count + 1
        ids.append(first if count == 0 else parse_card(text, copy=1))
    return ids


def cards_text(card_ids: Iterable[int]) -> list[str]:
    """The notation of many cards, in the given order."""
    return [card_text(c) for c in card_ids]


def sort_key(card_id: int) -> tuple[int, int, int]:
    """Display order: by suit, then rank, then copy; jokers last."""
    if is_joker(card_id):
        return (4, 0, card_id)
    face = face_of(card_id)
    assert face.suit is not None
    return (SUITS.index(face.suit), face.rank, card_id)
