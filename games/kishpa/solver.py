"""The hand solver: does a hand win (docs/rules/kishpa.md section 3), and how best to arrange it.

The search works on a count vector of plain faces plus a number of jokers. It always takes
the lowest remaining plain tile (colour-major, then number): no lower tile of its colour is
left, so it is either the lowest real tile of a run of its colour (any places below it are
jokers) or one tile of a set of its number. Two facts keep the search small:

* wherever a run or set slot can take a real tile still in hand, taking it is never worse
  than putting a joker there (swap the joker with that tile in whatever group holds it);
* only the *multiset* a group consumes matters to the rest of the search, so extra jokers on
  a run are counted, not placed.

Failed states are memoised on ``(counts, jokers, has_long_run)``. Positions in the result are
indices into the hand as given, so callers can map back to what the user wrote.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Literal

from games.kishpa.payouts import win_payout
from games.kishpa.ruleset import DEFAULT_RULES, RuleSet
from games.kishpa.tiles import ALL_FACES, COLOURS, Face, joker_of

__all__ = [
    "Group",
    "WinningDiscard",
    "best_arrangement",
    "find_winning_arrangement",
    "winning_discards",
]

# Slot index of a plain face: colour * 16 + number (numbers 1-13; other slots stay empty).
_STRIDE = 16
_SLOTS = 4 * _STRIDE
_TOP = 13

# Step descriptors recorded on the search path, turned into positions at the end.
_RUN = 0  # (_RUN, colour, low, high, extra_jokers): reals low..high, holes are jokers
_WRAP = 1  # (_WRAP, colour, low): low..13 then the 1 of that colour (12-13-1 setting)
_SET = 2  # (_SET, number, colour, other_real_colours, jokers)
_JOKERS = 3  # (_JOKERS, size): a run made of jokers only
_SKIP = 4  # (_SKIP, slot): best_arrangement leaves this tile out of every group

_Step = tuple[int, ...]
_State = tuple[bytes, int, bool]  # (plain-tile counts, jokers left, has a long run)


@dataclass(frozen=True, slots=True)
class Group:
    """One valid group of a hand: a run or a set, as positions into the hand.

    ``positions`` are in play order (a run ascending, with each joker in the place it fills).
    """

    kind: Literal["run", "set"]
    positions: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class WinningDiscard:
    """A discard from a 15-tile hand that leaves a winning 14.

    ``arrangement`` holds positions into the 15-tile hand (never ``position`` itself).
    """

    position: int
    arrangement: list[Group]
    payout_per_loser: int


_DOLL_SLOT = -1
_SLOT_OF: dict[Face, int] = {
    face: _DOLL_SLOT if face.is_doll else COLOURS.index(face.colour) * _STRIDE + face.number
    for face in ALL_FACES
}
"""Slot of each face (a dict: comparing dataclass faces field by field is slow)."""


class _Hand:
    """A hand split into plain-tile counts and jokers, remembering where each tile sits."""

    __slots__ = ("counts", "joker_positions", "jokers", "slot_positions")

    def __init__(self, hand: Sequence[Face], joker: Face) -> None:
        joker_slot = _SLOT_OF[joker]
        self.counts = counts = [0] * _SLOTS
        self.slot_positions: dict[int, list[int]] = {}
        self.joker_positions: list[int] = []
        for position, face in enumerate(hand):
            slot = _SLOT_OF[face]
            if slot == joker_slot:
                self.joker_positions.append(position)
                continue
            if slot == _DOLL_SLOT:
                # A doll is not wild: it is a plain tile of the joker's face.
                slot = joker_slot
            counts[slot] += 1
            self.slot_positions.setdefault(slot, []).append(position)
        self.jokers = len(self.joker_positions)

    def groups(self, path: Sequence[_Step]) -> list[Group]:
        """Turn the search path into groups of hand positions."""
        pools = {slot: list(positions) for slot, positions in self.slot_positions.items()}
        jokers = list(self.joker_positions)
        result: list[Group] = []

        def take(slot: int) -> int:
            return pools[slot].pop(0) if slot >= 0 else jokers.pop(0)

        for step in path:
            kind = step[0]
            if kind == _RUN:
                _, colour, low, high, extra = step
                base = colour * _STRIDE
                # Extra jokers go above the run when they fit, else below it.
                above = min(extra, _TOP - high)
                below = extra - above
                slots = [-1] * below
                slots += [base + n if pools.get(base + n) else -1 for n in range(low, high + 1)]
                slots += [-1] * above
                # Only the first real of each number is taken; the rest stay in the pool.
                result.append(Group("run", tuple(take(s) for s in slots)))
            elif kind == _WRAP:
                _, colour, low = step
                base = colour * _STRIDE
                slots = [base + n if pools.get(base + n) else -1 for n in range(low, _TOP + 1)]
                result.append(Group("run", (*(take(s) for s in slots), take(base + 1))))
            elif kind == _SET:
                number, colour, others, joker_count = step[1], step[2], step[3], step[4]
                colours = [colour] + [c for c in range(4) if others >> c & 1]
                slots = [c * _STRIDE + number for c in sorted(colours)] + [-1] * joker_count
                result.append(Group("set", tuple(take(s) for s in slots)))
            elif kind == _JOKERS:
                result.append(Group("run", tuple(take(-1) for _ in range(step[1]))))
        return result


def _joker_runs(jokers: int, max_run: int) -> list[int]:
    """Sizes of joker-only runs that use exactly ``jokers`` jokers ([] if impossible)."""
    if jokers == 0:
        return []
    if jokers < 3:
        return [-1]
    sizes: list[int] = []
    while jokers > max_run:
        size = min(max_run, jokers - 3)
        sizes.append(size)
        jokers -= size
    return [*sizes, jokers]


class _WinSearch:
    """Depth-first search for a winning partition; memoises failed states."""

    __slots__ = ("counts", "failed", "max_run", "min_group", "min_long", "path", "wrap")

    def __init__(
        self, counts: list[int], rules: RuleSet, failed: set[_State] | None = None
    ) -> None:
        self.counts = counts
        # A state's failure depends only on the state and the rules, so searches of hands
        # that differ by one tile (the 15 discards of a hand) may share this set.
        self.failed = failed if failed is not None else set()
        self.path: list[_Step] = []
        self.min_group = rules.min_group_size
        self.min_long = rules.min_long_run
        self.max_run = rules.max_run_length
        self.wrap = rules.allow_run_12_13_1

    def solve(self, start: int, jokers: int, has_long: bool) -> bool:
        counts = self.counts
        i = start
        while i < _SLOTS and counts[i] == 0:
            i += 1
        if i == _SLOTS:
            return self._only_jokers(jokers, has_long)
        key = (bytes(counts), jokers, has_long)
        if key in self.failed:
            return False
        colour, number = divmod(i, _STRIDE)
        counts[i] -= 1
        if (
            self._runs(i, colour, number, jokers, has_long)
            or (self.wrap and number == 1 and self._wrap_runs(i, colour, jokers, has_long))
            or self._sets(i, colour, number, jokers, has_long)
        ):
            counts[i] += 1
            return True
        counts[i] += 1
        self.failed.add(key)
        return False

    def _only_jokers(self, jokers: int, has_long: bool) -> bool:
        sizes = _joker_runs(jokers, self.max_run)
        if sizes and sizes[0] < 0:
            return False
        if not has_long and not any(s >= self.min_long for s in sizes):
            return False
        self.path.extend((_JOKERS, s) for s in sizes)
        return True

    def _runs(self, i: int, colour: int, low: int, jokers: int, has_long: bool) -> bool:
        counts = self.counts
        taken: list[int] = []
        holes = 0
        high = low
        top_real = True
        found = False
        while True:
            # A run whose top place is a joker equals a shorter run with one more extra joker.
            if top_real:
                length = high - low + 1
                room = (low - 1) + (_TOP - high)
                for extra in range(min(jokers - holes, room, self.max_run - length) + 1):
                    total = length + extra
                    if total < self.min_group:
                        continue
                    self.path.append((_RUN, colour, low, high, extra))
                    if self.solve(i, jokers - holes - extra, has_long or total >= self.min_long):
                        found = True
                        break
                    self.path.pop()
                if found:
                    break
            high += 1
            if high > _TOP or high - low + 1 > self.max_run:
                break
            j = i + high - low
            if counts[j]:
                counts[j] -= 1
                taken.append(j)
                top_real = True
            else:
                holes += 1
                top_real = False
                if holes > jokers:
                    break
        for j in taken:
            counts[j] += 1
        return found

    def _wrap_runs(self, i: int, colour: int, jokers: int, has_long: bool) -> bool:
        """Runs that end ``...12 13 1``, the 1 being the tile at ``i``."""
        counts = self.counts
        base = colour * _STRIDE
        taken: list[int] = []
        holes = 0
        found = False
        for low in range(_TOP, 0, -1):
            length = _TOP - low + 2
            if length > self.max_run:
                break
            j = base + low
            if counts[j]:
                counts[j] -= 1
                taken.append(j)
            else:
                holes += 1
                if holes > jokers:
                    break
            if length < self.min_group:
                continue
            self.path.append((_WRAP, colour, low))
            if self.solve(i, jokers - holes, has_long or length >= self.min_long):
                found = True
                break
            self.path.pop()
        for j in taken:
            counts[j] += 1
        return found

    def _sets(self, i: int, colour: int, number: int, jokers: int, has_long: bool) -> bool:
        counts = self.counts
        others = [c for c in range(4) if c != colour]
        present = [c for c in others if counts[c * _STRIDE + number]]
        missing = len(others) - len(present)
        for size in range(max(self.min_group, 3), 5):
            need = size - 1
            for reals in range(min(need, len(present)) + 1):
                filler = need - reals
                # A joker only stands for a colour that is not in hand (see module doc).
                if filler > missing or filler > jokers:
                    continue
                for chosen in combinations(present, reals):
                    for c in chosen:
                        counts[c * _STRIDE + number] -= 1
                    mask = sum(1 << c for c in chosen)
                    self.path.append((_SET, number, colour, mask, filler))
                    ok = self.solve(i, jokers - filler, has_long)
                    for c in chosen:
                        counts[c * _STRIDE + number] += 1
                    if ok:
                        return True
                    self.path.pop()
        return False


def find_winning_arrangement(
    hand: Sequence[Face], joker: Face, rules: RuleSet = DEFAULT_RULES
) -> list[Group] | None:
    """A winning arrangement of a 14-tile hand, or ``None`` if the hand does not win.

    Every tile is in exactly one valid group and at least one group is a run of
    ``rules.min_long_run`` or more tiles (jokers count toward its length). Both tiles of the
    ``joker`` face are wild; a doll plays only as a plain tile of the joker's face.
    """
    return _find(hand, joker, rules, set())


def _find(
    hand: Sequence[Face], joker: Face, rules: RuleSet, failed: set[_State]
) -> list[Group] | None:
    if len(hand) != rules.hand_size:
        return None
    tiles = _Hand(hand, joker)
    search = _WinSearch(tiles.counts, rules, failed)
    if not search.solve(0, tiles.jokers, False):
        return None
    return tiles.groups(search.path)


def winning_discards(
    hand: Sequence[Face], kishpa: Face, rules: RuleSet = DEFAULT_RULES
) -> list[WinningDiscard]:
    """Every distinct discard from a 15-tile hand that leaves a winning 14.

    One entry per distinct discarded face (the first position holding it), in hand order;
    arrangements use positions into the 15-tile hand. Empty if no discard wins.
    """
    if len(hand) != rules.hand_size + 1:
        raise ValueError(f"a hand before its discard has {rules.hand_size + 1} tiles")
    joker = joker_of(kishpa)
    result: list[WinningDiscard] = []
    seen: set[Face] = set()
    failed: set[_State] = set()
    for position, discard in enumerate(hand):
        if discard in seen:
            continue
        seen.add(discard)
        rest = [*hand[:position], *hand[position + 1 :]]
        groups = _find(rest, joker, rules, failed)
        if groups is None:
            continue
        # Positions past the discard shift back by one in ``rest``.
        back = [p if p < position else p + 1 for p in range(len(rest))]
        arrangement = [Group(g.kind, tuple(back[p] for p in g.positions)) for g in groups]
        payout = win_payout(rest, discard, kishpa, rules)
        result.append(WinningDiscard(position, arrangement, payout))
    return result


class _BestSearch:
    """Most tiles in valid groups (ties: a long run); memoises each state's best score."""

    __slots__ = ("best", "counts", "max_run", "min_group", "min_long", "wrap")

    def __init__(self, counts: list[int], rules: RuleSet) -> None:
        self.counts = counts
        self.best: dict[_State, tuple[int, _Step | None]] = {}
        self.min_group = rules.min_group_size
        self.min_long = rules.min_long_run
        self.max_run = rules.max_run_length
        self.wrap = rules.allow_run_12_13_1

    def score(self, jokers: int, has_long: bool, left: int) -> int:
        """Twice the tiles still placeable, plus one if the result has a long run.

        ``left`` is the number of plain tiles still in ``counts``.
        """
        counts = self.counts
        i = 0
        while i < _SLOTS and counts[i] == 0:
            i += 1
        key = (bytes(counts), jokers, has_long)
        known = self.best.get(key)
        if known is not None:
            return known[0]
        if i == _SLOTS:
            sizes = _joker_runs(jokers, self.max_run)
            if sizes and sizes[0] >= 0:
                value = 2 * jokers + int(has_long or any(s >= self.min_long for s in sizes))
                self.best[key] = (value, (_JOKERS, jokers))
            else:
                self.best[key] = (int(has_long), None)
            return self.best[key][0]
        colour, number = divmod(i, _STRIDE)
        # Nothing beats every tile grouped with a long run: stop looking once that is found.
        ceiling = 2 * (left + jokers) + 1
        counts[i] -= 1
        best_value = -1
        best_step: _Step = (_SKIP, i)
        for step, used_jokers, taken, long_run in self._options(i, colour, number, jokers):
            for j in taken:
                counts[j] -= 1
            value = 2 * (1 + len(taken) + used_jokers) + self.score(
                jokers - used_jokers, has_long or long_run, left - 1 - len(taken)
            )
            for j in taken:
                counts[j] += 1
            if value > best_value:
                best_value, best_step = value, step
                if value == ceiling:
                    break
        if best_value < ceiling:
            skipped = self.score(jokers, has_long, left - 1)
            if skipped > best_value:
                best_value, best_step = skipped, (_SKIP, i)
        counts[i] += 1
        self.best[key] = (best_value, best_step)
        return best_value

    def _options(
        self, i: int, colour: int, number: int, jokers: int
    ) -> list[tuple[_Step, int, list[int], bool]]:
        """Every group the tile at ``i`` can start: (step, jokers used, other slots, long)."""
        counts = self.counts
        options: list[tuple[_Step, int, list[int], bool]] = []
        taken: list[int] = []
        holes = 0
        for high in range(number, min(_TOP, number + self.max_run - 1) + 1):
            j = i + high - number
            if high > number:
                if counts[j]:
                    taken.append(j)
                else:
                    holes += 1
                    if holes > jokers:
                        break
                    continue
            length = high - number + 1
            room = (number - 1) + (_TOP - high)
            for extra in range(min(jokers - holes, room, self.max_run - length) + 1):
                total = length + extra
                if total >= self.min_group:
                    step = (_RUN, colour, number, high, extra)
                    options.append((step, holes + extra, list(taken), total >= self.min_long))
        if self.wrap and number == 1:
            base = colour * _STRIDE
            taken = []
            holes = 0
            for low in range(_TOP, 0, -1):
                length = _TOP - low + 2
                if length > self.max_run:
                    break
                if counts[base + low]:
                    taken.append(base + low)
                else:
                    holes += 1
                    if holes > jokers:
                        break
                if length >= self.min_group:
                    options.append(
                        ((_WRAP, colour, low), holes, list(taken), length >= self.min_long)
                    )
        present = [c for c in range(4) if c != colour and counts[c * _STRIDE + number]]
        missing = 3 - len(present)
        for size in range(max(self.min_group, 3), 5):
            need = size - 1
            for reals in range(min(need, len(present)) + 1):
                filler = need - reals
                if filler > missing or filler > jokers:
                    continue
                for chosen in combinations(present, reals):
                    step = (_SET, number, colour, sum(1 << c for c in chosen), filler)
                    slots = [c * _STRIDE + number for c in chosen]
                    options.append((step, filler, slots, False))
        return options

    def path(self, jokers: int) -> list[_Step]:
        """Replay the best choices from the start state."""
        counts = self.counts
        has_long = False
        steps: list[_Step] = []
        while True:
            key = (bytes(counts), jokers, has_long)
            _, step = self.best[key]
            if step is None:
                return steps
            if step[0] == _JOKERS:
                return steps + [(_JOKERS, size) for size in _joker_runs(step[1], self.max_run)]
            i = 0
            while counts[i] == 0:
                i += 1
            counts[i] -= 1
            if step[0] == _SKIP:
                continue
            colour, number = divmod(i, _STRIDE)
            for option, used, taken, long_run in self._options(i, colour, number, jokers):
                if option == step:
                    for j in taken:
                        counts[j] -= 1
                    jokers -= used
                    has_long = has_long or long_run
                    steps.append(step)
                    break


def best_arrangement(
    hand: Sequence[Face], joker: Face, rules: RuleSet = DEFAULT_RULES
) -> list[Group]:
    """Disjoint valid groups covering as many tiles of the hand as possible (any size).

    Best effort for hints and bots: the hand need not win; ties prefer an arrangement with
    a run of ``rules.min_long_run`` or more. Tiles left out appear in no group.
    """
    tiles = _Hand(hand, joker)
    search = _BestSearch(list(tiles.counts), rules)
    search.score(tiles.jokers, False, sum(tiles.counts))
    steps = search.path(tiles.jokers)
    return tiles.groups(steps)
