"""Tiles, faces, the 106-tile set and the text notation (``R7``, ``K13``, ``DR``, ``DK``).

A *tile* is one physical copy, named by a stable id 0–105. A *face* is what the tile shows;
the rules only ever look at faces. Ids are laid out as::

    id = copy * 52 + colour_index * 13 + (number - 1)   for 0 <= id < 104
    104 = DR (red doll), 105 = DK (black doll)
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from games.kishpa.errors import TileNotationError


class Colour(StrEnum):
    RED = "R"
    BLUE = "B"
    YELLOW = "Y"
    BLACK = "K"


COLOURS: tuple[Colour, ...] = (Colour.RED, Colour.BLUE, Colour.YELLOW, Colour.BLACK)
NUMBERS = range(1, 14)
TILE_COUNT = 106
NUMBERED_FACES = 52
COPIES_PER_FACE = 2
DOLL_NUMBER = 0


@dataclass(frozen=True, slots=True, order=True)
class Face:
    """What a tile shows: a colour and a number 1–13, or a doll (number 0)."""

    colour: Colour
    number: int

    @property
    def is_doll(self) -> bool:
        return self.number == DOLL_NUMBER

    @property
    def index(self) -> int:
        """Dense index 0–53: numbered faces 0–51 (colour-major), then DR=52, DK=53."""
        if self.is_doll:
            return 52 if self.colour is Colour.RED else 53
        return COLOURS.index(self.colour) * 13 + self.number - 1

    def __str__(self) -> str:
        if self.is_doll:
            return "D" + self.colour.value
        return f"{self.colour.value}{self.number}"

    def __repr__(self) -> str:
        return f"Face({self})"


RED_DOLL = Face(Colour.RED, DOLL_NUMBER)
BLACK_DOLL = Face(Colour.BLACK, DOLL_NUMBER)
DOLLS: tuple[Face, Face] = (RED_DOLL, BLACK_DOLL)

ALL_FACES: tuple[Face, ...] = (
    *(Face(c, n) for c in COLOURS for n in NUMBERS),
    RED_DOLL,
    BLACK_DOLL,
)
"""Every face, indexed by :attr:`Face.index`."""

_FACE_BY_TEXT = {str(f): f for f in ALL_FACES}


def face_of(tile_id: int) -> Face:
    """The face shown by the tile with this id."""
    if not 0 <= tile_id < TILE_COUNT:
        raise TileNotationError(f"tile id {tile_id} is out of range 0-{TILE_COUNT - 1}")
    if tile_id >= 104:
        return DOLLS[tile_id - 104]
    return ALL_FACES[tile_id % NUMBERED_FACES]


def tile_ids_of(face: Face) -> tuple[int, ...]:
    """The ids of every copy of a face (two for a numbered face, one for a doll)."""
    if face.is_doll:
        return (104 + DOLLS.index(face),)
    return (face.index, face.index + NUMBERED_FACES)


def copies_of(face: Face) -> int:
    """How many copies of this face the set holds."""
    return 1 if face.is_doll else COPIES_PER_FACE


def parse_face(text: str) -> Face:
    """Parse ``R7``, ``K13``, ``DR`` or ``DK`` (case-insensitive, surrounding blanks ignored)."""
    if not isinstance(text, str):
        raise TileNotationError(f"a tile must be written as text like 'R7', got {text!r}")
    key = text.strip().upper()
    face = _FACE_BY_TEXT.get(key)
    if face is None:
        raise TileNotationError(
            f"unknown tile {text!r}: write a colour R, B, Y or K and a number 1-13 "
            "(like 'R7' or 'K13'), or a doll 'DR' or 'DK'"
        )
    return face


def parse_faces(texts: Iterable[str]) -> list[Face]:
    """Parse many tiles; the first malformed one raises."""
    return [parse_face(t) for t in texts]


def check_available(faces: Sequence[Face], out_of_play: Iterable[Face] = ()) -> None:
    """Raise if the faces use more copies of a tile than the set holds.

    ``out_of_play`` are tiles known to be elsewhere (the turned kishpa), which reduce
    the copies a hand may hold.
    """
    used = Counter(faces)
    used.update(out_of_play)
    for face, count in used.items():
        if count > copies_of(face):
            raise TileNotationError(
                f"{face} appears {count} times but the set has only {copies_of(face)}"
                + (" (counting the turned kishpa)" if face in set(out_of_play) else "")
            )


def joker_of(kishpa: Face) -> Face:
    """The round's joker: the next number in the kishpa's colour, 13 wrapping to 1."""
    if kishpa.is_doll:
        raise TileNotationError("a doll cannot be the kishpa; it goes back into the pile")
    return Face(kishpa.colour, kishpa.number % 13 + 1)


def sort_key(face: Face) -> tuple[int, int]:
    """Display order: by colour, then number; dolls last."""
    return (4, face.index) if face.is_doll else (COLOURS.index(face.colour), face.number)
