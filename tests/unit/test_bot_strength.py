"""The claim of docs/BENCHMARKS.md, checked small: solver bots beat draw-and-discard bots
clearly, in both games (the 200-game run is ``benchmarks/bench_bots.py``).

"Clearly" is a statistical bound, not a recorded result: over the seeded games somebody won,
the solver's wins must be so many that two equally strong bots would reach them with
probability at most ``ALPHA`` (a one-sided sign test; the threshold is computed here from
the binomial distribution, independently of the benchmark's code).
"""

from __future__ import annotations

from math import comb

import pytest

from devkit.bot_matches import GAMES

pytestmark = pytest.mark.unit

ALPHA = 0.01
GAMES_PLAYED = {"kishpa": 16, "hand": 12}
"""Few enough for the CI budget (a few seconds), enough for the bound to be reachable."""


def wins_needed(decided: int, alpha: float = ALPHA) -> int:
    """The fewest wins k out of ``decided`` with P(X >= k) <= alpha for X ~ Bin(decided, 1/2)."""
    tail = 0
    for k in range(decided, -1, -1):
        tail += comb(decided, k)
        if tail / 2**decided > alpha:
            return k + 1
    return 0  # pragma: no cover - alpha >= 1


def test_the_threshold_is_the_binomial_bound() -> None:
    # Hand-computed: 8 of 8 has p = 1/256; 7 of 8 has p = 9/256 > 0.01.
    assert wins_needed(8) == 8
    # 10 games: P(X >= 9) = 11/1024 > 0.01, P(X >= 10) = 1/1024.
    assert wins_needed(10) == 10
    # 24 games: P(X >= 19) = 55455/2^24 = 0.0033, P(X >= 18) = 190051/2^24 = 0.0113.
    assert wins_needed(24) == 19
    # 16 games: P(X >= 14) = 137/65536 = 0.0021, P(X >= 13) = 697/65536 = 0.0106.
    assert wins_needed(16) == 14
    # 12 games: P(X >= 11) = 13/4096 = 0.0032, P(X >= 10) = 79/4096 = 0.0193.
    assert wins_needed(12) == 11


@pytest.mark.parametrize("game", sorted(GAMES_PLAYED))
def test_solver_bots_beat_draw_and_discard_bots(game: str) -> None:
    outcomes = [GAMES[game](("normal", "easy"), index) for index in range(GAMES_PLAYED[game])]
    solver = sum(o.winner == "normal" for o in outcomes)
    easy = sum(o.winner == "easy" for o in outcomes)
    decided = solver + easy
    # Both levels started half the games.
    assert sum(o.starter_level == "normal" for o in outcomes) == GAMES_PLAYED[game] // 2
    assert decided >= GAMES_PLAYED[game] // 2, "too many games without a winner to judge"
    assert solver >= wins_needed(decided), f"solver {solver}, easy {easy} of {decided} decided"
