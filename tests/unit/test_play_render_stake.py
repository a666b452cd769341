"""``kishpa play`` shows the table's stake beside the bowl when it is above 1 (issue 17)."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from cli.play.render import board
from kishpa.table.v1 import table_pb2

pytestmark = pytest.mark.unit


def _text(stake: int) -> str:
    view = table_pb2.TableView(
        settings=table_pb2.TableSettings(seats=2, stake=stake), bowl=100, my_seat=-1
    )
    view.round.round = 1
    view.round.kishpa.kishpa.face = "R5"
    view.round.kishpa.joker_face = "R6"
    out = io.StringIO()
    Console(file=out, width=120, color_system=None).print(board(view, {}))
    return out.getvalue()


def test_the_board_shows_a_stake_above_1_and_nothing_at_stake_1() -> None:
    assert "Bowl 100   Pile 0   Stake 50" in _text(50)
    assert "Stake" not in _text(1)
