"""Whole Kishpa games of bots through the table service's Kishpa engine, without Redis: what
the engine tests and the wire-event tests play (the service's part of a step, applied by hand)."""

from __future__ import annotations

import hashlib

from games.fair import FairStream
from games.kishpa import bot
from games.kishpa import round as rnd
from services.table.engine import Action, Step, Table, TableSettings
from services.table.kishpa_engine import KishpaEngine

PLAYERS = ["ann", "bob", "cat", "dan"]


def seed_bytes(n: int) -> bytes:
    """The ``n``-th of a fixed series of seeds (a seed is 80 bytes)."""
    return hashlib.sha512(f"seed-{n}".encode()).digest() + bytes(16)


def new_table(players: list[str] = PLAYERS) -> Table:
    """A Kishpa table of ``players``, playing, with short turns and pauses."""
    return Table(
        table_id="t1",
        game_name="kishpa",
        creator=players[0],
        settings=TableSettings(seats=len(players), turn_seconds=5, next_round_pause_ms=10),
        created_ms=0,
        players=list(players),
        status="playing",
    )


def apply_step(table: Table, step: Step) -> None:
    """What the service does with a step (without Redis)."""
    table.game = step.game
    table.deadline = step.deadline
    if step.closed:
        table.status = "closed"


def bot_action(table: Table, stream: FairStream) -> tuple[int, Action] | None:
    """The first seat the bot would move for, and its move as a table action."""
    state = rnd.RoundState.from_dict(table.game["round"])
    for seat in range(len(table.players)):
        move = bot.choose_action(rnd.view_for(state, seat), stream, state.ruleset)
        if move is None:
            continue
        if isinstance(move, rnd.Draw):
            return seat, Action("draw", {"source": move.source})
        if isinstance(move, rnd.Discard):
            return seat, Action("discard", {"tile": move.tile})
        if isinstance(move, rnd.Win):
            return seat, Action("win", {"tile": move.tile, "arrangement": move.arrangement})
        if isinstance(move, rnd.Reveal):
            return seat, Action("reveal")
        if isinstance(move, rnd.Pass):
            return seat, Action("decline_reveal")
    return None


def play_game(rounds_before_last: int, seed: int) -> tuple[Table, list[Step]]:
    """Bots play a whole game; the last round is pressed after ``rounds_before_last``."""
    engine = KishpaEngine()
    table = new_table()
    steps = [engine.start(table, seed_bytes(seed), 0)]
    apply_step(table, steps[-1])
    stream = FairStream(seed_bytes(seed + 1), (), "test")
    for now in range(1, 20_000):
        if table.status == "closed":
            break
        state = rnd.RoundState.from_dict(table.game["round"])
        if state.phase == rnd.ENDED:
            if state.round_no == rounds_before_last:
                step = engine.press_last_round(table, now)
                apply_step(table, step)
                steps.append(step)
            step = engine.on_deadline(table, seed_bytes(seed + now), now)
        else:
            chosen = bot_action(table, stream)
            if chosen is None:  # a window nobody acts in: it closes at its deadline
                step = engine.on_deadline(table, seed_bytes(seed + now), now)
            else:
                step = engine.act(table, chosen[0], chosen[1], now)
        apply_step(table, step)
        steps.append(step)
    assert table.status == "closed"
    return table, steps
