"""How soon the normal Hand bot opens against a seat that only draws and throws the drawn
card, with its discard rule before opening (``choose_opening_discard``) and, as the baseline
in the same run, with the rule it used before 2026-12-07 (the highest loose card,
``choose_discard``, which it still uses once open).

Two seats on the pure engine, seeded deals, who starts alternating. Reports the deals in
which the bot never opened and the mean of its opening turn (a deal without an opening counts
as its last bot turn), and the seconds spent.

Usage: ``.venv/bin/python benchmarks/bench_hand_opening.py [deals]`` (default 200).
"""

from __future__ import annotations

import sys
import time

from games.fair import FairStream
from games.hand import bot
from games.hand.actions import Discard, DrawStock
from games.hand.deal import new_deal
from games.hand.deal_state import Phase
from games.hand.turns import apply


def opening_turn(index: int) -> tuple[int, bool]:
    """The bot's (seat 1) turn count when it opened, or at the deal's end; and whether it did."""
    seed = index.to_bytes(4, "big") * 20
    state, _ = new_deal(seed, [], 2, index % 2)
    stream = FairStream(seed, [], tag="bots")
    turns = 0
    while state.phase is not Phase.ENDED:
        if state.turn == 0:
            if state.phase is Phase.DRAW:
                state, _ = apply(state, DrawStock(0))
            state, _ = apply(state, Discard(0, state.hands[0][-1]))
            continue
        turns += 1
        state, events = bot.play_bot_turn(state, stream)
        if any(e.kind == "melds_laid" for e in events):
            return turns, True
    return turns, False


def measure(deals: int) -> tuple[int, float, float]:
    start = time.perf_counter()
    results = [opening_turn(i) for i in range(deals)]
    seconds = time.perf_counter() - start
    closed = sum(not opened for _, opened in results)
    return closed, sum(t for t, _ in results) / deals, seconds


def main() -> None:
    deals = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    now = measure(deals)
    kept = bot.choose_opening_discard
    bot.choose_opening_discard = bot.choose_discard  # the old rule, for the baseline only
    try:
        before = measure(deals)
    finally:
        bot.choose_opening_discard = kept
    print(f"{deals} deals against a seat that draws and throws")
    print("| discard before opening | deals never opened | mean opening turn | seconds |")
    print("|---|---|---|---|")
    for name, (closed, mean, seconds) in (
        ("highest loose card (before)", before),
        ("choose_opening_discard", now),
    ):
        print(f"| {name} | {closed} | {mean:.1f} | {seconds:.1f} |")


if __name__ == "__main__":
    main()
