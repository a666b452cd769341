"""Checking one proposed group fast (a client's proposed winning arrangement).

Tiles are given in play order. A tile of the joker's face is wild; a doll is a plain tile of
the joker's face (docs/rules/kishpa.md section 2). The solver finds arrangements; this only verifies one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from games.kishpa.ruleset import DEFAULT_RULES, RuleSet
from games.kishpa.tiles import Face


def _plain(faces: Sequence[Face], joker: Face) -> list[Face | None]:
    """``None`` for a wild joker; a doll becomes the joker's face."""
    return [None if f == joker else (joker if f.is_doll else f) for f in faces]


def is_valid_set(faces: Sequence[Face], joker: Face, rules: RuleSet = DEFAULT_RULES) -> bool:
    """3 or 4 tiles of one number, all of different colours (jokers fill any colour)."""
    if not max(3, rules.min_group_size) <= len(faces) <= 4:
        return False
    plain = [f for f in _plain(faces, joker) if f is not None]
    return len({f.number for f in plain}) <= 1 and len({f.colour for f in plain}) == len(plain)


def is_valid_run(faces: Sequence[Face], joker: Face, rules: RuleSet = DEFAULT_RULES) -> bool:
    """Consecutive numbers of one colour in play order; 1 is low only, no wrap (except the
    optional 12-13-1 table setting)."""
    size = len(faces)
    if not max(3, rules.min_group_size) <= size <= rules.max_run_length:
        return False
    plain = _plain(faces, joker)
    placed = [(i, f) for i, f in enumerate(plain) if f is not None]
    if not placed:
        return True
    if len({f.colour for _, f in placed}) != 1:
        return False
    first_index, first = placed[0]
    starts = {first.number - first_index}
    if rules.allow_run_12_13_1 and first.number == 1:
        starts.add(14 - first_index)  # this 1 follows 13
    for start in starts:
        top = start + size - 1
        if start < 1 or top > (14 if rules.allow_run_12_13_1 else 13):
            continue
        if all((start + i - 1) % 13 + 1 == f.number for i, f in placed):
            return True
    return False


def group_kind(
    faces: Sequence[Face], joker: Face, rules: RuleSet = DEFAULT_RULES
) -> Literal["run", "set"]:
    """The kind of a valid group in play order: ``run`` when it is a valid run, else ``set``.

    Only a group of one real tile and jokers can be both (``R5 R6* R7*`` or ``R5 B5* K5*``);
    it is called a run, as :func:`is_winning_arrangement` counts it.
    """
    return "run" if is_valid_run(faces, joker, rules) else "set"


def is_winning_arrangement(
    groups: Sequence[Sequence[Face]], joker: Face, rules: RuleSet = DEFAULT_RULES
) -> bool:
    """Every group valid and at least one run of ``rules.min_long_run`` tiles or more."""
    long_run = False
    for group in groups:
        if is_valid_run(group, joker, rules):
            long_run = long_run or len(group) >= rules.min_long_run
        elif not is_valid_set(group, joker, rules):
            return False
    return long_run
