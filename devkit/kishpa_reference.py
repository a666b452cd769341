"""A slow, obviously correct reference for the hand solver, used by tests and benchmarks.

It shares nothing with :mod:`games.kishpa.solver`: it lists every valid group straight from
the definitions of docs/rules/kishpa.md section 3 (each as the faces it needs, place by place), then
tries to cover the hand with them, tile by tile, letting a joker fill any place. The only
shortcuts are ones that are plainly safe: identical tiles are interchangeable, and a
remaining hand that failed once fails again.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from itertools import combinations
from typing import Literal, Protocol

from games.kishpa.ruleset import DEFAULT_RULES, RuleSet
from games.kishpa.tiles import ALL_FACES, COLOURS, NUMBERS, Face, copies_of, joker_of

__all__ = [
    "Chooser",
    "is_valid_group",
    "perturb",
    "reference_best_cover",
    "reference_partition",
    "reference_winning_arrangement",
    "sample_kishpa",
    "sample_random_hand",
    "sample_winning_hand",
    "valid_groups",
]

GroupKind = Literal["run", "set"]
_JOKER = "joker"


@functools.cache
def valid_groups(rules: RuleSet = DEFAULT_RULES) -> tuple[tuple[GroupKind, tuple[Face, ...]], ...]:
    """Every valid group as the faces of its places, in play order."""
    groups: list[tuple[GroupKind, tuple[Face, ...]]] = []
    for colour in COLOURS:
        for start in NUMBERS:
            for length in range(rules.min_group_size, rules.max_run_length + 1):
                numbers = list(range(start, start + length))
                if numbers[-1] <= 13:
                    groups.append(("run", tuple(Face(colour, n) for n in numbers)))
                elif rules.allow_run_12_13_1 and numbers[-1] == 14:
                    # 1 may follow 13 (…12 13 1) but nothing follows that 1.
                    groups.append(("run", tuple(Face(colour, (n - 1) % 13 + 1) for n in numbers)))
    for number in NUMBERS:
        for size in (3, 4):
            if size < rules.min_group_size:
                continue
            for colours in combinations(COLOURS, size):
                groups.append(("set", tuple(Face(c, number) for c in colours)))
    return tuple(groups)


_JOKER_CODE = 52
"""Face index standing for a joker in the search (plain faces are 0-51)."""


@functools.cache
def _homes(rules: RuleSet) -> list[list[tuple[GroupKind, tuple[int, ...], int]]]:
    """For each face index (and the joker), every (kind, places, index of its place).

    A joker may stand in any place of any group.
    """
    homes: list[list[tuple[GroupKind, tuple[int, ...], int]]] = [[] for _ in range(_JOKER_CODE + 1)]
    for kind, faces in valid_groups(rules):
        places = tuple(f.index for f in faces)
        for index, code in enumerate(places):
            homes[code].append((kind, places, index))
            homes[_JOKER_CODE].append((kind, places, index))
    return homes


def is_valid_group(
    kind: GroupKind, faces: Sequence[Face], joker: Face, rules: RuleSet = DEFAULT_RULES
) -> bool:
    """Whether these tiles, in this order, form a valid group of this kind.

    Tiles of the joker's face are wild; a doll is a plain tile of the joker's face.
    """
    plain = [_JOKER if f == joker else (joker if f.is_doll else f) for f in faces]
    if kind == "set":
        size_ok = len(plain) in (3, 4) and len(plain) >= rules.min_group_size
        return size_ok and any(
            all(p == _JOKER or p in group for p in plain)
            and len({p for p in plain if p != _JOKER}) == sum(1 for p in plain if p != _JOKER)
            for k, group in valid_groups(rules)
            if k == "set" and len(group) == len(plain)
        )
    return any(
        all(p in (_JOKER, want) for p, want in zip(plain, group, strict=True))
        for k, group in valid_groups(rules)
        if k == "run" and len(group) == len(plain)
    )


def reference_winning_arrangement(
    hand: Sequence[Face], joker: Face, rules: RuleSet = DEFAULT_RULES
) -> list[tuple[GroupKind, tuple[int, ...]]] | None:
    """A winning arrangement of the hand as (kind, positions in play order), or ``None``.

    Same meaning as :func:`games.kishpa.solver.find_winning_arrangement`, found by brute
    force.
    """
    if len(hand) != rules.hand_size:
        return None
    return reference_partition(hand, joker, rules, need_long_run=True)


def reference_partition(
    hand: Sequence[Face], joker: Face, rules: RuleSet = DEFAULT_RULES, need_long_run: bool = False
) -> list[tuple[GroupKind, tuple[int, ...]]] | None:
    """Valid groups using every tile of the hand (any size), or ``None`` if there are none.

    With ``need_long_run`` one of them must be a run of ``rules.min_long_run`` or more.
    """
    # What each tile can be: the joker (wild) or exactly one plain face, as a face index.
    what = [_JOKER_CODE if f == joker else (joker if f.is_doll else f).index for f in hand]
    homes = _homes(rules)
    failed: set[tuple[tuple[int, ...], bool]] = set()

    def solve(
        left: frozenset[int], has_long: bool
    ) -> list[tuple[GroupKind, tuple[int, ...]]] | None:
        if not left:
            return [] if has_long else None
        key = (tuple(sorted(what[p] for p in left)), has_long)
        if key in failed:
            return None
        # Cover a plain tile first (a joker if only jokers are left: it may stand anywhere).
        first = min(left, key=lambda p: (what[p] == _JOKER_CODE, p))
        rest_left = left - {first}
        available: list[list[int]] = [[] for _ in range(_JOKER_CODE + 1)]
        for p in sorted(rest_left):
            available[what[p]].append(p)
        for kind, places, index in homes[what[first]]:
            long_run = kind == "run" and len(places) >= rules.min_long_run
            for filling in fill(places, index, first, available):
                rest = solve(rest_left - set(filling), has_long or long_run)
                if rest is not None:
                    return [(kind, filling), *rest]
        failed.add(key)
        return None

    def fill(
        places: tuple[int, ...], fixed: int, first: int, available: list[list[int]]
    ) -> list[tuple[int, ...]]:
        """Every way to fill the other places from ``available`` (its tiles by face index)."""
        options: list[tuple[int, ...]] = [()]
        for place, face in enumerate(places):
            grown: list[tuple[int, ...]] = []
            for partial in options:
                if place == fixed:
                    grown.append((*partial, first))
                    continue
                # Identical tiles are interchangeable: try the first unused one of each kind.
                for wanted in (face, _JOKER_CODE):
                    for p in available[wanted]:
                        if p not in partial:
                            grown.append((*partial, p))
                            break
            if not grown:
                return []
            options = grown
        return options

    return solve(frozenset(range(len(hand))), not need_long_run)


def reference_best_cover(hand: Sequence[Face], joker: Face, rules: RuleSet = DEFAULT_RULES) -> int:
    """The most tiles of the hand that disjoint valid groups can hold (tries every subset)."""
    for size in range(len(hand), 0, -1):
        for kept in combinations(range(len(hand)), size):
            if reference_partition([hand[p] for p in kept], joker, rules) is not None:
                return size
    return 0


class Chooser(Protocol):
    """The part of ``random.Random`` the hand builders use (tests hand in a seeded one)."""

    def randrange(self, start: int, stop: int = ..., step: int = ...) -> int: ...

    def random(self) -> float: ...


def _free_tiles(kishpa: Face) -> list[Face]:
    """The faces still in the set once the kishpa is turned (one entry per copy)."""
    tiles = [f for f in ALL_FACES for _ in range(copies_of(f))]
    tiles.remove(kishpa)
    return tiles


def sample_kishpa(rng: Chooser) -> Face:
    """Any numbered face (a doll is never the kishpa)."""
    return ALL_FACES[rng.randrange(0, 52)]


def sample_random_hand(rng: Chooser, kishpa: Face, size: int = 14) -> list[Face]:
    """``size`` tiles dealt at random from what the kishpa leaves."""
    tiles = _free_tiles(kishpa)
    hand = []
    for _ in range(size):
        hand.append(tiles.pop(rng.randrange(0, len(tiles))))
    return hand


@functools.cache
def _groups_by_shape(rules: RuleSet) -> dict[tuple[str, int], list[tuple[Face, ...]]]:
    shapes: dict[tuple[str, int], list[tuple[Face, ...]]] = {}
    for kind, places in valid_groups(rules):
        shapes.setdefault((kind, len(places)), []).append(places)
    return shapes


def sample_winning_hand(
    rng: Chooser,
    kishpa: Face,
    size: int = 14,
    joker_rate: float = 0.15,
    rules: RuleSet = DEFAULT_RULES,
) -> list[Face] | None:
    """A hand built from valid groups (one long run first), or ``None`` if tiles ran out.

    Each place gets its plain tile (a doll for the joker's face), or a joker now and then or
    when the plain tile is gone. The hand comes back shuffled.
    """
    joker = joker_of(kishpa)
    free = _free_tiles(kishpa)
    jokers = free.count(joker)
    free = [f for f in free if f != joker]
    dolls = [f for f in free if f.is_doll]
    by_shape = _groups_by_shape(rules)
    hand: list[Face] = []
    while len(hand) < size:
        want = size - len(hand)
        # The first group is the long run; no group may leave too few tiles for another.
        first = not hand
        kind = "run" if first or rng.random() < 0.6 else "set"
        lengths = [
            n
            for (k, n) in by_shape
            if k == kind
            and (rules.min_long_run if first else rules.min_group_size) <= n <= want
            and (n == want or want - n >= rules.min_group_size)
        ]
        if not lengths:
            return None
        pool = by_shape[kind, lengths[rng.randrange(0, len(lengths))]]
        places = pool[rng.randrange(0, len(pool))]
        for face in places:
            if jokers and rng.random() < joker_rate:
                jokers -= 1
                hand.append(joker)
            elif face == joker and dolls:
                hand.append(dolls.pop(rng.randrange(0, len(dolls))))
            elif face != joker and face in free:
                free.remove(face)
                hand.append(face)
            elif jokers:
                jokers -= 1
                hand.append(joker)
            else:
                return None
    for i in range(len(hand) - 1, 0, -1):
        j = rng.randrange(0, i + 1)
        hand[i], hand[j] = hand[j], hand[i]
    return hand


def perturb(rng: Chooser, kishpa: Face, hand: Sequence[Face]) -> list[Face]:
    """The hand with one tile swapped for another tile still in the set (a near miss)."""
    free = _free_tiles(kishpa)
    for face in hand:
        free.remove(face)
    out = list(hand)
    out[rng.randrange(0, len(out))] = free[rng.randrange(0, len(free))]
    return out
