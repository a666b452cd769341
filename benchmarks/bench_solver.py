"""Cost of the Kishpa hand solver (``find_winning_arrangement``) on families of 14-tile hands.

Baseline: the brute-force reference (``devkit.kishpa_reference``), run in the same process on
the first hands of each family. Figures: p50 / p99 / max microseconds per hand, hands per
second over the family, and the reference's mean time divided by the solver's (speed-up).

Families (all dealt from what the turned kishpa leaves, seeded, so every run sees the same
hands):

* random deals;
* built winning hands without jokers, and with both jokers;
* near misses (a built winning hand with one tile swapped), with both jokers;
* many duplicates: both copies of faces from a narrow window of two colours, plus jokers;
* best_arrangement and winning_discards on 15-tile hands (the hint paths), for scale.

Usage: ``.venv/bin/python benchmarks/bench_solver.py [hands per family]`` (default 3000).
"""

from __future__ import annotations

import random
import sys
import time
from collections.abc import Callable, Sequence

from devkit.kishpa_reference import (
    perturb,
    reference_winning_arrangement,
    sample_kishpa,
    sample_random_hand,
    sample_winning_hand,
)
from games.kishpa.solver import best_arrangement, find_winning_arrangement, winning_discards
from games.kishpa.tiles import COLOURS, Face, joker_of

Hand = tuple[Face, list[Face]]  # (kishpa, tiles)
REFERENCE_HANDS = 200


def built(rng: random.Random, jokers: int, near_miss: bool) -> Hand:
    """A built winning hand holding exactly ``jokers`` jokers (optionally one tile off)."""
    while True:
        kishpa = sample_kishpa(rng)
        hand = sample_winning_hand(rng, kishpa, joker_rate=0.35 if jokers else 0.0)
        if hand is None or hand.count(joker_of(kishpa)) != jokers:
            continue
        if near_miss:
            hand = perturb(rng, kishpa, hand)
            if hand.count(joker_of(kishpa)) != jokers:
                continue
        return kishpa, hand


def duplicates(rng: random.Random) -> Hand:
    """Pairs from a window of 5 numbers in 2 colours, plus both jokers: many near groups."""
    while True:
        kishpa = sample_kishpa(rng)
        joker = joker_of(kishpa)
        low = rng.randrange(1, 10)
        colours = [COLOURS[rng.randrange(0, 4)], COLOURS[rng.randrange(0, 4)]]
        window = [Face(c, n) for c in colours for n in range(low, low + 5)]
        pool = [f for f in window for _ in range(2) if f not in (kishpa, joker)]
        if len(pool) < 12:
            continue
        rng.shuffle(pool)
        return kishpa, [*pool[:12], joker, joker]


FAMILIES: dict[str, Callable[[random.Random], Hand]] = {
    "random deals": lambda rng: (k := sample_kishpa(rng), sample_random_hand(rng, k)),
    "winning, no jokers": lambda rng: built(rng, 0, near_miss=False),
    "winning, 2 jokers": lambda rng: built(rng, 2, near_miss=False),
    "near misses, 2 jokers": lambda rng: built(rng, 2, near_miss=True),
    "duplicates + 2 jokers": duplicates,
}


Solver = Callable[[Face, list[Face]], object]  # (kishpa, hand) -> anything


def per_hand(solve: Solver, hands: Sequence[Hand], repeat: int = 5) -> list[float]:
    """Seconds per hand, best of ``repeat`` calls each (a busy shared machine preempts us)."""
    times = []
    for kishpa, hand in hands:
        best = float("inf")
        for _ in range(repeat):
            start = time.perf_counter()
            solve(kishpa, hand)
            best = min(best, time.perf_counter() - start)
        times.append(best)
    return times


def fast(kishpa: Face, hand: list[Face]) -> object:
    return find_winning_arrangement(hand, joker_of(kishpa))


def reference(kishpa: Face, hand: list[Face]) -> object:
    return reference_winning_arrangement(hand, joker_of(kishpa))


def discards(kishpa: Face, hand: list[Face]) -> object:
    return winning_discards(hand, kishpa)


def best(kishpa: Face, hand: list[Face]) -> object:
    return best_arrangement(hand, joker_of(kishpa))


def percentile(sorted_values: Sequence[float], q: float) -> float:
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


def main(count: int) -> None:
    print(f"{count} hands per family; reference on the first {REFERENCE_HANDS} of each")
    print(
        f"{'family':24} {'wins':>5} {'p50 µs':>8} {'p99 µs':>8} {'max µs':>8} "
        f"{'hands/s':>9} {'ref µs':>9} {'speed-up':>9}"
    )
    for name, make in FAMILIES.items():
        rng = random.Random(f"bench-solver-{name}")
        hands = [make(rng) for _ in range(count)]
        wins = sum(fast(k, h) is not None for k, h in hands)
        times = sorted(per_hand(fast, hands))
        sample = hands[:REFERENCE_HANDS]
        ref_times = per_hand(reference, sample, repeat=3)
        speedup = sum(ref_times) / sum(per_hand(fast, sample))
        ref_mean = sum(ref_times) / len(sample)
        print(
            f"{name:24} {wins / count:5.0%} {percentile(times, 0.5) * 1e6:8.0f} "
            f"{percentile(times, 0.99) * 1e6:8.0f} {times[-1] * 1e6:8.0f} "
            f"{count / sum(times):9.0f} {ref_mean * 1e6:9.0f} {speedup:8.1f}x"
        )
    rng = random.Random("bench-solver-15")
    fifteen = []
    for _ in range(max(1, count // 10)):
        kishpa, hand = built(rng, rng.randrange(0, 3), near_miss=rng.random() < 0.5)
        rest = sample_random_hand(rng, kishpa, 105)  # the whole set left, shuffled
        for face in hand:
            rest.remove(face)
        fifteen.append((kishpa, [*hand, rest[0]]))
    for name, solve in (("winning_discards (15)", discards), ("best_arrangement (15)", best)):
        times = sorted(per_hand(solve, fifteen))
        print(
            f"{name:24} {'':>5} {percentile(times, 0.5) * 1e6:8.0f} "
            f"{percentile(times, 0.99) * 1e6:8.0f} {times[-1] * 1e6:8.0f} "
            f"{len(times) / sum(times):9.0f}"
        )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3000)
