"""The service's bots in the Kishpa engine: they answer a reveal window at once, so the
window then waits only for the people at the table."""

from __future__ import annotations

import hashlib

import pytest

from games.kishpa import round as rnd
from services.table.engine import Table, TableSettings
from services.table.kishpa_engine import KishpaEngine

pytestmark = pytest.mark.unit

PLAYERS = ["ann", "bot-1-t1", "bot-2-t1", "bot-3-t1"]


def _seed(n: int) -> bytes:
    return hashlib.sha512(f"bots-{n}".encode()).digest() + bytes(16)


def _table() -> Table:
    return Table(
        table_id="t1",
        game_name="kishpa",
        creator="ann",
        settings=TableSettings(seats=4, bots=3),
        created_ms=0,
        players=list(PLAYERS),
        status="playing",
        bots=PLAYERS[1:],
        autoplay=[1, 2, 3],
    )


def test_bots_answer_a_start_reveal_window_at_once_and_leave_it_to_the_human() -> None:
    engine = KishpaEngine()
    windows = 0
    for n in range(400):
        table = _table()
        step = engine.start(table, _seed(n), now_ms=0)
        table.game = step.game
        state = rnd.RoundState.from_dict(step.game["round"])
        opened = [e for e in step.events if e.type == "reveal_window_opened"]
        if not opened:
            continue
        windows += 1
        # Any window still open waits for the human alone; the bots acted in the same step.
        if rnd.waiting_for(state) == "window":
            assert rnd.window_waits_for(state) == [0]
            assert step.deadline is not None
            assert step.deadline.kind == "window"
        acted = [e.seat for e in step.events if e.type in ("reveal_declined", "kishpa_revealed")]
        assert set(acted) <= {1, 2, 3}
        if windows >= 3:
            break
    assert windows >= 1, "no deal opened a start reveal window"


def test_without_bots_a_window_waits_for_everyone() -> None:
    engine = KishpaEngine()
    for n in range(400):
        table = _table()
        table.bots = []
        step = engine.start(table, _seed(n), now_ms=0)
        state = rnd.RoundState.from_dict(step.game["round"])
        if rnd.waiting_for(state) == "window":
            assert len(rnd.window_waits_for(state)) > 1
            return
    pytest.fail("no deal opened a start reveal window")
