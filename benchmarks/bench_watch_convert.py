"""Converting a table's stream entries for its watchers: once per watcher, or once per form.

Every watcher of a table receives each stream entry as its typed message. Converted for each
watcher on its own, an entry seen by four seated players and a spectator is converted five
times; shared (``Converter.shared_event``), it is converted once per form (the seat that
sees its private part, and everyone else), and the other watchers take the same message.

The entries are those of whole seeded games played by the engines themselves (every seat on
auto-play: Kishpa rounds until the table closes, a Hand game of 7 deals), with ``watchers``
viewers per table (seats 0-3, then spectators). Rounds alternate the two ways in one
process; the CPU time per entry of the best round of each is printed, and their ratio.

    .venv/bin/python benchmarks/bench_watch_convert.py [rounds] [watchers]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # benchmarks/ and devkit/ run from the tree

from services.table.convert import Converter  # noqa: E402
from services.table.engine import GameEngine, Table, TableSettings  # noqa: E402
from services.table.hand_engine import HandEngine  # noqa: E402
from services.table.kishpa_engine import KishpaEngine  # noqa: E402
from shared.stream import StoredEvent  # noqa: E402

PLAYERS = ["ann", "bob", "cat", "dan"]


def _game_entries(engine: GameEngine, seed_byte: int) -> list[StoredEvent]:
    """The stream of one whole game, every seat on auto-play (the engine plays them)."""
    table = Table(
        table_id=f"t{seed_byte}",
        game_name=engine.name,
        creator=PLAYERS[0],
        settings=TableSettings(seats=4, turn_seconds=5, next_round_pause_ms=10),
        created_ms=0,
        players=list(PLAYERS),
        status="playing",
        autoplay=[0, 1, 2, 3],
    )
    seed = bytes((seed_byte + i) % 256 for i in range(80))
    events = []
    step = engine.start(table, seed, 0)
    now = 0
    for _ in range(100_000):
        events += step.events
        table.game, table.deadline = step.game, step.deadline
        if step.closed:
            break
        now += 10_000
        step = engine.on_deadline(table, seed, now)
    return [StoredEvent(f"{1_700_000_000_000 + n}-0", e) for n, e in enumerate(events)]


def _convert_all(
    tables: list[tuple[str, str, list[StoredEvent]]], viewers: list[int | None], shared: bool
) -> float:
    """CPU seconds to convert every entry for every viewer of every table."""
    convert = Converter(lambda game, tile: (KISHPA if game == "kishpa" else HAND).face(tile))
    began = time.process_time()
    for game, table_id, entries in tables:
        for entry in entries:
            for viewer in viewers:
                visible = entry.event.for_viewer(viewer)
                if visible is None:
                    continue
                stored = StoredEvent(entry.id, visible)
                if shared:
                    convert.shared_event(game, table_id, stored)
                else:
                    convert.event(game, stored)
    return time.process_time() - began


KISHPA = KishpaEngine()
HAND = HandEngine()


def main(rounds: int, watchers: int) -> None:
    tables = [
        ("kishpa", "k1", _game_entries(KISHPA, 1)),
        ("kishpa", "k2", _game_entries(KISHPA, 2)),
        ("hand", "h1", _game_entries(HAND, 3)),
    ]
    entries = sum(len(e) for _g, _t, e in tables)
    viewers: list[int | None] = [*range(min(watchers, 4)), *[None] * max(0, watchers - 4)]
    best = {False: float("inf"), True: float("inf")}
    for r in range(rounds):
        for shared in (False, True) if r % 2 == 0 else (True, False):
            best[shared] = min(best[shared], _convert_all(tables, viewers, shared))
    print(
        f"{entries} stream entries of 3 games (2 Kishpa, 1 Hand), {watchers} watchers each "
        f"(seats {viewers}), best of {rounds} alternating rounds, CPU time"
    )
    each = best[False] / entries * 1e6
    once = best[True] / entries * 1e6
    print(f"  converted for each watcher (before)  {each:7.1f} us per entry")
    print(f"  converted once per form (now)        {once:7.1f} us per entry")
    print(f"  now / before: x{once / each:.2f}")


if __name__ == "__main__":
    main(
        int(sys.argv[1]) if len(sys.argv) > 1 else 10, int(sys.argv[2]) if len(sys.argv) > 2 else 5
    )
