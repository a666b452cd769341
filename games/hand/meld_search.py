"""Finding melds in a hand: every meld a hand can form, and the best disjoint choice.

Used by the bot (and usable for hints). The search works on faces with multiplicities, so
the two copies of a card and the two jokers are interchangeable, then names concrete ids.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations

from games.hand.cards import ACE, PACK_SIZE, SUITS, face_of, is_joker
from games.hand.melds import HIGH_ACE_POSITION, MeldKind, make_meld, meld_value, position_face
from games.hand.ruleset import RuleSet

JOKER = -1
"""A joker's token in a candidate (any face index 0–51 is a real card)."""

DEFAULT_NODE_LIMIT = 20_000

KindedMeld = tuple[tuple[int, ...], MeldKind]
"""A meld found in a hand: its card ids (a run low to high) and its kind."""


@dataclass(frozen=True, slots=True)
class Candidate:
    """A meld a hand can form: face tokens in meld order (run: low to high), its value."""

    tokens: tuple[int, ...]
    kind: MeldKind
    value: int


def _token(card_id: int) -> int:
    return JOKER if is_joker(card_id) else card_id % PACK_SIZE


def _face_index(rank: int, suit_index: int) -> int:
    return suit_index * 13 + rank - 1


def candidate_melds(hand: Sequence[int], rules: RuleSet) -> list[Candidate]:
    """Every distinct meld (by faces) that the cards of ``hand`` can form."""
    have = Counter(_token(c) for c in hand)
    jokers = min(have[JOKER], rules.max_jokers_per_meld)
    found: dict[tuple[int, ...], MeldKind] = {}
    for rank in range(1, 14):
        suits = [s for s in range(4) if have[_face_index(rank, s)]]
        for size in range(1, min(len(suits), rules.max_set_size) + 1):
            for chosen in combinations(suits, size):
                real = tuple(_face_index(rank, s) for s in chosen)
                for extra in range(jokers + 1):
                    if rules.min_meld_size <= size + extra <= rules.max_set_size:
                        found.setdefault(real + (JOKER,) * extra, MeldKind.SET)
    for suit_index in range(4):
        present = [
            have[_face_index(ACE if p == HIGH_ACE_POSITION else p, suit_index)] > 0
            for p in range(HIGH_ACE_POSITION + 1)
        ]
        for low in range(1, HIGH_ACE_POSITION + 1):
            for length in range(rules.min_meld_size, rules.max_run_length + 1):
                high = low + length - 1
                if high > HIGH_ACE_POSITION:
                    break
                gaps = sum(1 for p in range(low, high + 1) if not present[p])
                if gaps > jokers:
                    break
                if gaps == length:
                    continue
                tokens = tuple(
                    _face_index(position_face(p, SUITS[suit_index]).rank, suit_index)
                    if present[p]
                    else JOKER
                    for p in range(low, high + 1)
                )
                found.setdefault(tokens, MeldKind.RUN)
    out = []
    for tokens, kind in found.items():
        if rules.meld_needs_real_card and all(t == JOKER for t in tokens):
            continue
        meld = make_meld(concrete(tokens, list(hand)), 0, rules, kind)
        out.append(Candidate(tokens, kind, meld_value(meld, rules)))
    return out


def concrete(tokens: Sequence[int], hand: list[int]) -> tuple[int, ...]:
    """Name ids from ``hand`` for the tokens (each id used once; ``hand`` is not changed)."""
    pool = list(hand)
    ids = []
    for token in tokens:
        card = next(c for c in pool if _token(c) == token)
        pool.remove(card)
        ids.append(card)
    return tuple(ids)


def _choose(
    hand: Sequence[int],
    rules: RuleSet,
    keep: int,
    must_include: int | None,
    node_limit: int,
    by_value: bool,
) -> tuple[list[KindedMeld], int]:
    """Depth-first search over disjoint candidates; the best by cards (or value) first.

    Each meld comes with the kind it was found as: one real card and jokers can read as a
    set or a run of another value (``J1 KH J2``: the run Q K A is 31, the set of kings 30),
    so the kind must travel with the cards to the rules."""
    candidates = candidate_melds(hand, rules)
    if by_value:
        candidates.sort(key=lambda c: (-c.value, -len(c.tokens), c.tokens))
    else:
        candidates.sort(key=lambda c: (-len(c.tokens), -c.value, c.tokens))
    have = Counter(_token(c) for c in hand)
    needed = None if must_include is None else _token(must_include)
    limit = len(hand) - keep
    best: tuple[tuple[int, int], list[Candidate]] = ((0, 0), [])
    nodes = 0

    def search(start: int, chosen: list[Candidate], used: int, value: int) -> None:
        nonlocal best, nodes
        nodes += 1
        score = (value, used) if by_value else (used, value)
        uses_needed = needed is None or any(needed in c.tokens for c in chosen)
        if uses_needed and score > best[0]:
            best = (score, list(chosen))
        if nodes >= node_limit:
            return
        for i in range(start, len(candidates)):
            cand = candidates[i]
            if used + len(cand.tokens) > limit:
                continue
            need = Counter(cand.tokens)
            if any(have[t] < n for t, n in need.items()):
                continue
            have.subtract(need)
            chosen.append(cand)
            search(i, chosen, used + len(cand.tokens), value + cand.value)
            chosen.pop()
            have.update(need)

    search(0, [], 0, 0)
    pool = list(hand)
    melds = []
    for cand in best[1]:
        ids = concrete(cand.tokens, pool)
        if must_include is not None and must_include in pool and needed in cand.tokens:
            ids = _prefer(ids, must_include)
        for card in ids:
            pool.remove(card)
        melds.append((ids, cand.kind))
    return melds, sum(c.value for c in best[1])


def _prefer(ids: tuple[int, ...], card: int) -> tuple[int, ...]:
    """Swap ``card`` in for its twin (same face) so that exact card is the one used."""
    if card in ids:
        return ids
    twin = next(i for i in ids if _token(i) == _token(card))
    return tuple(card if i == twin else i for i in ids)


def best_meld_specs(
    hand: Sequence[int],
    rules: RuleSet,
    *,
    keep: int = 1,
    must_include: int | None = None,
    node_limit: int = DEFAULT_NODE_LIMIT,
) -> tuple[list[KindedMeld], int]:
    """The disjoint melds that lay down the most cards (then the most value).

    Leaves at least ``keep`` cards in hand; with ``must_include`` only choices using that
    card count. Returns the melds as (id tuple in run order, kind) and their total value; the
    search stops after ``node_limit`` steps with the best found so far.
    """
    return _choose(hand, rules, keep, must_include, node_limit, by_value=False)


def best_melds(
    hand: Sequence[int],
    rules: RuleSet,
    *,
    keep: int = 1,
    must_include: int | None = None,
    node_limit: int = DEFAULT_NODE_LIMIT,
) -> tuple[list[tuple[int, ...]], int]:
    """:func:`best_meld_specs` without the kinds (the melds as id tuples, run order)."""
    specs, value = best_meld_specs(
        hand, rules, keep=keep, must_include=must_include, node_limit=node_limit
    )
    return [ids for ids, _kind in specs], value


def most_valuable_melds(
    hand: Sequence[int],
    rules: RuleSet,
    *,
    keep: int = 1,
    node_limit: int = DEFAULT_NODE_LIMIT,
) -> tuple[list[KindedMeld], int]:
    """The disjoint melds worth the most (then laying the most cards), and their value."""
    return _choose(hand, rules, keep, None, node_limit, by_value=True)


def best_opening_specs(
    hand: Sequence[int],
    rules: RuleSet,
    *,
    must_include: int | None = None,
    node_limit: int = DEFAULT_NODE_LIMIT,
) -> list[KindedMeld] | None:
    """Melds (ids, kind) worth at least the opening minimum, leaving a card to discard, or
    None.

    Maximises the value laid (then the cards), so a reachable 51 is found when one exists
    within the search limit.
    """
    melds, value = _choose(hand, rules, 1, must_include, node_limit, by_value=True)
    return melds if value >= rules.opening_minimum else None


def best_opening(
    hand: Sequence[int],
    rules: RuleSet,
    *,
    must_include: int | None = None,
    node_limit: int = DEFAULT_NODE_LIMIT,
) -> list[tuple[int, ...]] | None:
    """:func:`best_opening_specs` without the kinds."""
    specs = best_opening_specs(hand, rules, must_include=must_include, node_limit=node_limit)
    return None if specs is None else [ids for ids, _kind in specs]


def in_partial_meld(card: int, hand: Sequence[int]) -> bool:
    """Whether another card in hand could join ``card`` toward a set or a run."""
    if is_joker(card):
        return True
    face = face_of(card)
    for other in hand:
        if other == card or is_joker(other):
            continue
        of = face_of(other)
        if of.rank == face.rank and of.suit != face.suit:
            return True
        if of.suit == face.suit:
            ranks = {face.rank} | ({HIGH_ACE_POSITION} if face.rank == ACE else set())
            others = {of.rank} | ({HIGH_ACE_POSITION} if of.rank == ACE else set())
            if any(0 < abs(a - b) <= 2 for a in ranks for b in others):
                return True
    return False


__all__ = [
    "Candidate",
    "KindedMeld",
    "best_meld_specs",
    "best_melds",
    "best_opening",
    "best_opening_specs",
    "candidate_melds",
    "concrete",
    "in_partial_meld",
    "most_valuable_melds",
]
