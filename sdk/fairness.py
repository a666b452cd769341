"""Check that a Kishpa round was dealt from the seed the server committed to.

This module is a second, independent implementation of the algorithm in ``docs/fairness.md``
(standard library only; it shares no code with the server's ``games/fair.py``), so a client
trusts its own arithmetic, not the server's. Given what one player saw of an ended round::

    evidence = RoundEvidence(
        commitment=...,            # published when the round started
        server_seed_hex=...,       # revealed when it ended
        client_seeds=[...],        # every seat's client seed, in seat order (None: none)
        seats=4, starter=0, my_seat=2,
        dealt=[...],               # the tile ids he was dealt
        pile_draws=[PileDraw(tile_id=17, pile_left=51), ...],
        kishpa="R5", replaced_kishpa=None, my_client_seed="abc",
    )
    result = verify_round(evidence)
    if not result.ok:
        for failure in result.failures:
            print(failure.check, failure.message)

it recomputes the deck, the deal, the turned kishpa (and its replacement) and the pile, and
reports every check that failed with what was expected and what was seen. A player can
only check his own tiles: the others' hands are never sent to him.

:class:`RoundWitness` builds the evidence from the table events a player receives
(``round_started``, ``dealt``, ``drew``, ``kishpa_replaced``, ``round_ended``).

Hand (Rummy 51) deals are checked the same way (``RoundEvidence(game="hand", ...)``: the
player's dealt cards, the card turned to start the discard pile, his draws from the stock),
from ``deal_started``, ``dealt``, ``drew``, ``card_drawn`` and ``seed_revealed``.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

SERVER_SEED_BYTES = 80
DECK_TAG = b"kishpa/fair/v1/deck"
KISHPA_TAG = b"kishpa/fair/v1/kishpa"
TILE_COUNT = 106
HAND_SIZE = 14
COLOURS = "RBYK"
RED_DOLL, BLACK_DOLL = 104, 105

# What a failed check is called (``Failure.check``).
SEED_NOT_REVEALED = "SEED_NOT_REVEALED"
SEED_MALFORMED = "SEED_MALFORMED"
COMMITMENT_MISMATCH = "COMMITMENT_MISMATCH"
CLIENT_SEED_MISMATCH = "CLIENT_SEED_MISMATCH"
DEALT_TILES_MISMATCH = "DEALT_TILES_MISMATCH"
DRAW_MISMATCH = "DRAW_MISMATCH"
KISHPA_MISMATCH = "KISHPA_MISMATCH"
REPLACEMENT_MISMATCH = "REPLACEMENT_MISMATCH"
RECORD_INCOMPLETE = "RECORD_INCOMPLETE"
DOLLS_MISMATCH = "DOLLS_MISMATCH"
COMMITMENT_LATE = "COMMITMENT_LATE"
CONTRIBUTION_MISMATCH = "CONTRIBUTION_MISMATCH"
MOVE_MISMATCH = "MOVE_MISMATCH"
SEATS_MISMATCH = "SEATS_MISMATCH"
RECORD_VERSION_SEATS = 3
"""The record version from which a deal names its seats (bots, declared, awaited)."""
KISHPA_GAME, HAND_GAME = "kishpa", "hand"
"""The games this module verifies (``games.registry`` names them; a unit test keeps the two
lists equal). Each has its checks in :data:`GAME_CHECKS`."""
DEADLINE_SLACK_MS = 1_000
"""How much earlier than its contribution deadline a deal with a silent awaited seat may be
stamped: the deadline is on the table service's clock, stream ids on Redis's."""


# --- the algorithm (docs/fairness.md) ---------------------------------------------------


def face(tile_id: int) -> str:
    """The face of a tile id in the text notation: ``R7``, ``K13``, ``DR``, ``DK``."""
    if tile_id == RED_DOLL:
        return "DR"
    if tile_id == BLACK_DOLL:
        return "DK"
    if not 0 <= tile_id < RED_DOLL:
        raise ValueError(f"no tile has id {tile_id}")
    return f"{COLOURS[(tile_id % 52) // 13]}{tile_id % 13 + 1}"


def joker_face(kishpa_face: str) -> str:
    """The joker of a kishpa: the next number in its colour, 13 wrapping to 1."""
    number = int(kishpa_face[1:])
    return f"{kishpa_face[0]}{number % 13 + 1}"


class _Stream:
    """HMAC-SHA256(server seed, tag || 0x00 || sha256(client seeds JSON) || counter) blocks."""

    def __init__(self, seed: bytes, client_seeds: Sequence[str | None], tag: bytes) -> None:
        encoded = json.dumps(list(client_seeds), separators=(",", ":"), ensure_ascii=False)
        self._key = seed
        self._prefix = tag + b"\x00" + hashlib.sha256(encoded.encode("utf-8")).digest()
        self._counter = 0
        self._bytes = b""

    def _take(self, count: int) -> bytes:
        while len(self._bytes) < count:
            block = self._prefix + self._counter.to_bytes(8, "big")
            self._bytes += hmac.new(self._key, block, hashlib.sha256).digest()
            self._counter += 1
        out, self._bytes = self._bytes[:count], self._bytes[count:]
        return out

    def below(self, n: int) -> int:
        if n == 1:
            return 0
        bits = (n - 1).bit_length()
        while True:
            value = int.from_bytes(self._take((bits + 7) // 8), "big") & ((1 << bits) - 1)
            if value < n:
                return value


def deck(server_seed: bytes, client_seeds: Sequence[str | None], n: int = TILE_COUNT) -> list[int]:
    """The shuffled deck, top first: Fisher-Yates over ``0..n-1`` driven by the deck stream."""
    cards = list(range(n))
    stream = _Stream(server_seed, client_seeds, DECK_TAG)
    for i in range(n - 1, 0, -1):
        j = stream.below(i + 1)
        cards[i], cards[j] = cards[j], cards[i]
    return cards


@dataclass(frozen=True, slots=True)
class Dealt:
    """A recomputed Kishpa deal: every hand, the kishpa (and replacement), the pile."""

    deck: tuple[int, ...]
    hands: tuple[tuple[int, ...], ...]
    kishpa: int
    dolls_returned: tuple[int, ...]
    replacement: int | None
    pile: tuple[int, ...]
    """What is left to draw, top at the END: a draw that leaves ``k`` tiles took ``pile[k]``."""


def _turn(pile: list[int], stream: _Stream) -> tuple[int, list[int]]:
    returned: list[int] = []
    while True:
        tile = pile.pop()
        if tile not in (RED_DOLL, BLACK_DOLL):
            return tile, returned
        returned.append(tile)
        pile.insert(stream.below(len(pile)) if pile else 0, tile)


def deal(
    server_seed: bytes,
    client_seeds: Sequence[str | None],
    seats: int,
    starter: int,
    *,
    hand_size: int = HAND_SIZE,
    replacements: int = 1,
) -> Dealt:
    """Recompute a Kishpa deal (docs/fairness.md, "From the deck to the deal")."""
    cards = deck(server_seed, client_seeds)
    hands: list[tuple[int, ...]] = [()] * seats
    cursor = 0
    for k in range(seats):
        seat = (starter + k) % seats
        size = hand_size + (1 if seat == starter else 0)
        hands[seat] = tuple(cards[cursor : cursor + size])
        cursor += size
    pile = list(reversed(cards[cursor:]))
    stream = _Stream(server_seed, client_seeds, KISHPA_TAG)
    kishpa, returned = _turn(pile, stream)
    joker = joker_face(face(kishpa))
    replacement = None
    if replacements > 0 and not any(face(t) == joker for hand in hands for t in hand):
        replacement, more = _turn(pile, stream)
        returned += more
    return Dealt(tuple(cards), tuple(hands), kishpa, tuple(returned), replacement, tuple(pile))


# --- verification -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PileDraw:
    """A tile the player drew from the pile, and how many tiles the pile had left after."""

    tile_id: int
    pile_left: int


@dataclass(frozen=True, slots=True)
class TableDraw:
    """A draw from the pile (stock) by any seat: who, which tile, tiles left after."""

    seat: int
    tile_id: int
    pile_left: int


@dataclass(frozen=True, slots=True)
class Contribution:
    """A contribution accepted for the deal: the seat, its text, its stream event id."""

    seat: int
    contribution: str
    event_id: str = ""


@dataclass(frozen=True, slots=True)
class SeatMove:
    """A public move that took tiles into a seat's hand or out of it, or showed them
    (``RoundRecord.moves``): ``kind`` is draw, take, discard, meld, release, show or undo."""

    seat: int
    kind: str
    tile_ids: tuple[int, ...]
    event_id: str = ""


@dataclass(slots=True)
class RoundEvidence:
    """What one player knows of an ended round (public facts plus his own tiles)."""

    commitment: str
    server_seed_hex: str
    client_seeds: list[str | None]
    seats: int
    starter: int
    my_seat: int
    dealt: list[int]
    pile_draws: list[PileDraw] = field(default_factory=list)
    kishpa: str | None = None
    """The face turned as kishpa at the start (before any replacement), if known."""
    replaced_kishpa: str | None = None
    """The replacement kishpa's face, when the first one was replaced."""
    my_client_seed: str | None = None
    """The client seed this player handed in, if he remembers it (None: not checked)."""
    hand_size: int = HAND_SIZE
    replacements: int = 1
    round_no: int = 0
    table_id: str = ""
    game: str = KISHPA_GAME
    """``kishpa`` or ``hand`` (a Hand deal: ``dealt`` holds card ids, draws are from the stock)."""
    top_discard: int | None = None
    """Hand: the card id turned to start the discard pile, if known."""
    # ---- the whole table (a record served after the reveal; None: not known) ----------
    hands: dict[int, list[int]] | None = None
    """Every seat's dealt tiles (cards), bots included: set to check the whole table."""
    draws: list[TableDraw] = field(default_factory=list)
    """Every draw from the pile (stock) by any seat, in order."""
    kishpa_id: int | None = None
    replacement_id: int | None = None
    dolls_returned: list[int] | None = None
    """Kishpa: dolls turned as kishpa and put back, in the order turned (start, then the
    replacement's)."""
    precommitment: str | None = None
    """The commitment published in advance (``seed_committed``); "" when none was."""
    precommitment_event_id: str = ""
    contributions: list[Contribution] = field(default_factory=list)
    deal_event_id: str = ""
    seat_client_seeds: list[str] | None = None
    """Each seat's sit-down client seed ("" none): its default when it did not contribute."""
    order_failures: list[str] = field(default_factory=list)
    """What a live witness saw out of order (commitment after a contribution...)."""
    moves: list[SeatMove] | None = None
    """Every public move by any seat, in stream order (None: not known, not checked)."""
    cards_left: dict[int, list[int]] | None = None
    """Hand: each seat's cards when the deal ended, as shown (None: not checked)."""
    # ---- the deal's seats (record version 3) ------------------------------------------
    record_version: int = 0
    """3 when the record names the deal's seats below; lower: they are not checked."""
    bot_seats: list[int] = field(default_factory=list)
    declared_seats: list[int] = field(default_factory=list)
    awaited_seats: list[int] = field(default_factory=list)
    autoplay_seats: list[int] = field(default_factory=list)
    awaited_until_ms: int = 0
    """The contribution deadline the deal waited until (0: it did not wait)."""
    my_contribution: str | None = None
    """The contribution this player's client made to this deal, if it knows (None: none
    known); a verifier names it when it is in the deal and fails when it is not."""
    i_declared: bool | None = None
    """Whether this player's client declared it contributes when it sat down (None: not
    known); a record that says otherwise of his seat fails."""
    seat_problems: list[str] = field(default_factory=list)
    """Where the record's seat marks differ from what the deal showed live."""


@dataclass(frozen=True, slots=True)
class Failure:
    """One check that failed: its name (``COMMITMENT_MISMATCH``...) and what went wrong."""

    check: str
    message: str


@dataclass(frozen=True, slots=True)
class Verification:
    """The outcome: ``ok`` when every check passed, else each failure."""

    failures: tuple[Failure, ...]
    checked: tuple[str, ...]
    whole_table: bool = False
    """Every seat and every public fact was checked (not only the caller's own tiles)."""
    contributed: bool = False
    """At least one seat contributed after the commitment (the server could not choose)."""
    my_contribution: str = ""
    """The caller's seat's contribution, when it is in the deal ("" none)."""
    bots_only: bool = False
    """Every other seat is a house bot (record version 3)."""
    notes: tuple[str, ...] = ()
    """What the verdict says beyond the checks: whose contributions are in the deal, seats
    that were not waited for and why."""

    @property
    def ok(self) -> bool:
        return not self.failures

    def summary(self) -> str:
        """One line for people: ``table verified (...)`` / ``deal verified (...)`` (own
        tiles only) or what failed."""
        scope = "table" if self.whole_table else "deal"
        if self.ok:
            notes = list(self.notes)
            if self.whole_table and not self.contributed:
                alone = "bots only, " if self.bots_only else ""
                notes.append(f"{alone}no contribution: the server alone chose this deal")
            note = "".join(f"; {n}" for n in notes)
            return f"{scope} verified (" + ", ".join(self.checked) + note + ")"
        return f"{scope} NOT verified: " + "; ".join(
            f"{f.check}: {f.message}" for f in self.failures
        )


def _client_seeds(seeds: Sequence[str | None]) -> list[str | None]:
    # On the wire a seat without a client seed is "" (proto3 strings); the algorithm's
    # canonical list has null there. Table services refuse an empty client seed.
    return [s if s else None for s in seeds]


def verify_round(evidence: RoundEvidence) -> Verification:
    """Every check of docs/fairness.md "Verifying a round", as far as this player can."""
    failures: list[Failure] = []
    checked: list[str] = []
    e = evidence
    seed_text = (e.server_seed_hex or "").strip().lower()
    if not seed_text:
        return Verification((Failure(SEED_NOT_REVEALED, "the server seed was not revealed"),), ())
    try:
        seed = bytes.fromhex(seed_text)
    except ValueError:
        seed = b""
    if len(seed) != SERVER_SEED_BYTES:
        return Verification(
            (
                Failure(
                    SEED_MALFORMED,
                    f"the revealed seed is not {SERVER_SEED_BYTES} bytes of hex: {seed_text!r}",
                ),
            ),
            (),
        )
    digest = hashlib.sha256(seed).hexdigest()
    if not hmac.compare_digest(digest, (e.commitment or "").strip().lower()):
        failures.append(
            Failure(
                COMMITMENT_MISMATCH,
                f"sha256 of the revealed seed is {digest}, but the round started with "
                f"commitment {e.commitment or '(none)'}",
            )
        )
    else:
        checked.append("commitment")
    if not (2 <= e.seats <= 4 and 0 <= e.starter < e.seats and 0 <= e.my_seat < e.seats):
        failures.append(
            Failure(
                RECORD_INCOMPLETE,
                f"seats {e.seats}, starter {e.starter}, my seat {e.my_seat} do not make a round",
            )
        )
        return Verification(tuple(failures), tuple(checked))
    seeds = _client_seeds(e.client_seeds)
    if len(seeds) != e.seats:
        failures.append(
            Failure(
                RECORD_INCOMPLETE,
                f"{len(seeds)} client seeds for {e.seats} seats",
            )
        )
        return Verification(tuple(failures), tuple(checked))
    if e.my_client_seed is not None and seeds[e.my_seat] != (e.my_client_seed or None):
        failures.append(
            Failure(
                CLIENT_SEED_MISMATCH,
                f"you handed in client seed {e.my_client_seed!r}, but the round mixed "
                f"{seeds[e.my_seat]!r} for your seat",
            )
        )
    elif e.my_client_seed is not None:
        checked.append("your client seed")
    checks_of(e.game).own_seat(e, seed, seeds, failures, checked)
    return _with_table(e, seed, seeds, failures, checked)


# --- the whole table --------------------------------------------------------------------


def _with_table(
    e: RoundEvidence,
    seed: bytes,
    seeds: list[str | None],
    failures: list[Failure],
    checked: list[str],
) -> Verification:
    """The own-seat checks' verdict, with the whole-table checks when the evidence has every
    seat's hand (a record served after the reveal)."""
    if e.hands is None:
        return Verification(tuple(failures), tuple(checked))
    _check_order(e, failures, checked)
    _check_contributions(e, seeds, failures, checked)
    notes: list[str] = []
    mine = _check_my_contribution(e, seeds, failures, checked, notes)
    _check_seats(e, failures, checked, notes)
    checks_of(e.game).whole_table(e, seed, seeds, failures, checked)
    return Verification(
        tuple(failures),
        tuple(checked),
        whole_table=True,
        contributed=bool(e.contributions),
        my_contribution=mine,
        bots_only=_bots_only(e),
        notes=tuple(notes),
    )


def _check_kishpa_deal(
    e: RoundEvidence,
    seed: bytes,
    seeds: list[str | None],
    failures: list[Failure],
    checked: list[str],
) -> None:
    """A Kishpa seat's own deal: its tiles, the kishpa, its replacement, its pile draws."""
    dealt = deal(
        seed, seeds, e.seats, e.starter, hand_size=e.hand_size, replacements=e.replacements
    )
    _check_own_dealt(
        e, dealt.hands[e.my_seat], _faces, DEALT_TILES_MISMATCH, "tiles", failures, checked
    )
    if e.kishpa is not None:
        if face(dealt.kishpa) != e.kishpa:
            failures.append(
                Failure(
                    KISHPA_MISMATCH,
                    f"the seeds turn {face(dealt.kishpa)} as kishpa; the table showed {e.kishpa}",
                )
            )
        else:
            checked.append("kishpa")
    shown = e.replaced_kishpa or None
    computed = None if dealt.replacement is None else face(dealt.replacement)
    if e.kishpa is not None and shown != computed:
        failures.append(
            Failure(
                REPLACEMENT_MISMATCH,
                f"the seeds replace the kishpa with {computed or 'nothing'}; "
                f"the table replaced it with {shown or 'nothing'}",
            )
        )
    elif shown is not None:
        checked.append("replacement kishpa")
    pile = dealt.pile
    _check_own_draws(
        e,
        lambda left: pile[left] if 0 <= left < len(pile) else None,
        face,
        _face_or_id,
        ("pile", "tiles"),
        failures,
        checked,
    )


def _check_own_dealt(
    e: RoundEvidence,
    expected: Sequence[int],
    show: Callable[[Sequence[int]], str],
    reason: str,
    noun: str,
    failures: list[Failure],
    checked: list[str],
) -> None:
    """The seat's own dealt tiles (cards) against the ones the seeds deal it."""
    if sorted(expected) == sorted(e.dealt):
        checked.append(f"your {len(expected)} dealt {noun}")
        return
    missing = sorted(set(expected) - set(e.dealt))
    extra = sorted(set(e.dealt) - set(expected))
    failures.append(
        Failure(
            reason,
            f"the seeds deal your seat {show(expected)}; you were dealt {show(e.dealt)}"
            f" (missing {show(missing)}, not yours {show(extra)})",
        )
    )


def _check_own_draws(
    e: RoundEvidence,
    at: Callable[[int], int | None],
    text: Callable[[int], str],
    text_or_id: Callable[[int], str],
    words: tuple[str, str],
    failures: list[Failure],
    checked: list[str],
) -> None:
    """The seat's own draws: each the tile (card) the seeds put where the pile (stock) stood.

    ``at(left)`` is the one the seeds put there with ``left`` remaining after it, or None
    when the pile never held that many; ``words`` names the pile and its pieces."""
    pile, pieces = words
    draws_ok = True
    for n, draw in enumerate(e.pile_draws, start=1):
        want = at(draw.pile_left)
        if want is None:
            draws_ok = False
            failures.append(
                Failure(
                    DRAW_MISMATCH,
                    f"draw {n}: the {pile} never had {draw.pile_left + 1} {pieces} after the deal",
                )
            )
        elif want != draw.tile_id:
            draws_ok = False
            failures.append(
                Failure(
                    DRAW_MISMATCH,
                    f"draw {n} from the {pile} (leaving {draw.pile_left}): the seeds put "
                    f"{text(want)} (id {want}) there; you drew {text_or_id(draw.tile_id)}"
                    f" (id {draw.tile_id})",
                )
            )
    if e.pile_draws and draws_ok:
        checked.append(f"your {len(e.pile_draws)} {pile} draws")


def _check_hand_table(
    e: RoundEvidence,
    seed: bytes,
    seeds: list[str | None],
    failures: list[Failure],
    checked: list[str],
) -> None:
    """Every seat's dealt cards, the stock draws, the cards left and the moves of a deal."""
    dealt_h = hand_deal(seed, seeds, e.seats, e.starter, hand_size=e.hand_size)
    _check_hands(e, dealt_h.hands, card_text, DEALT_CARDS_MISMATCH, failures, checked)
    _check_draws(e, len(dealt_h.stock), dealt_h.stock_card, card_text, failures, checked)
    if e.record_version >= RECORD_VERSION_SEATS and e.cards_left is None:
        # Every Hand deal ends with deal_ended (the cards left, the penalties' basis).
        failures.append(
            Failure(RECORD_INCOMPLETE, "the record does not show the cards left at the end")
        )
    _check_moves(e, dealt_h.hands, [dealt_h.top_discard], card_text, failures, checked)


def _check_kishpa_table(
    e: RoundEvidence,
    seed: bytes,
    seeds: list[str | None],
    failures: list[Failure],
    checked: list[str],
) -> None:
    """Every seat's dealt tiles, the kishpas, the pile draws and the moves of a round."""
    dealt_k = deal(
        seed, seeds, e.seats, e.starter, hand_size=e.hand_size, replacements=e.replacements
    )
    _check_hands(e, dealt_k.hands, face, DEALT_TILES_MISMATCH, failures, checked)
    _check_kishpa_ids(e, dealt_k, failures, checked)
    pile = dealt_k.pile
    _check_draws(
        e,
        len(pile),
        lambda left: pile[left] if 0 <= left < len(pile) else None,
        face,
        failures,
        checked,
    )
    _check_moves(e, dealt_k.hands, [], face, failures, checked)


def _short(text: str) -> str:
    return repr(text if len(text) <= 12 else text[:12] + "…")


def _seats_text(seats: Sequence[int]) -> str:
    return ", ".join(str(s + 1) for s in seats)


def _bots_only(e: RoundEvidence) -> bool:
    """Every seat but the caller's is a house bot (only a version 3 record says)."""
    if e.record_version < RECORD_VERSION_SEATS:
        return False
    return set(e.bot_seats) == set(range(e.seats)) - {e.my_seat}


def _check_my_contribution(
    e: RoundEvidence,
    seeds: list[str | None],
    failures: list[Failure],
    checked: list[str],
    notes: list[str],
) -> str:
    """The caller's own contribution is his seat's entry: named when it is in the deal,
    failed (``CONTRIBUTION_MISMATCH``) when his client made one the deal left out."""
    given = {c.seat: c.contribution for c in e.contributions}
    in_deal = given.get(e.my_seat, "")
    if e.my_contribution is not None:
        if in_deal != e.my_contribution or seeds[e.my_seat] != e.my_contribution:
            failures.append(
                Failure(
                    CONTRIBUTION_MISMATCH,
                    f"your contribution {_short(e.my_contribution)} was accepted, but the deal "
                    f"mixed {seeds[e.my_seat]!r} for your seat",
                )
            )
            return ""
        checked.append(f"your contribution {_short(in_deal)}")
    if not in_deal:
        return ""
    others = len(e.contributions) - 1
    also = f" with {_count(others, 'other contribution')}" if others else ""
    notes.append(f"your contribution is in this deal{also}")
    return in_deal


def _check_seats(
    e: RoundEvidence, failures: list[Failure], checked: list[str], notes: list[str]
) -> None:
    """What a version 3 record says of the deal's seats holds together (docs/fairness.md,
    "The deal's seats"): bots never contribute and are never declared or awaited; every
    awaited seat declared (or is a creator alone with bots on the first deal); every
    declared seat not on auto-play was awaited; the caller's own seat is as he knows it."""
    before = len(failures)

    def fail(message: str) -> None:
        failures.append(Failure(SEATS_MISMATCH, message))

    for problem in e.seat_problems:
        fail(problem)
    if e.record_version < RECORD_VERSION_SEATS:
        return

    lists = {
        "bot": e.bot_seats,
        "declared": e.declared_seats,
        "awaited": e.awaited_seats,
        "auto-play": e.autoplay_seats,
    }
    for name, seats in lists.items():
        if len(set(seats)) != len(seats) or any(not 0 <= s < e.seats for s in seats):
            fail(f"the {name} seats {list(seats)} are not seats of this {e.seats}-seat deal")
    bots = set(e.bot_seats)
    for name in ("declared", "awaited", "auto-play"):
        for seat in sorted(bots & set(lists[name])):
            fail(f"seat {seat + 1} is marked both a house bot and {name}")
    for c in e.contributions:
        if c.seat in bots:
            fail(f"seat {c.seat + 1} is marked a house bot but contributed: bots never do")
    if e.my_seat in bots:
        fail(f"the record marks your seat ({e.my_seat + 1}) a house bot")
    humans = [s for s in range(e.seats) if s not in bots]
    lone = len(humans) == 1 and e.round_no <= 1
    declared, autoplay = set(e.declared_seats), set(e.autoplay_seats)
    for seat in e.awaited_seats:
        if seat in autoplay:
            fail(f"seat {seat + 1} was awaited while on auto-play")
        elif seat not in declared and not lone:
            fail(f"seat {seat + 1} was awaited but never declared it contributes")
    for seat in sorted(declared - set(e.awaited_seats)):
        if seat in autoplay:
            notes.append(f"declared seat {seat + 1} was not waited for: it was on auto-play")
        else:
            fail(f"declared seat {seat + 1} was not waited for")
    if e.i_declared and e.my_seat not in declared:
        fail("you declared that your client contributes; the record says your seat did not")
    if len(failures) != before:
        return
    given = {c.seat for c in e.contributions}
    silent = [s for s in e.awaited_seats if s not in given]
    dealt_ms = _event_order(e.deal_event_id)[0]
    if silent and not e.awaited_until_ms:
        which = "declared seat" if set(silent) <= declared else "seat"
        fail(
            f"{which} {_seats_text(silent)} was not waited for: dealt without its "
            "contribution and without a contribution deadline"
        )
    elif silent and 0 <= dealt_ms < e.awaited_until_ms - DEADLINE_SLACK_MS:
        fail(
            f"dealt at {dealt_ms} ms, before its contribution deadline "
            f"({e.awaited_until_ms} ms), without seat {_seats_text(silent)}'s contribution"
        )
    elif silent:
        notes.append(
            f"awaited seat {_seats_text(silent)} sent nothing: dealt at the deadline with "
            "its default"
        )
    if len(failures) != before:
        return
    marks = [f"{_count(len(bots), 'house bot')}"]
    if bots:
        marks[0] += f" (seat {_seats_text(sorted(bots))})"
    marks.append(f"{len(e.awaited_seats)} awaited")
    checked.append("the seats' marks: " + ", ".join(marks))


def _check_moves(
    e: RoundEvidence,
    dealt: Sequence[Sequence[int]],
    discards: list[int],
    text: Any,
    failures: list[Failure],
    checked: list[str],
) -> None:
    """Every public move against what its seat held: each tile (card) a seat discarded,
    melded or showed is one it was dealt, drew or took and still held; each tile taken from
    the discards was the top one; the moves' draws are the record's draws (docs/fairness.md,
    "Every public move")."""
    if e.moves is None:
        return
    if not e.moves:
        # Every deal has at least one (the starter's first discard or win).
        failures.append(Failure(RECORD_INCOMPLETE, "the record lists no moves"))
        return
    before = len(failures)
    held = [set(hand) for hand in dealt]
    pile = list(discards)
    melded: set[int] = set()  # Hand: the cards on the table, where a released joker comes from
    undo: dict[int, tuple[set[int], list[int], set[int]]] = {}
    draws = iter(e.draws)

    def fail(move: SeatMove, n: int, what: str) -> None:
        failures.append(
            Failure(MOVE_MISMATCH, f"move {n} (seat {move.seat + 1}, {move.kind}): {what}")
        )

    for n, move in enumerate(e.moves, start=1):
        if not 0 <= move.seat < len(held):
            fail(move, n, "no such seat")
            continue
        hand, tiles = held[move.seat], list(move.tile_ids)
        if move.kind == "draw":
            want = next(draws, None)
            if want is None or (want.seat, want.tile_id) != (move.seat, tiles[0] if tiles else -1):
                fail(move, n, f"drew {_texts(tiles, text)}, not the record's next draw")
            hand.update(tiles)
        elif move.kind == "take":
            undo[move.seat] = (set(hand), list(pile), set(melded))
            top = pile[-1] if pile else None
            if len(tiles) != 1 or top != tiles[0]:
                shown = "nothing" if top is None else _texts([top], text)
                fail(move, n, f"took {_texts(tiles, text)} but the top discard was {shown}")
            else:
                pile.pop()
            hand.update(tiles)
        elif move.kind in ("discard", "meld", "show"):
            foreign = [t for t in tiles if t not in hand]
            if foreign:
                fail(
                    move,
                    n,
                    f"{_texts(foreign, text)} (id {', '.join(map(str, foreign))}) is a tile the "
                    "seat was neither dealt nor drew, or no longer held",
                )
            if move.kind != "show":
                hand.difference_update(tiles)
            if move.kind == "meld":
                melded.update(tiles)
            if move.kind == "discard":
                pile.extend(tiles)
                undo.pop(move.seat, None)  # a discard ends the turn: nothing to take back
        elif move.kind == "release":
            loose = [t for t in tiles if t not in melded]
            if loose:
                fail(move, n, f"released {_texts(loose, text)}, which no meld on the table held")
            melded.difference_update(tiles)
            hand.update(tiles)
        elif move.kind == "undo":
            if move.seat not in undo:
                fail(move, n, "a turn taken back that did not begin from the discards")
            else:
                restored, pile, melded = undo.pop(move.seat)
                held[move.seat] = set(restored)
        else:
            fail(move, n, f"unknown move kind {move.kind!r}")
    if next(draws, None) is not None:
        failures.append(Failure(MOVE_MISMATCH, "the record has draws its moves do not show"))
    for seat, left_over in sorted((e.cards_left or {}).items()):
        kept = held[seat] if 0 <= seat < len(held) else set()
        if sorted(left_over) != sorted(kept):
            failures.append(
                Failure(
                    MOVE_MISMATCH,
                    f"seat {seat + 1} was shown with {_texts(sorted(left_over), text)} left at the "
                    f"end; its moves leave it {_texts(sorted(kept), text)}",
                )
            )
    if len(failures) == before:
        checked.append(f"all {len(e.moves)} moves")


def _event_order(event_id: str) -> tuple[int, int]:
    """A stream id ``ms-seq`` as a sortable pair ((-1, -1) when missing or malformed)."""
    ms, _, seq = event_id.partition("-")
    if not (ms.isdigit() and seq.isdigit()):
        return (-1, -1)
    return (int(ms), int(seq))


def _check_order(e: RoundEvidence, failures: list[Failure], checked: list[str]) -> None:
    """The deal's commitment was published before every contribution, which came before
    the deal; and the deal used the very commitment published in advance."""
    before = len(failures)
    for problem in e.order_failures:
        failures.append(Failure(COMMITMENT_LATE, problem))
    pre = (e.precommitment or "").strip().lower()
    if not pre:
        failures.append(
            Failure(COMMITMENT_LATE, "no commitment to this deal was published before it")
        )
    elif pre != e.commitment.strip().lower():
        failures.append(
            Failure(
                COMMITMENT_LATE,
                f"the deal used commitment {e.commitment[:16]}…, not {pre[:16]}… published in"
                " advance: the server changed its seed after committing",
            )
        )
    committed_at = _event_order(e.precommitment_event_id)
    dealt_at = _event_order(e.deal_event_id)
    ids = [e.precommitment_event_id, e.deal_event_id, *(c.event_id for c in e.contributions)]
    for event_id in ids:
        if event_id and _event_order(event_id) == (-1, -1):
            failures.append(
                Failure(COMMITMENT_LATE, f"{event_id!r} is not a stream id (<ms>-<seq>)")
            )
    if pre and e.precommitment_event_id and e.deal_event_id and not committed_at < dealt_at:
        failures.append(Failure(COMMITMENT_LATE, "the commitment came after the deal"))
    for c in e.contributions:
        at = _event_order(c.event_id)
        if e.precommitment_event_id and not committed_at < at:
            failures.append(
                Failure(
                    COMMITMENT_LATE,
                    f"seat {c.seat + 1}'s contribution (event {c.event_id}) was accepted "
                    f"before the commitment (event {e.precommitment_event_id})",
                )
            )
        if e.deal_event_id and not at < dealt_at:
            failures.append(
                Failure(
                    CONTRIBUTION_MISMATCH,
                    f"seat {c.seat + 1}'s contribution (event {c.event_id}) was accepted after"
                    f" the deal (event {e.deal_event_id})",
                )
            )
    if len(failures) == before:
        checked.append(
            "commitment before "
            + (_count(len(e.contributions), "contribution") if e.contributions else "the deal")
        )


def _count(n: int, thing: str) -> str:
    return f"{n} {thing}" if n == 1 else f"{n} {thing}s"


def _check_contributions(
    e: RoundEvidence, seeds: list[str | None], failures: list[Failure], checked: list[str]
) -> None:
    """Each seat's client seed is its accepted contribution, else its sit-down default."""
    given = {c.seat: c.contribution for c in e.contributions}
    defaults = e.seat_client_seeds
    before = len(failures)
    for seat in range(e.seats):
        if seat in given:
            want: str | None = given[seat] or None
            why = "its contribution"
        elif defaults is not None and seat < len(defaults):
            want = defaults[seat] or None
            why = "its sit-down seed (it did not contribute)"
        else:
            continue
        if seeds[seat] != want:
            failures.append(
                Failure(
                    CONTRIBUTION_MISMATCH,
                    f"seat {seat + 1}: the deal mixed {seeds[seat]!r}, not {why} {want!r}",
                )
            )
    if len(failures) == before:
        checked.append("every seat's seed")


def _check_hands(
    e: RoundEvidence,
    expected: Sequence[Sequence[int]],
    text: Any,
    check: str,
    failures: list[Failure],
    checked: list[str],
) -> None:
    hands = e.hands or {}
    ok = True
    for seat in range(e.seats):
        got = hands.get(seat)
        if got is None:
            ok = False
            failures.append(Failure(RECORD_INCOMPLETE, f"no dealt hand for seat {seat + 1}"))
        elif sorted(got) != sorted(expected[seat]):
            ok = False
            missing = sorted(set(expected[seat]) - set(got))
            extra = sorted(set(got) - set(expected[seat]))
            failures.append(
                Failure(
                    check,
                    f"seat {seat + 1} was dealt {len(got)}: missing "
                    f"{_texts(missing, text)}, not from the seeds {_texts(extra, text)}",
                )
            )
    if ok:
        checked.append(f"all {e.seats} hands")


def _texts(ids: Sequence[int], text: Any) -> str:
    out = []
    for i in ids:
        try:
            out.append(str(text(i)))
        except ValueError:
            out.append(f"#{i}")
    return "[" + " ".join(out) + "]"


def _check_kishpa_ids(
    e: RoundEvidence, dealt: Dealt, failures: list[Failure], checked: list[str]
) -> None:
    before = len(failures)
    if e.kishpa_id is None:
        failures.append(Failure(RECORD_INCOMPLETE, "the record has no kishpa tile id"))
    elif e.kishpa_id != dealt.kishpa:
        failures.append(
            Failure(
                KISHPA_MISMATCH,
                f"the seeds turn tile {dealt.kishpa} ({face(dealt.kishpa)}) as kishpa; the "
                f"table turned tile {e.kishpa_id}",
            )
        )
    if e.replacement_id != dealt.replacement:
        want = "none" if dealt.replacement is None else f"tile {dealt.replacement}"
        got = "none" if e.replacement_id is None else f"tile {e.replacement_id}"
        failures.append(
            Failure(REPLACEMENT_MISMATCH, f"the seeds give replacement {want}; the table {got}")
        )
    if e.dolls_returned is None:
        failures.append(Failure(RECORD_INCOMPLETE, "the record does not say which dolls"))
    elif list(e.dolls_returned) != list(dealt.dolls_returned):
        failures.append(
            Failure(
                DOLLS_MISMATCH,
                f"the seeds turn back dolls {_texts(dealt.dolls_returned, face)}; the table "
                f"{_texts(e.dolls_returned, face)}",
            )
        )
    if len(failures) == before:
        checked.append("kishpa, replacement and dolls")


def _check_draws(
    e: RoundEvidence,
    start: int,
    tile_at: Any,
    text: Any,
    failures: list[Failure],
    checked: list[str],
) -> None:
    """Every draw took the next tile: the pile went down one at a time from ``start`` and
    each tile is the one the seeds put there."""
    before = len(failures)
    expected_left = start - 1
    for n, draw in enumerate(e.draws, start=1):
        if draw.pile_left != expected_left:
            failures.append(
                Failure(
                    DRAW_MISMATCH,
                    f"draw {n} (seat {draw.seat + 1}) left {draw.pile_left}; the pile should "
                    f"have had {expected_left} left",
                )
            )
        expected_left = draw.pile_left - 1
        want = tile_at(draw.pile_left)
        if draw.tile_id < 0:
            failures.append(Failure(RECORD_INCOMPLETE, f"draw {n} has no tile"))
        elif want != draw.tile_id:
            failures.append(
                Failure(
                    DRAW_MISMATCH,
                    f"draw {n} (seat {draw.seat + 1}, leaving {draw.pile_left}): the seeds put "
                    f"{_texts([want] if want is not None else [], text)} there; the table "
                    f"dealt {_texts([draw.tile_id], text)}",
                )
            )
    if len(failures) == before:
        checked.append(f"all {len(e.draws)} draws")


# --- Hand (Rummy 51) deals -------------------------------------------------------------
#
# Hand shuffles the same way (the deck above, 106 cards) and deals from the top: one card at
# a time clockwise from the starter, ``hand_size`` rounds, one more card to the starter; the
# next card is turned to start the discard pile; the rest is the stock, drawn from its top.
# Card ids: ``copy * 52 + suit * 13 + (rank - 1)`` for suits S H D C, ranks A=1..K=13;
# 104 and 105 are the jokers J1 and J2.

CARD_SUITS = "SHDC"
DEALT_CARDS_MISMATCH = "DEALT_CARDS_MISMATCH"
TOP_DISCARD_MISMATCH = "TOP_DISCARD_MISMATCH"


def card_text(card_id: int) -> str:
    """A Hand card id in the text notation: ``AS``, ``10H``, ``QD``, ``J1`` (a joker)."""
    if card_id in (104, 105):
        return f"J{card_id - 103}"
    if not 0 <= card_id < 104:
        raise ValueError(f"no card has id {card_id}")
    rank = card_id % 13 + 1
    return {1: "A", 11: "J", 12: "Q", 13: "K"}.get(rank, str(rank)) + CARD_SUITS[card_id % 52 // 13]


@dataclass(frozen=True, slots=True)
class HandDealt:
    """A recomputed Hand deal: every hand, the turned card and the stock (top first)."""

    deck: tuple[int, ...]
    hands: tuple[tuple[int, ...], ...]
    top_discard: int
    stock: tuple[int, ...]

    def stock_card(self, left: int) -> int | None:
        """The card a draw from the stock took when it left ``left`` cards (None: impossible)."""
        index = len(self.stock) - 1 - left
        return self.stock[index] if 0 <= index < len(self.stock) else None


def hand_deal(
    server_seed: bytes,
    client_seeds: Sequence[str | None],
    seats: int,
    starter: int,
    *,
    hand_size: int = HAND_SIZE,
) -> HandDealt:
    """Recompute a Hand deal (docs/fairness.md, "Hand deals")."""
    cards = deck(server_seed, client_seeds)
    hands: list[list[int]] = [[] for _ in range(seats)]
    cursor = 0
    for _ in range(hand_size):
        for k in range(seats):
            hands[(starter + k) % seats].append(cards[cursor])
            cursor += 1
    hands[starter].append(cards[cursor])
    return HandDealt(
        tuple(cards),
        tuple(tuple(h) for h in hands),
        cards[cursor + 1],
        tuple(cards[cursor + 2 :]),
    )


def _card_or_id(card_id: int) -> str:
    try:
        return card_text(card_id)
    except ValueError:
        return "?"


def _cards(cards: Sequence[int]) -> str:
    return "[" + " ".join(_card_or_id(c) for c in sorted(cards)) + "]"


def _check_hand_deal(
    e: RoundEvidence,
    seed: bytes,
    seeds: list[str | None],
    failures: list[Failure],
    checked: list[str],
) -> None:
    """The Hand part of :func:`verify_round`: own cards, the turned card, own stock draws."""
    dealt = hand_deal(seed, seeds, e.seats, e.starter, hand_size=e.hand_size)
    _check_own_dealt(
        e, dealt.hands[e.my_seat], _cards, DEALT_CARDS_MISMATCH, "cards", failures, checked
    )
    if e.top_discard is not None:
        if e.top_discard != dealt.top_discard:
            failures.append(
                Failure(
                    TOP_DISCARD_MISMATCH,
                    f"the seeds turn {card_text(dealt.top_discard)} to start the discard pile;"
                    f" the table turned {_card_or_id(e.top_discard)}",
                )
            )
        else:
            checked.append("turned card")
    _check_own_draws(
        e, dealt.stock_card, card_text, _card_or_id, ("stock", "cards"), failures, checked
    )


def _face_or_id(tile_id: int) -> str:
    try:
        return face(tile_id)
    except ValueError:
        return "?"


def _faces(tiles: Sequence[int]) -> str:
    return "[" + " ".join(_face_or_id(t) for t in sorted(tiles)) + "]"


# --- evidence from table events ---------------------------------------------------------


@dataclass(slots=True)
class _Coming:
    """What a witness saw of a deal before it was dealt."""

    precommitment: str = ""
    contributions: int = 0
    problems: list[str] = field(default_factory=list)


class RoundWitness:
    """Collects one player's evidence of each round from the table events he receives.

    Feed it every event (``observe``); after ``round_ended`` it returns the round's
    :class:`Verification`. It reads only what the events carry: the public facts and the
    private ``dealt`` / ``drew`` parts that only this player receives.
    """

    def __init__(
        self,
        my_client_seed: str | None = None,
        *,
        contributions: Callable[[int], str | None] | None = None,
    ) -> None:
        """``contributions(deal)``: what this client contributed to a deal, when it sends
        contributions by itself (``KishpaClient.my_contribution``): read at the deal's end,
        when the answer to the contribution has surely arrived."""
        self.my_client_seed = my_client_seed
        self._lookup = contributions
        self._rounds: dict[int, RoundEvidence] = {}
        self._coming: dict[int, _Coming] = {}
        self._mine: dict[int, str] = {}
        self._done: dict[int, RoundEvidence] = {}

    def ended(self, round_no: int) -> RoundEvidence | None:
        """What this witness saw live of an ended round (for :func:`with_record`)."""
        return self._done.get(round_no)

    def _ended(self, evidence: RoundEvidence) -> None:
        if evidence.my_contribution is None and self._lookup is not None:
            mine = self._lookup(evidence.round_no)
            if mine is not None:
                evidence.my_contribution = evidence.my_client_seed = mine
        self._done[evidence.round_no] = evidence
        for old in [r for r in self._done if r < evidence.round_no - 4]:
            del self._done[old]

    def contributed(self, deal: int, contribution: str) -> None:
        """This player's contribution to ``deal`` was accepted: its seat entry must be it."""
        self._mine[deal] = contribution

    def _before_deal(self, kind: str, round_no: int, data: Mapping[str, Any]) -> None:
        coming = self._coming.setdefault(round_no, _Coming())
        if kind == "seed_committed":
            if coming.contributions:
                coming.problems.append(
                    f"deal {round_no}'s commitment arrived after {coming.contributions} "
                    "contribution(s) to it had been accepted"
                )
            coming.precommitment = str(data.get("commitment") or "")
        else:
            coming.contributions += 1

    def _opened(self, evidence: RoundEvidence) -> None:
        """A deal started: what this witness saw before it goes into its evidence."""
        coming = self._coming.pop(evidence.round_no, None)
        mine = self._mine.pop(evidence.round_no, None)
        if mine is not None:
            evidence.my_client_seed = mine
            evidence.my_contribution = mine
        if coming is None:
            return
        evidence.order_failures = list(coming.problems)
        if coming.precommitment:
            evidence.precommitment = coming.precommitment
            if coming.precommitment != evidence.commitment:
                evidence.order_failures.append(
                    f"deal {evidence.round_no} was dealt under commitment "
                    f"{evidence.commitment[:16]}…, not {coming.precommitment[:16]}… published"
                    " before it"
                )

    def observe(
        self,
        kind: str,
        round_no: int,
        seat: int,
        data: Mapping[str, Any],
        private: Mapping[str, Any] | None = None,
    ) -> Verification | None:
        """Take one event in; the verification of its round when the event ended it."""
        if kind in ("seed_committed", "contribution_accepted"):
            # Sent between deals: their round is the one before; the deal is in the data.
            self._before_deal(kind, int(data.get("deal") or round_no + 1), data)
            return None
        if kind == "round_started":
            players = list(data.get("players") or [])
            self._rounds[round_no] = RoundEvidence(
                commitment=str(data.get("commitment") or ""),
                server_seed_hex="",
                client_seeds=[],
                seats=len(players),
                starter=int(data.get("starter") or 0),
                my_seat=-1,
                dealt=[],
                kishpa=str(data["kishpa"]) if data.get("kishpa") else None,
                my_client_seed=self.my_client_seed,
                round_no=round_no,
            )
            _live_seats(self._rounds[round_no], data)
            self._opened(self._rounds[round_no])
            return None
        if kind == "deal_started":  # Hand
            sizes = list(data.get("hand_sizes") or [])
            starter = int(data.get("starter") or 0)
            others = [int(n) for k, n in enumerate(sizes) if k != starter]
            self._rounds[round_no] = RoundEvidence(
                commitment=str(data.get("commitment") or ""),
                server_seed_hex="",
                client_seeds=[],
                seats=len(sizes),
                starter=starter,
                my_seat=-1,
                dealt=[],
                my_client_seed=self.my_client_seed,
                hand_size=others[0] if others else HAND_SIZE,
                round_no=round_no,
                game=HAND_GAME,
                top_discard=None if data.get("top_discard") is None else int(data["top_discard"]),
            )
            _live_seats(self._rounds[round_no], data)
            self._opened(self._rounds[round_no])
            return None
        evidence = self._rounds.get(round_no)
        if evidence is None:
            return None  # joined mid-round: nothing to check this round
        return checks_of(evidence.game).observe(self, evidence, kind, seat, data, private)

    def _observe_kishpa(
        self,
        evidence: RoundEvidence,
        kind: str,
        seat: int,
        data: Mapping[str, Any],
        private: Mapping[str, Any] | None,
    ) -> Verification | None:
        if kind == "dealt" and private and "hand" in private:
            evidence.my_seat = seat
            evidence.dealt = [int(t["id"]) for t in private["hand"]]
        elif kind == "kishpa_replaced" and data.get("kishpa"):
            evidence.replaced_kishpa = str(data["kishpa"])
        elif kind == "drew" and private and data.get("source") == "pile":
            evidence.pile_draws.append(PileDraw(int(private["tile_id"]), int(data["pile"])))
        elif kind == "round_ended":
            del self._rounds[evidence.round_no]
            if evidence.my_seat < 0:
                return None  # a watcher without a seat has nothing of his own to check
            evidence.server_seed_hex = str(data.get("server_seed") or "")
            evidence.client_seeds = list(data.get("client_seeds") or [])
            evidence.commitment = str(data.get("commitment") or evidence.commitment)
            self._ended(evidence)
            return verify_round(evidence)
        return None

    def _observe_hand(
        self,
        evidence: RoundEvidence,
        kind: str,
        seat: int,
        data: Mapping[str, Any],
        private: Mapping[str, Any] | None,
    ) -> Verification | None:
        # A draw from the stock is public (the cards left), then the drawer alone receives
        # the card (``card_drawn``).
        # Both the wire's shapes and the table stream's (``cards``, ``drew_from_stock``, ``card``).
        if kind == "dealt" and private and ("hand" in private or "cards" in private):
            evidence.my_seat = seat
            if "hand" in private:
                evidence.dealt = [int(t["id"]) for t in private["hand"]]
            else:
                evidence.dealt = [int(c) for c in private["cards"]]
        elif seat == evidence.my_seat >= 0 and (
            (kind == "drew" and data.get("source") == "pile") or kind == "drew_from_stock"
        ):
            left = data["pile"] if kind == "drew" else data["stock_size"]
            evidence.pile_draws.append(PileDraw(-1, int(left)))
        elif kind == "card_drawn" and private and evidence.pile_draws:
            card = private["tile_id"] if "tile_id" in private else private["card"]
            evidence.pile_draws[-1] = PileDraw(int(card), evidence.pile_draws[-1].pile_left)
        elif kind == "seed_revealed":
            del self._rounds[evidence.round_no]
            if evidence.my_seat < 0:
                return None
            evidence.server_seed_hex = str(data.get("server_seed") or "")
            evidence.client_seeds = list(data.get("client_seeds") or [])
            evidence.commitment = str(data.get("commitment") or evidence.commitment)
            self._ended(evidence)
            return verify_round(evidence)
        return None

    def observe_message(self, event: Any) -> Verification | None:
        """:meth:`observe` for a typed ``kishpa.table.v1.TableEvent`` message."""
        from kishpa.table.v1 import table_pb2  # the generated contract, only here

        kind = event.WhichOneof("event") or ""
        seat = event.seat if event.HasField("seat") else -1
        data: dict[str, Any] = {}
        private: dict[str, Any] | None = None
        if kind == "round_started":
            started = event.round_started
            data = {
                "players": list(started.player_ids),
                "starter": started.starter_seat,
                "commitment": started.shuffle_commitment,
                "kishpa": started.kishpa.face,
                **_seats_data(started),
            }
        elif kind == "dealt" and event.dealt.tiles:
            private = {"hand": [{"id": t.id} for t in event.dealt.tiles]}
        elif kind == "kishpa_replaced":
            data = {"kishpa": event.kishpa_replaced.kishpa.face}
        elif kind == "drew":
            drew = event.drew
            from_pile = drew.source == table_pb2.DRAW_SOURCE_PILE
            data = {"source": "pile" if from_pile else "discard", "pile": drew.pile_count}
            if from_pile and drew.HasField("tile"):
                private = {"tile_id": drew.tile.id}
        elif kind == "deal_started":
            started = event.deal_started
            data = {
                "starter": started.starter_seat,
                "hand_sizes": list(started.hand_sizes),
                "commitment": started.shuffle_commitment,
                "top_discard": started.top_discard.id if started.HasField("top_discard") else None,
                **_seats_data(started),
            }
        elif kind == "card_drawn" and event.card_drawn.HasField("tile"):
            private = {"tile_id": event.card_drawn.tile.id}
        elif kind == "seed_revealed":
            revealed = event.seed_revealed
            data = {
                "server_seed": revealed.server_seed,
                "client_seeds": list(revealed.client_seeds),
                "commitment": revealed.shuffle_commitment,
            }
        elif kind == "seed_committed":
            data = {
                "deal": event.seed_committed.deal,
                "commitment": event.seed_committed.shuffle_commitment,
            }
        elif kind == "contribution_accepted":
            data = {
                "deal": event.contribution_accepted.deal,
                "contribution": event.contribution_accepted.contribution,
            }
        elif kind == "round_ended":
            ended = event.round_ended
            data = {
                "server_seed": ended.server_seed,
                "client_seeds": list(ended.client_seeds),
                "commitment": ended.shuffle_commitment,
            }
        return self.observe(kind, event.round, seat, data, private)


SEAT_MARKS = ("bot_seats", "declared_seats", "awaited_seats", "autoplay_seats")


def _seats_data(started: Any) -> dict[str, Any]:
    """A start event's ``DealSeats`` as the stream's data keys (nothing when unset)."""
    if not started.HasField("seats"):
        return {}
    seats = started.seats
    until = seats.awaited_until.ToMilliseconds() if seats.HasField("awaited_until") else 0
    out: dict[str, Any] = {name: list(getattr(seats, name)) for name in SEAT_MARKS}
    out["awaited_until_ms"] = until
    return out


def _live_seats(evidence: RoundEvidence, data: Mapping[str, Any]) -> None:
    """What the deal's start said of its seats, as it was shown live."""
    if not all(name in data for name in SEAT_MARKS):
        return
    evidence.record_version = RECORD_VERSION_SEATS
    evidence.bot_seats = sorted(int(s) for s in data["bot_seats"])
    evidence.declared_seats = sorted(int(s) for s in data["declared_seats"])
    evidence.awaited_seats = sorted(int(s) for s in data["awaited_seats"])
    evidence.autoplay_seats = sorted(int(s) for s in data["autoplay_seats"])
    evidence.awaited_until_ms = int(data.get("awaited_until_ms") or 0)


def _marks(e: RoundEvidence) -> tuple[Any, ...]:
    return (
        e.record_version >= RECORD_VERSION_SEATS,
        sorted(e.bot_seats),
        sorted(e.declared_seats),
        sorted(e.awaited_seats),
        sorted(e.autoplay_seats),
        e.awaited_until_ms,
    )


def evidence_from_record(
    record: Any,
    my_client_seed: str | None = None,
    *,
    my_contribution: str | None = None,
    i_declared: bool | None = None,
) -> RoundEvidence:
    """The evidence in a ``kishpa.table.v1.RoundRecord`` (``KishpaClient.round_record``);
    ``my_contribution``: what this client contributed to the deal, if it knows (it is then
    also the seat's expected client seed, in place of a sit-down ``my_client_seed``: a seat's
    entry is its contribution, else its sit-down seed); ``i_declared``: whether it declared
    at sit-down."""
    if my_contribution is not None:
        my_client_seed = my_contribution
    from kishpa.common.v1 import common_pb2  # the generated contract, only here

    game = _game_of(common_pb2.Game.Name(record.game))
    return RoundEvidence(
        commitment=record.shuffle_commitment,
        server_seed_hex=record.server_seed,
        client_seeds=list(record.client_seeds),
        seats=len(record.player_ids),
        starter=record.starter_seat,
        my_seat=record.my_seat,
        dealt=list(record.dealt_tile_ids),
        pile_draws=[PileDraw(d.tile_id, d.pile_left) for d in record.pile_draws],
        kishpa=record.kishpa or None,
        # replacement_kishpa is the clear name; records of older servers have only the
        # deprecated replaced_kishpa (the same face).
        replaced_kishpa=(record.replacement_kishpa or record.replaced_kishpa) or None,
        my_client_seed=my_client_seed,
        hand_size=record.hand_size or HAND_SIZE,
        round_no=record.round,
        table_id=record.table_id,
        game=game,
        top_discard=GAME_CHECKS[game].top_discard(record),
        hands=(
            {d.seat: list(d.tile_ids) for d in record.dealt_hands} if record.dealt_hands else None
        ),
        draws=[TableDraw(d.seat, d.tile_id, d.pile_left) for d in record.draws],
        kishpa_id=record.kishpa_tile_id if record.HasField("kishpa_tile_id") else None,
        replacement_id=(
            record.replacement_kishpa_tile_id
            if record.HasField("replacement_kishpa_tile_id")
            else None
        ),
        dolls_returned=GAME_CHECKS[game].dolls_returned(record),
        precommitment=record.precommitment,
        precommitment_event_id=record.precommitment_event_id,
        contributions=[
            Contribution(c.seat, c.contribution, c.event_id) for c in record.contributions
        ],
        deal_event_id=record.deal_event_id,
        seat_client_seeds=list(record.seat_client_seeds) or None,
        moves=(
            [SeatMove(m.seat, m.kind, tuple(m.tile_ids), m.event_id) for m in record.moves]
            if record.dealt_hands
            else None
        ),
        cards_left=(
            {d.seat: list(d.tile_ids) for d in record.cards_left} if record.cards_left else None
        ),
        record_version=record.record_version,
        bot_seats=list(record.bot_seats),
        declared_seats=list(record.declared_seats),
        awaited_seats=list(record.awaited_seats),
        autoplay_seats=list(record.autoplay_seats),
        awaited_until_ms=(
            record.awaited_until.ToMilliseconds() if record.HasField("awaited_until") else 0
        ),
        my_contribution=my_contribution,
        i_declared=i_declared,
    )


def _top_discard(record: Any) -> int | None:
    """Hand's turned card: top_discard_card_id, else (older servers) the deprecated
    top_discard_id, where 0 is a real card (AS)."""
    if record.HasField("top_discard_card_id"):
        return int(record.top_discard_card_id)
    return int(record.top_discard_id)


def with_record(live: RoundEvidence | None, record: RoundEvidence) -> RoundEvidence:
    """The whole-table evidence of a record, with what this player saw live in place of
    what the record says of him: his own tiles and draws, the faces shown, the commitment
    at the deal, the order he saw. A server that rewrote the record after the round
    contradicts either the seeds or what was shown live."""
    if live is None or live.my_seat < 0:
        return record
    merged = replace(
        record,
        dealt=list(live.dealt),
        pile_draws=list(live.pile_draws),
        kishpa=live.kishpa if live.kishpa is not None else record.kishpa,
        replaced_kishpa=live.replaced_kishpa,
        commitment=live.commitment or record.commitment,
        my_client_seed=(
            live.my_client_seed if live.my_client_seed is not None else record.my_client_seed
        ),
        top_discard=live.top_discard if live.top_discard is not None else record.top_discard,
        order_failures=[*record.order_failures, *live.order_failures],
        my_contribution=(
            live.my_contribution if live.my_contribution is not None else record.my_contribution
        ),
    )
    if live.precommitment and live.precommitment != record.precommitment:
        merged.order_failures.append(
            "the record's advance commitment is not the one published live"
        )
    if live.my_seat != record.my_seat:
        merged.order_failures.append("the record puts you in another seat")
    if live.record_version >= RECORD_VERSION_SEATS and _marks(live) != _marks(record):
        merged.seat_problems = [
            *record.seat_problems,
            "the record's bots, declared, awaited or auto-play seats are not the ones the deal"
            " showed live",
        ]
    return merged


def verification_to_dict(result: Verification) -> dict[str, Any]:
    """The verdict as JSON-able data (``kishpa verify --json``)."""
    return {
        "verified": result.ok,
        "whole_table": result.whole_table,
        "contributed": result.contributed,
        "my_contribution": result.my_contribution,
        "bots_only": result.bots_only,
        "notes": list(result.notes),
        "checked": list(result.checked),
        "failures": [{"check": f.check, "message": f.message} for f in result.failures],
    }


def _no_top_discard(record: Any) -> int | None:
    del record
    return None


def _dolls_returned(record: Any) -> list[int] | None:
    return list(record.dolls_returned_ids)


def _no_dolls(record: Any) -> list[int] | None:
    del record
    return None


Check = Callable[[RoundEvidence, bytes, list[str | None], list[Failure], list[str]], None]
"""``(evidence, server seed, client seeds, failures, checked)``: add what a check found."""
Observe = Callable[
    [RoundWitness, RoundEvidence, str, int, Mapping[str, Any], Mapping[str, Any] | None],
    Verification | None,
]


@dataclass(frozen=True, slots=True)
class GameChecks:
    """One game's part of verifying a round (the rest is the same for every game)."""

    name: str
    own_seat: Check
    """The seat's own deal and draws."""
    whole_table: Check
    """Every seat's deal, draws and moves (a record served after the reveal)."""
    observe: Observe
    """A live event of a round already started (``RoundWitness``)."""
    top_discard: Callable[[Any], int | None]
    """The card turned up at the deal, from a ``RoundRecord`` (None: the game turns none)."""
    dolls_returned: Callable[[Any], list[int] | None]
    """The tiles turned back to the pile, from a ``RoundRecord`` (None: the game has none)."""


GAME_CHECKS: dict[str, GameChecks] = {
    c.name: c
    for c in (
        GameChecks(
            KISHPA_GAME,
            _check_kishpa_deal,
            _check_kishpa_table,
            RoundWitness._observe_kishpa,
            _no_top_discard,
            _dolls_returned,
        ),
        GameChecks(
            HAND_GAME,
            _check_hand_deal,
            _check_hand_table,
            RoundWitness._observe_hand,
            _top_discard,
            _no_dolls,
        ),
    )
}
"""Each game's checks by its name."""


def _game_of(enum_name: str) -> str:
    """The game of a wire enum name (``GAME_HAND`` -> ``hand``); a record of a server before
    games were named (``GAME_UNSPECIFIED``) is Kishpa's."""
    name = enum_name.removeprefix("GAME_").lower()
    return name if name in GAME_CHECKS else KISHPA_GAME


def checks_of(game: str) -> GameChecks:
    """The checks of a game by name (an unknown name: Kishpa's, as before games were named)."""
    return GAME_CHECKS.get(game) or GAME_CHECKS[KISHPA_GAME]
