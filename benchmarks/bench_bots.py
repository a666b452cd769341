"""Win rates of the house bots' two levels: the solver (``normal``) against draw-and-discard
(``easy``), two seats, for each game, on the pure rules engines (``devkit.bot_matches``).

A Kishpa game is one round; a Hand game is a whole game of 7 deals. The starter alternates
between the two levels. Every game is seeded (``devkit.bot_matches.seed_for``), so a run is
reproducible to the game. For each level: wins, the win rate over all games with its 95%
Wilson score interval, and the one-sided sign test of "the solver wins no more often than
draw-and-discard" over the games somebody won (exact binomial tail, p = 1/2). At Hand also
the deals each level won and its mean total.

Baseline in the same run: the solver against itself (half as many games), the win rate of
seat 0, which should sit near 50% if the harness favours neither seat.

Usage: ``.venv/bin/python benchmarks/bench_bots.py [games] [kishpa|hand ...]``
(default 200 games of each game).
"""

from __future__ import annotations

import math
import sys
import time

from devkit.bot_matches import GAMES, GameOutcome

LEVELS = ("normal", "easy")
Z95 = 1.959963984540054
"""The two-sided 95% quantile of the standard normal."""


def wilson(wins: int, games: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of a binomial proportion (``wins`` out of ``games``)."""
    if games == 0:
        return 0.0, 1.0
    p = wins / games
    denominator = 1 + z * z / games
    centre = (p + z * z / (2 * games)) / denominator
    half = z * math.sqrt(p * (1 - p) / games + z * z / (4 * games * games)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def sign_test(wins: int, decided: int) -> float:
    """P(X >= wins) for X ~ Binomial(decided, 1/2): how likely so many solver wins would be
    if both levels were equally strong."""
    tail: int = sum(math.comb(decided, k) for k in range(wins, decided + 1))
    return tail / (1 << decided)


def run(game: str, count: int, levels: tuple[str, str] = LEVELS) -> list[GameOutcome]:
    play = GAMES[game]
    # The solver sits at seat 0; seat index % 2 starts, so each level starts half the games.
    return [play(levels, index) for index in range(count)]


def mirror(game: str, count: int) -> None:
    """The solver against itself: how often seat 0 wins (the harness's own bias)."""
    start = time.perf_counter()
    outcomes = run(game, count, ("normal", "normal"))
    seconds = time.perf_counter() - start
    seat0 = sum(o.winner_seat == 0 for o in outcomes)
    decided = sum(o.winner_seat is not None for o in outcomes)
    low, high = wilson(seat0, decided)
    print(
        f"baseline, solver against solver ({count} games, {seconds:.1f} s): seat 0 won "
        f"{seat0} of {decided} decided = {seat0 / max(decided, 1):.1%} "
        f"(95% interval {low:.1%} - {high:.1%})"
    )


def report(game: str, outcomes: list[GameOutcome], seconds: float) -> None:
    count = len(outcomes)
    wins = {level: sum(o.winner == level for o in outcomes) for level in LEVELS}
    nobody = count - sum(wins.values())
    print(f"\n{game}: {count} games, {seconds:.1f} s ({1000 * seconds / count:.0f} ms a game)")
    print("| level | wins | win rate | 95% interval (Wilson) |")
    print("|---|---|---|---|")
    for level in LEVELS:
        low, high = wilson(wins[level], count)
        rate = wins[level] / count
        print(f"| {level} | {wins[level]} | {rate:.1%} | {low:.1%} - {high:.1%} |")
    print(f"| nobody (pile out / tie) | {nobody} | {nobody / count:.1%} | |")
    starters = [o for o in outcomes if o.starter_level == "normal"]
    started_wins = sum(o.winner == "normal" for o in starters)
    print(f"solver wins when it starts: {started_wins}/{len(starters)}")
    decided = count - nobody
    p = sign_test(wins["normal"], decided)
    print(f"sign test, solver vs draw-and-discard over {decided} decided games: p = {p:.3g}")
    turns = sorted(o.turns for o in outcomes)
    print(f"turns a game: median {turns[count // 2]}, range {turns[0]}-{turns[-1]}")
    if outcomes[0].deals_won:
        deals = sum(sum(o.deals_won) for o in outcomes)
        for seat, level in enumerate(LEVELS):
            won = sum(o.deals_won[seat] for o in outcomes)
            mean = sum(o.totals[seat] for o in outcomes) / count
            print(f"{level}: won {won} of {deals} deals, mean total {mean:+.0f} points")


def main() -> int:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    games = sys.argv[2:] or list(GAMES)
    for game in games:
        start = time.perf_counter()
        outcomes = run(game, count)
        report(game, outcomes, time.perf_counter() - start)
        mirror(game, max(2, count // 2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
