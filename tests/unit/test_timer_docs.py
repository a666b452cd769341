"""One source for the table timers (issue 33): the rules pages state the defaults the service
gives a table that leaves them unset (games/table.py, KISHPA_TABLE_*), and the settings'
defaults are those."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from games import table as rules_table
from services.common.settings import Settings

pytestmark = pytest.mark.unit

RULES = Path(__file__).resolve().parents[2] / "docs" / "rules"


def _seconds(text: str, pattern: str) -> set[int]:
    return {int(found) for found in re.findall(pattern, text)}


@pytest.mark.parametrize("page", ["kishpa.md", "hand.md"])
def test_the_rules_pages_state_the_served_timers(page: str) -> None:
    text = " ".join((RULES / page).read_text().split())
    turn = _seconds(text, r"\*turn time\*,? \(?(\d+) s by default")
    assert turn == {30}, f"{page} states the turn time as {turn}"
    pause = _seconds(text, r"after the table's pause \((\d+) s by default")
    assert pause == {30}, f"{page} states the pause between deals as {pause}"


def test_the_defaults_are_the_ones_the_pages_state() -> None:
    settings = Settings()
    assert settings.table_turn_seconds == rules_table.DEFAULT_TURN_SECONDS == 30
    assert settings.table_next_deal_pause_ms == rules_table.DEFAULT_NEXT_DEAL_PAUSE_MS == 30_000
    defaults = settings.table_defaults()
    assert (defaults.turn_seconds, defaults.next_round_pause_ms) == (30, 30_000)
    assert rules_table.TableSettings() == defaults
