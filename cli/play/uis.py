"""The terminal screen of every game (``kishpa play``), by the game's name."""

from __future__ import annotations

from collections.abc import Callable

from cli.play.games import GameAdapter
from cli.play.hand_ui import HandUI
from cli.play.kishpa_ui import KishpaUI
from cli.play.session import GameUI

UIS: dict[str, Callable[[], GameUI]] = {ui.adapter.name: ui for ui in (KishpaUI, HandUI)}


def ui_for(adapter: GameAdapter) -> GameUI:
    """The screen of the adapter's game."""
    return UIS[adapter.name]()
