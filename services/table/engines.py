"""The table service's engine of every game (``games.registry``), by game name.

Adding a game adds its engine class here (one line); a unit test checks that every
registered game has an engine and every engine a registered game.
"""

from __future__ import annotations

from collections.abc import Callable

from services.table.engine import GameEngine
from services.table.hand_engine import HandEngine
from services.table.kishpa_engine import KishpaEngine

ENGINES: tuple[Callable[[], GameEngine], ...] = (KishpaEngine, HandEngine)


def engines() -> dict[str, GameEngine]:
    """The games this service plays, by name."""
    made = [make() for make in ENGINES]
    return {engine.name: engine for engine in made}
