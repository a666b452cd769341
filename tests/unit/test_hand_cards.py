"""Hand cards: the 106-card double pack, stable ids and the text notation."""

import pytest

from games.errors import NotationError, RulesError
from games.hand.cards import (
    CARD_COUNT,
    JOKER_IDS,
    Face,
    Suit,
    card_text,
    cards_text,
    face_of,
    ids_of,
    is_joker,
    parse_card,
    parse_cards,
)
from games.hand.errors import CardNotationError

pytestmark = pytest.mark.unit


def test_the_pack_is_two_52_card_packs_and_two_jokers() -> None:
    faces = [face_of(i) for i in range(CARD_COUNT)]
    real = [f for f in faces if not f.is_joker]
    assert len(faces) == 106
    assert len(real) == 104
    assert len(set(real)) == 52
    assert all(real.count(f) == 2 for f in set(real))
    assert [i for i in range(CARD_COUNT) if is_joker(i)] == list(JOKER_IDS)


@pytest.mark.parametrize(
    ("text", "face"),
    [
        ("AS", Face(1, Suit.SPADES)),
        ("10H", Face(10, Suit.HEARTS)),
        ("QD", Face(12, Suit.DIAMONDS)),
        ("7C", Face(7, Suit.CLUBS)),
        ("JS", Face(11, Suit.SPADES)),
        ("KC", Face(13, Suit.CLUBS)),
        (" qd ", Face(12, Suit.DIAMONDS)),
    ],
)
def test_notation_names_faces(text: str, face: Face) -> None:
    card = parse_card(text)
    assert face_of(card) == face
    assert card_text(card) == text.strip().upper()
    assert ids_of(face) == (card, card + 52)
    assert face_of(parse_card(text, copy=1)) == face


def test_jokers_are_j1_and_j2_and_jack_needs_a_suit() -> None:
    assert parse_card("J1") == 104
    assert parse_card("j2") == 105
    assert cards_text([104, 105]) == ["J1", "J2"]
    assert face_of(104).is_joker
    assert not face_of(parse_card("JH")).is_joker


@pytest.mark.parametrize("text", ["", "1S", "11H", "ZS", "10", "AX", "J3", "J0", "AS ", "S"])
def test_malformed_text_is_refused_with_a_clear_reason(text: str) -> None:
    if text == "AS ":  # blanks around a card are fine
        assert parse_card(text) == parse_card("AS")
        return
    with pytest.raises(CardNotationError) as caught:
        parse_card(text)
    assert caught.value.reason == "MALFORMED_CARD"
    assert "'AS'" in str(caught.value)
    assert isinstance(caught.value, NotationError)
    assert isinstance(caught.value, RulesError)


def test_non_text_and_bad_ids_are_refused() -> None:
    with pytest.raises(CardNotationError):
        parse_card(7)  # type: ignore[arg-type]
    for bad in (-1, 106, True):
        with pytest.raises(CardNotationError):
            face_of(bad)


def test_parse_cards_hands_out_both_copies_and_refuses_a_third() -> None:
    first, second = parse_cards(["7H", "7h"])
    assert first != second
    assert face_of(first) == face_of(second)
    with pytest.raises(CardNotationError, match="appears 3 times"):
        parse_cards(["7H", "7H", "7H"])
    with pytest.raises(CardNotationError, match="appears 2 times"):
        parse_cards(["J1", "J1"])
