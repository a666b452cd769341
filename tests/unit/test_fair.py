"""The provably-fair shuffle: determinism, verification and a chi-square uniformity test."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from games.fair import (
    SERVER_SEED_BYTES,
    FairStream,
    commitment,
    shuffle_in_place,
    shuffled_deck,
    verify_deck,
)

pytestmark = pytest.mark.unit

N = 106
DECKS = 6000  # 106 x 106 position cells, ~57 expected per cell: a few seconds at most


def seed_for(index: int) -> bytes:
    """A fixed, distinct 80-byte seed per index (tests must be reproducible)."""
    return hashlib.sha512(f"fair-test-{index}".encode()).digest() + bytes(16)


def fair_shuffle(stream: FairStream) -> list[int]:
    deck = list(range(N))
    shuffle_in_place(deck, stream)
    return deck


def naive_shuffle(stream: FairStream) -> list[int]:
    """The classic mistake: swap with any position, not only positions <= i."""
    deck = list(range(N))
    for i in range(N - 1, 0, -1):
        j = stream.randbelow(N)
        deck[i], deck[j] = deck[j], deck[i]
    return deck


def modulo_shuffle(stream: FairStream) -> list[int]:
    """Fisher–Yates with modulo bias from a one-byte word."""
    deck = list(range(N))
    for i in range(N - 1, 0, -1):
        j = stream.read(1)[0] % (i + 1)
        deck[i], deck[j] = deck[j], deck[i]
    return deck


def position_chi_square_z(shuffle: Callable[[FairStream], list[int]]) -> float:
    """Chi-square of the (tile, position) table, as a Wilson–Hilferty z-score.

    Under a uniform shuffle every tile lands at every position with probability 1/N; the
    statistic has about (N-1)^2 degrees of freedom and z is approximately standard normal.
    """
    counts = [[0] * N for _ in range(N)]
    for index in range(DECKS):
        deck = shuffle(FairStream(seed_for(index), ["client"]))
        for position, tile in enumerate(deck):
            counts[tile][position] += 1
    expected = DECKS / N
    chi2 = sum((c - expected) ** 2 / expected for row in counts for c in row)
    k = (N - 1) ** 2
    return float(((chi2 / k) ** (1 / 3) - (1 - 2 / (9 * k))) / math.sqrt(2 / (9 * k)))


def test_fair_shuffle_places_every_tile_uniformly() -> None:
    assert position_chi_square_z(fair_shuffle) < 4.0


@pytest.mark.parametrize("biased", [naive_shuffle, modulo_shuffle])
def test_the_chi_square_test_catches_a_biased_shuffle(
    biased: Callable[[FairStream], list[int]],
) -> None:
    assert position_chi_square_z(biased) > 4.0


@settings(max_examples=60)
@given(
    seed=st.binary(min_size=SERVER_SEED_BYTES, max_size=SERVER_SEED_BYTES),
    clients=st.lists(st.one_of(st.none(), st.text(max_size=20)), max_size=4),
)
def test_a_deck_is_a_permutation_and_reproducible(seed: bytes, clients: list[str | None]) -> None:
    deck = shuffled_deck(seed, clients)
    assert sorted(deck) == list(range(106))
    assert deck == shuffled_deck(seed, clients)
    assert verify_deck(commitment(seed), seed, clients, deck)


def test_client_seeds_change_the_deck() -> None:
    seed = seed_for(1)
    assert shuffled_deck(seed, ["a"]) != shuffled_deck(seed, ["b"])
    assert shuffled_deck(seed, [None, "a"]) != shuffled_deck(seed, ["a", None])


def test_verify_rejects_a_tampered_deck_seed_or_commitment() -> None:
    seed = seed_for(2)
    clients: list[str | None] = ["x", None]
    deck = shuffled_deck(seed, clients)
    published = commitment(seed)
    swapped = [deck[1], deck[0], *deck[2:]]
    assert not verify_deck(published, seed, clients, swapped)
    assert not verify_deck(published, seed_for(3), clients, deck)
    assert not verify_deck(commitment(seed_for(3)), seed, clients, deck)
    assert not verify_deck(published, seed, ["y", None], deck)
    assert not verify_deck(published, seed[:-1], clients, deck)


def test_commitment_is_the_sha256_of_the_seed() -> None:
    seed = seed_for(4)
    assert commitment(seed) == hashlib.sha256(seed).hexdigest()


@pytest.mark.parametrize("bad", [b"", bytes(79), bytes(81)])
def test_server_seeds_must_be_80_bytes(bad: bytes) -> None:
    with pytest.raises(ValueError, match="80 bytes"):
        shuffled_deck(bad)


def test_streams_with_different_tags_are_independent_and_randbelow_is_in_range() -> None:
    seed = seed_for(5)
    a = FairStream(seed, [], "kishpa/fair/v1/deck")
    b = FairStream(seed, [], "kishpa/fair/v1/doll")
    assert a.read(32) != b.read(32)
    stream = FairStream(seed)
    values = [stream.randbelow(7) for _ in range(700)]
    assert set(values) == set(range(7))
    assert stream.randbelow(1) == 0
    with pytest.raises(ValueError, match="n >= 1"):
        stream.randbelow(0)
