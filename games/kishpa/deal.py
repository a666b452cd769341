"""Setting up a round (docs/rules/kishpa.md sections 2, 4, 6): shuffle, deal, turn the kishpa.

Pure: the deck comes from :mod:`games.fair` and every later random choice (where a doll
turned as kishpa goes back into the pile) from a :class:`~games.fair.FairStream` of the same
seed under its own tag, so anyone holding the revealed seed can replay the whole setup.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from games.fair import FairStream, shuffled_deck
from games.kishpa.errors import IllegalMoveError
from games.kishpa.ruleset import DEFAULT_RULES, RuleSet
from games.kishpa.tiles import TILE_COUNT, face_of, joker_of

KISHPA_TAG = "kishpa/fair/v1/kishpa"
"""Stream tag for the setup's random choices after the shuffle."""


@dataclass(frozen=True, slots=True)
class Turned:
    """One kishpa turned from the pile, and the dolls turned before it and put back."""

    tile: int
    dolls_returned: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Deal:
    """The table right after setup.

    ``pile`` has its top at the END (the next tile drawn is ``pile[-1]``). ``replacement`` is
    the new kishpa when nobody holds a joker: it is already turned from the pile here (no
    draw happens before it), but stays hidden until the start reveal window closes.
    """

    deck: tuple[int, ...]
    hands: tuple[tuple[int, ...], ...]
    pile: tuple[int, ...]
    kishpa: Turned
    replacement: Turned | None


def turn_kishpa(pile: list[int], stream: FairStream) -> Turned:
    """Turn the top tile of ``pile`` (top at the end) as kishpa.

    A doll goes back into the pile at a random place below the top, and another tile is
    turned; there are two dolls, so at most two are put back.
    """
    returned: list[int] = []
    while True:
        if not pile:
            raise IllegalMoveError("the pile is empty: no kishpa can be turned", "PILE_EMPTY")
        tile = pile.pop()
        if not face_of(tile).is_doll:
            return Turned(tile, tuple(returned))
        returned.append(tile)
        # Index len(pile) would be the top again; below the top means 0..len(pile)-1.
        pile.insert(stream.randbelow(len(pile)) if pile else 0, tile)


def deal_round(
    server_seed: bytes,
    client_seeds: Sequence[str | None],
    seats: int,
    starter: int,
    rules: RuleSet = DEFAULT_RULES,
) -> Deal:
    """Shuffle, deal (15 to the starter, 14 to the others, clockwise from the starter) and
    turn the kishpa, with its replacement when nobody holds a joker."""
    if not rules.min_seats <= seats <= rules.max_seats:
        raise ValueError(f"a round seats {rules.min_seats} to {rules.max_seats} players")
    if not 0 <= starter < seats:
        raise ValueError("the starter must be one of the seats")
    deck = shuffled_deck(server_seed, client_seeds, TILE_COUNT)
    hands: list[tuple[int, ...]] = [()] * seats
    cursor = 0
    for k in range(seats):
        seat = (starter + k) % seats
        size = rules.hand_size + (1 if seat == starter else 0)
        hands[seat] = tuple(deck[cursor : cursor + size])
        cursor += size
    pile = list(reversed(deck[cursor:]))
    stream = FairStream(server_seed, client_seeds, KISHPA_TAG)
    kishpa = turn_kishpa(pile, stream)
    joker = joker_of(face_of(kishpa.tile))
    anyone_holds_joker = any(face_of(t) == joker for hand in hands for t in hand)
    replacement = None
    if not anyone_holds_joker and rules.max_kishpa_replacements > 0:
        replacement = turn_kishpa(pile, stream)
    return Deal(tuple(deck), tuple(hands), tuple(pile), kishpa, replacement)
