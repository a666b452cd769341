"""Cost of the Kishpa round engine, as the table service uses it.

Figures are ratios against a baseline measured in the same run:

* shuffle: ``games.fair.shuffled_deck`` vs ``random.SystemRandom().shuffle`` of 106 ids;
* one action: ``RoundState.from_dict -> apply -> to_dict`` (what the service does per move)
  vs a bare ``json.loads(json.dumps(state))`` of the same state;
* one whole bot round (deal, bots' solver calls, every transition) vs one action.

Usage: ``.venv/bin/python benchmarks/bench_round.py [rounds]`` (default 40).
"""

from __future__ import annotations

import hashlib
import json
import random
import sys
import time
from collections.abc import Callable

from games.fair import FairStream, shuffled_deck
from games.kishpa import round as kround
from games.kishpa.bot import BOT_TAG, choose_action

PLAYERS = ["a", "b", "c", "d"]


def seed_of(k: int) -> bytes:
    return hashlib.sha512(f"bench-{k}".encode()).digest() + bytes(16)


def per_call(fn: Callable[[], object], repeat: int) -> float:
    """Best of 5 rounds, seconds per call."""
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(repeat):
            fn()
        best = min(best, (time.perf_counter() - start) / repeat)
    return best


def bot_round(k: int) -> list[tuple[dict[str, object], kround.Action]]:
    """Play a round with bots; returns every (state before, action) pair."""
    seed = seed_of(k)
    state, _ = kround.new_round(PLAYERS, k % 4, seed)
    stream = FairStream(seed, [], BOT_TAG)
    moves: list[tuple[dict[str, object], kround.Action]] = []
    while state.phase != kround.ENDED:
        action: kround.Action | None = None
        for seat in kround.seats_to_act(state):
            action = choose_action(kround.view_for(state, seat), stream)
            if action is not None:
                break
        move = action if action is not None else kround.CloseWindow()
        moves.append((state.to_dict(), move))
        state, _ = kround.apply(state, move)
    return moves


def main() -> int:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 40
    system = random.SystemRandom()
    ids = list(range(106))
    t_sys = per_call(lambda: system.shuffle(ids), 2000)
    t_fair = per_call(lambda: shuffled_deck(seed_of(0)), 2000)

    start = time.perf_counter()
    recorded = [bot_round(k) for k in range(rounds)]
    t_round = (time.perf_counter() - start) / rounds
    moves = [m for r in recorded for m in r]

    def replay_actions() -> None:
        for raw, move in moves:
            state = kround.RoundState.from_dict(json.loads(json.dumps(raw)))
            new, _ = kround.apply(state, move)
            json.dumps(new.to_dict())

    def replay_json() -> None:
        for raw, _ in moves:
            json.loads(json.dumps(raw))

    t_action = per_call(replay_actions, 1) / len(moves)
    t_json = per_call(replay_json, 1) / len(moves)
    print(f"rounds {rounds}, actions {len(moves)} ({len(moves) / rounds:.1f} per round)")
    print(
        f"shuffle: SystemRandom {t_sys * 1e6:.1f} us (x1.00), fair {t_fair * 1e6:.1f} us "
        f"(x{t_fair / t_sys:.2f})"
    )
    print(
        f"action: json round trip {t_json * 1e6:.1f} us (x1.00), load+apply+dump "
        f"{t_action * 1e6:.1f} us (x{t_action / t_json:.2f}), {1 / t_action:,.0f} actions/s"
    )
    print(
        f"bot round: {t_round * 1e3:.1f} ms (x{t_round / t_action:.0f} of one action), "
        f"{1 / t_round:.1f} rounds/s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
