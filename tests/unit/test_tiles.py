import pytest

from games.kishpa.errors import TileNotationError
from games.kishpa.tiles import (
    ALL_FACES,
    BLACK_DOLL,
    RED_DOLL,
    TILE_COUNT,
    Colour,
    Face,
    check_available,
    face_of,
    joker_of,
    parse_face,
    tile_ids_of,
)

pytestmark = pytest.mark.unit


def test_the_set_has_106_tiles_two_of_each_face_and_two_dolls() -> None:
    faces = [face_of(i) for i in range(TILE_COUNT)]
    assert len(faces) == 106
    for face in ALL_FACES:
        assert faces.count(face) == (1 if face.is_doll else 2)
        assert [face_of(i) for i in tile_ids_of(face)] == [face] * faces.count(face)


@pytest.mark.parametrize("text", ["R7", "k13", " B1 ", "DR", "dk", "Y10"])
def test_notation_round_trips(text: str) -> None:
    assert str(parse_face(text)) == text.strip().upper()


@pytest.mark.parametrize("text", ["", "R0", "R14", "G5", "D", "DB", "7R", "R-1", "R 7"])
def test_malformed_notation_is_refused_with_a_clear_message(text: str) -> None:
    with pytest.raises(TileNotationError, match="unknown tile"):
        parse_face(text)


def test_joker_is_next_number_in_kishpa_colour_wrapping_13_to_1() -> None:
    assert joker_of(parse_face("R5")) == Face(Colour.RED, 6)
    assert joker_of(parse_face("Y13")) == Face(Colour.YELLOW, 1)
    with pytest.raises(TileNotationError):
        joker_of(RED_DOLL)


def test_copies_are_counted_including_the_turned_kishpa() -> None:
    r5 = parse_face("R5")
    check_available([r5, r5])
    with pytest.raises(TileNotationError, match="counting the turned kishpa"):
        check_available([r5, r5], out_of_play=[r5])
    with pytest.raises(TileNotationError):
        check_available([BLACK_DOLL, BLACK_DOLL])
