"""Cost of a Hand move inside the table service (services/table/hand_engine.py), no I/O.

Per player action the table service loads the stored table (``json.loads`` ->
``Table.from_dict``), asks the engine (``HandEngine.act``: the deal loaded and re-checked,
the rules' ``apply``, the step), stores it (``json.dumps``) and answers with the player's
view (``HandEngine.view``). Figures are ratios against baselines measured in the same run:

* one whole action (load, act, dump, the mover's view) vs a bare
  ``json.loads(json.dumps(table))`` of the same stored table;
* the same action through the Kishpa engine (``KishpaEngine``, recorded bot rounds) vs its
  own JSON baseline, so the two games' table overheads compare;
* the answer view alone vs the whole Hand action.

Usage: ``.venv/bin/python benchmarks/bench_hand_table.py [games]`` (default 3 Hand games of
7 deals; Kishpa: as many rounds as needed for a similar number of actions).
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from collections.abc import Callable
from typing import Any

from devkit.hand_table_actions import table_action
from games.fair import FairStream
from games.hand.bot import next_action as hand_next_action
from games.hand.deal_state import DealState, seat_view
from games.kishpa import bot as kishpa_bot
from games.kishpa import round as rnd
from services.table.engine import Action, GameEngine, Step, Table, TableSettings
from services.table.hand_engine import HandEngine
from services.table.kishpa_engine import KishpaEngine

PLAYERS = ["ann", "bob", "cat", "dan"]


def seed_of(text: str) -> bytes:
    return hashlib.sha512(text.encode()).digest() + bytes(16)


def interleaved(fns: list[Callable[[], object]], rounds: int = 5) -> list[float]:
    """Best time of each function over ``rounds`` passes, taking turns within each pass so
    the shared machine's load weighs on all alike."""
    best = [float("inf")] * len(fns)
    for _ in range(rounds):
        for i, fn in enumerate(fns):
            start = time.perf_counter()
            fn()
            best[i] = min(best[i], time.perf_counter() - start)
    return best


def new_table(game: str) -> Table:
    return Table(
        table_id="bench",
        game_name=game,
        creator=PLAYERS[0],
        settings=TableSettings(seats=4, turn_seconds=60, reveal_window_seconds=5),
        created_ms=0,
        players=list(PLAYERS),
        status="playing",
    )


def apply_step(table: Table, step: Step) -> None:
    table.game = step.game
    table.deadline = step.deadline
    if step.closed:
        table.status = "closed"


Recorded = list[tuple[str, int, Action]]
"""(stored table as JSON, acting seat, action) for every player action of the games."""


def record_hand(games: int) -> Recorded:
    engine = HandEngine()
    moves: Recorded = []
    for g in range(games):
        table = new_table("hand")
        apply_step(table, engine.start(table, seed_of(f"hand-{g}"), 0))
        stream = FairStream(seed_of(f"hand-bots-{g}"), (), "bench")
        while table.status != "closed":
            if table.deadline is not None and table.deadline.kind == "next_round":
                apply_step(table, engine.on_deadline(table, seed_of(f"hand-{g}-{len(moves)}"), 0))
                continue
            deal = DealState.from_dict(table.game["deal"])
            move = table_action(hand_next_action(seat_view(deal, deal.turn), deal.rules, stream))
            moves.append((json.dumps(table.to_dict()), deal.turn, move))
            apply_step(table, engine.act(table, deal.turn, move, 0))
    return moves


def record_kishpa(actions: int) -> Recorded:
    engine = KishpaEngine()
    moves: Recorded = []
    table = new_table("kishpa")
    apply_step(table, engine.start(table, seed_of("kishpa-0"), 0))
    stream = FairStream(seed_of("kishpa-bots"), (), kishpa_bot.BOT_TAG)
    while len(moves) < actions:
        state = rnd.RoundState.from_dict(table.game["round"])
        if state.phase == rnd.ENDED or rnd.waiting_for(state) == "window":
            seed = seed_of(f"kishpa-{len(moves)}")
            apply_step(table, engine.on_deadline(table, seed, 0))
            continue
        seat = state.turn
        move = kishpa_bot.choose_action(rnd.view_for(state, seat), stream, state.ruleset)
        if move is None:
            apply_step(table, engine.on_deadline(table, seed_of(f"k-{len(moves)}"), 0))
            continue
        if isinstance(move, rnd.Draw):
            action = Action("draw", {"source": move.source})
        elif isinstance(move, rnd.Discard):
            action = Action("discard", {"tile": move.tile})
        elif isinstance(move, rnd.Win):
            groups = [list(g) for g in move.arrangement or ()]
            action = Action("win", {"tile": move.tile, "arrangement": groups})
        else:
            apply_step(table, engine.on_deadline(table, seed_of(f"k-{len(moves)}"), 0))
            continue
        moves.append((json.dumps(table.to_dict()), seat, action))
        apply_step(table, engine.act(table, seat, action, 0))
    return moves


def replay(engine: GameEngine, moves: Recorded, *, view: bool = True) -> Callable[[], None]:
    def run() -> None:
        for text, seat, action in moves:
            table = Table.from_dict(json.loads(text))
            step = engine.act(table, seat, action, 0)
            apply_step(table, step)
            json.dumps(table.to_dict())
            if view:
                engine.view(table, seat)

    return run


def views_only(engine: GameEngine, moves: Recorded) -> Callable[[], None]:
    tables = [(Table.from_dict(json.loads(text)), seat) for text, seat, _ in moves]

    def run() -> None:
        for table, seat in tables:
            engine.view(table, seat)

    return run


def json_only(moves: Recorded) -> Callable[[], None]:
    def run() -> None:
        for text, _, _ in moves:
            json.dumps(json.loads(text))

    return run


def main() -> int:
    games = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    hand = record_hand(games)
    kishpa = record_kishpa(len(hand))
    hand_engine, kishpa_engine = HandEngine(), KishpaEngine()
    hand_act, hand_json, kishpa_act, kishpa_json, hand_views = interleaved(
        [
            replay(hand_engine, hand),
            json_only(hand),
            replay(kishpa_engine, kishpa),
            json_only(kishpa),
            views_only(hand_engine, hand),
        ]
    )
    per = len(hand)
    print(f"Hand: {games} games of 7 deals, {per} player actions; Kishpa: {len(kishpa)} actions")
    rows: list[tuple[str, float, float, Any]] = [
        ("Hand action (load, act, dump, view)", hand_act, hand_json, len(hand)),
        ("Kishpa action (load, act, dump, view)", kishpa_act, kishpa_json, len(kishpa)),
    ]
    for name, measured, baseline, n in rows:
        print(
            f"{name}: {measured / n * 1e6:.0f} us vs JSON round trip {baseline / n * 1e6:.0f} us"
            f" -> x{measured / baseline:.2f}"
        )
    print(
        f"Hand view alone: {hand_views / per * 1e6:.0f} us -> x{hand_views / hand_act:.2f} "
        "of a whole Hand action"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
