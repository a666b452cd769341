"""The provably-fair shuffle both games use.

Algorithm (version 1), so that anyone can recompute a deck from the revealed seed:

1. The server draws an 80-byte *server seed* from the OS random source (at the service
   edge, never here) and publishes ``commitment = sha256(server_seed).hexdigest()`` when the
   round starts. The seed itself is revealed when the round ends.
2. Players may hand in optional *client seeds* (text, one per seat, ``None`` for none).
   Their canonical encoding is the UTF-8 JSON of the list with no blanks
   (``json.dumps(seeds, separators=(",", ":"), ensure_ascii=False)``), and
   ``client_digest = sha256(that encoding)``.
3. A byte stream is the concatenation of blocks
   ``HMAC-SHA256(key=server_seed, msg=tag || 0x00 || client_digest || counter)`` for
   ``counter = 0, 1, 2, ...`` as 8-byte big-endian integers, where ``tag`` is the ASCII
   domain tag (``kishpa/fair/v1/deck`` for the deck; other purposes use other tags so their
   numbers never overlap the deck's).
4. An integer below ``n`` is drawn by rejection sampling: take ``ceil(b / 8)`` bytes
   (big-endian) where ``b`` is the bit length of ``n - 1``, keep the low ``b`` bits, and
   retry while the value is ``>= n``. This is exactly uniform.
5. The deck is ``[0, 1, ..., n-1]`` shuffled by Fisher–Yates: for ``i`` from ``n - 1``
   down to ``1``, swap position ``i`` with position ``j = randbelow(i + 1)``.
   Position 0 of the result is the top of the deck.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Sequence

SERVER_SEED_BYTES = 80
DECK_TAG = "kishpa/fair/v1/deck"
_BLOCK = hashlib.sha256().digest_size


def _check_seed(server_seed: bytes) -> None:
    if not isinstance(server_seed, bytes | bytearray) or len(server_seed) != SERVER_SEED_BYTES:
        raise ValueError(f"a server seed must be exactly {SERVER_SEED_BYTES} bytes")


def client_seeds_digest(client_seeds: Sequence[str | None]) -> bytes:
    """sha256 of the canonical JSON encoding of the players' optional client seeds."""
    seeds = list(client_seeds)
    for seed in seeds:
        if seed is not None and not isinstance(seed, str):
            raise ValueError("client seeds must be text or None")
    encoded = json.dumps(seeds, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    return hashlib.sha256(encoded).digest()


def commitment(server_seed: bytes) -> str:
    """The public commitment to a server seed: its sha256 in lowercase hex."""
    _check_seed(server_seed)
    return hashlib.sha256(server_seed).hexdigest()


class FairStream:
    """Deterministic, unbiased random numbers from a server seed and the client seeds.

    Two streams built from the same seed, client seeds and tag yield the same numbers;
    different tags yield independent numbers.
    """

    __slots__ = ("_buffer", "_counter", "_key", "_prefix")

    def __init__(
        self,
        server_seed: bytes,
        client_seeds: Sequence[str | None] = (),
        tag: str = DECK_TAG,
    ) -> None:
        _check_seed(server_seed)
        self._key = bytes(server_seed)
        self._prefix = tag.encode("ascii") + b"\x00" + client_seeds_digest(client_seeds)
        self._counter = 0
        self._buffer = bytearray()

    def read(self, count: int) -> bytes:
        """The next ``count`` bytes of the stream."""
        while len(self._buffer) < count:
            message = self._prefix + self._counter.to_bytes(8, "big")
            self._buffer += hmac.new(self._key, message, hashlib.sha256).digest()
            self._counter += 1
        out = bytes(self._buffer[:count])
        del self._buffer[:count]
        return out

    def randbelow(self, n: int) -> int:
        """A uniformly distributed integer in ``[0, n)`` (rejection sampling, no modulo bias)."""
        if n <= 0:
            raise ValueError("randbelow needs n >= 1")
        if n == 1:
            return 0
        bits = (n - 1).bit_length()
        width = (bits + 7) // 8
        mask = (1 << bits) - 1
        while True:
            value = int.from_bytes(self.read(width), "big") & mask
            if value < n:
                return value


def shuffle_in_place(items: list[int], stream: FairStream) -> None:
    """Fisher–Yates shuffle of ``items`` driven by ``stream`` (step 5 of the algorithm)."""
    for i in range(len(items) - 1, 0, -1):
        j = stream.randbelow(i + 1)
        items[i], items[j] = items[j], items[i]


def shuffled_deck(
    server_seed: bytes, client_seeds: Sequence[str | None] = (), n: int = 106
) -> list[int]:
    """The deck for a round: ids ``0..n-1`` in shuffled order, index 0 on top."""
    if n < 1:
        raise ValueError("a deck needs at least one card")
    deck = list(range(n))
    shuffle_in_place(deck, FairStream(server_seed, client_seeds, DECK_TAG))
    return deck


def verify_deck(
    commitment_hex: str,
    server_seed: bytes,
    client_seeds: Sequence[str | None],
    deck: Sequence[int],
) -> bool:
    """True when the seed matches the published commitment and yields exactly this deck."""
    try:
        expected = commitment(server_seed)
    except ValueError:
        return False
    if not hmac.compare_digest(expected, commitment_hex.strip().lower()):
        return False
    return list(deck) == shuffled_deck(server_seed, client_seeds, len(deck))
