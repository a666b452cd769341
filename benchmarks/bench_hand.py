"""Cost of the Hand (Rummy 51) deal engine, as the table service uses it.

Figures are ratios against a baseline measured in the same run:

* one action: ``json.loads -> DealState.from_dict -> apply -> to_dict -> json.dumps`` (what the
  service does per move) vs a bare ``json.loads(json.dumps(state))`` of the same state;
* one bot decision (``next_action``: meld search, lay-offs, releases) vs one action;
* one whole bot deal (deal, every bot decision and transition) vs one action.

Usage: ``.venv/bin/python benchmarks/bench_hand.py [deals]`` (default 30).
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from collections.abc import Callable
from typing import Any

from games.fair import FairStream
from games.hand.actions import Action
from games.hand.bot import next_action
from games.hand.deal import new_deal
from games.hand.deal_state import DealState, Phase, seat_view
from games.hand.turns import apply


def seed_of(k: int) -> bytes:
    return hashlib.sha512(f"bench-hand-{k}".encode()).digest() + bytes(16)


def interleaved(fns: list[Callable[[], object]], rounds: int = 7) -> list[float]:
    """Best time of each function over ``rounds`` passes, the functions taking turns in each
    pass so that the machine's load (shared, noisy) weighs on all of them alike."""
    best = [float("inf")] * len(fns)
    for _ in range(rounds):
        for i, fn in enumerate(fns):
            start = time.perf_counter()
            fn()
            best[i] = min(best[i], time.perf_counter() - start)
    return best


def bot_deal(k: int) -> list[tuple[dict[str, Any], Action]]:
    """Play a 4-seat deal with bots; returns every (state before, action) pair."""
    seed = seed_of(k)
    state, _ = new_deal(seed, [], 4, k % 4)
    stream = FairStream(seed, [], "bench-bots")
    moves: list[tuple[dict[str, Any], Action]] = []
    while state.phase is not Phase.ENDED:
        action = next_action(seat_view(state, state.turn), state.rules, stream)
        moves.append((state.to_dict(), action))
        state, _ = apply(state, action)
    return moves


def main() -> int:
    deals = int(sys.argv[1]) if len(sys.argv) > 1 else 30
    recorded = [bot_deal(k) for k in range(deals)]
    moves = [m for r in recorded for m in r]
    texts = [json.dumps(raw) for raw, _ in moves]

    def replay_actions() -> None:
        for text, (_, move) in zip(texts, moves, strict=True):
            new, _ = apply(DealState.from_dict(json.loads(text)), move)
            json.dumps(new.to_dict())

    def replay_json() -> None:
        for text in texts:
            json.dumps(json.loads(text))

    states = [DealState.from_dict(raw) for raw, _ in moves]
    stream = FairStream(seed_of(0), [], "bench-decisions")

    def decide() -> None:
        for state in states:
            next_action(seat_view(state, state.turn), state.rules, stream)

    def play() -> None:
        for k in range(deals):
            bot_deal(k)

    n = len(moves)
    totals = interleaved([replay_json, replay_actions, decide, play])
    t_json, t_action, t_decide = (t / n for t in totals[:3])
    t_deal = totals[3] / deals
    rows = [
        ("baseline: json round trip of a state", t_json, t_json, "of the baseline"),
        ("one action (load + apply + dump)", t_action, t_json, "of the baseline"),
        ("one bot decision (next_action)", t_decide, t_action, "of an action"),
        ("one whole bot deal", t_deal, t_action, "of an action"),
    ]
    print(f"{deals} bot deals, 4 seats, {n / deals:.0f} actions per deal on average")
    for label, seconds, base, unit in rows:
        print(f"{label:<38} {seconds * 1e6:>9.0f} us  x{seconds / base:.2f} {unit}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
