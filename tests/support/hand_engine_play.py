"""Whole Hand games of bots through the table service's Hand engine, without Redis: what the
engine tests and the wire-event tests play (the service's part of a step, applied by hand)."""

from __future__ import annotations

from typing import Any

from devkit.hand_table_actions import table_action
from games.fair import FairStream
from games.hand.bot import next_action
from games.hand.deal_state import DealState, seat_view
from services.table.engine import Step, Table, TableSettings
from services.table.hand_engine import HandEngine
from shared.stream import TableEvent

PLAYERS = ["ann", "bob", "cat", "dan"]
SEED = bytes(range(80))


def new_table(seats: int = 4, **settings: int) -> Table:
    return Table(
        table_id="t1",
        game_name="hand",
        creator=PLAYERS[0],
        settings=TableSettings(seats=seats, **settings),
        created_ms=0,
        players=PLAYERS[:seats],
        status="playing",
    )


def apply_step(table: Table, step: Step) -> None:
    """What the service does with a step (without Redis)."""
    table.game = step.game
    table.deadline = step.deadline
    if step.closed:
        table.status = "closed"
        table.deadline = None


def deal_of(table: Table) -> DealState:
    return DealState.from_dict(table.game["deal"])


def play_game(
    engine: HandEngine, table: Table, check: Any = None
) -> tuple[list[TableEvent], list[Step]]:
    """Bots play a whole game through the engine; ``check(table)`` runs after every step."""
    steps = [engine.start(table, SEED, 0)]
    apply_step(table, steps[0])
    stream = FairStream(SEED, (), "bots")
    now = 0
    for _ in range(20_000):
        if table.status == "closed":
            break
        now += 10
        deal = deal_of(table)
        if table.deadline is not None and table.deadline.kind == "next_round":
            step = engine.on_deadline(table, SEED, now)
        else:
            move = next_action(seat_view(deal, deal.turn), deal.rules, stream)
            step = engine.act(table, deal.turn, table_action(move), now)
        apply_step(table, step)
        steps.append(step)
        if check is not None:
            check(table)
    assert table.status == "closed"
    return [e for s in steps for e in s.events], steps
