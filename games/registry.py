"""Every game of the platform, registered once (:class:`games.spec.GameSpec`).

Adding a game: its package ``games/<game>/`` with a ``GAME`` spec, one line in :data:`GAMES`,
and a line in each layer's own registry (``services/table/engines.py``,
``services/table/game_wire.py``, ``archive/round_fold.py``, ``sdk/fairness.py``,
``cli/play/games.py``); CONTRIBUTING.md lists every file.
"""

from __future__ import annotations

from games import hand, kishpa
from games.spec import GameSpec

GAMES: tuple[GameSpec, ...] = (kishpa.GAME, hand.GAME)
"""Every game, in the order clients list them."""

BY_NAME: dict[str, GameSpec] = {g.name: g for g in GAMES}
BY_WIRE: dict[int, GameSpec] = {g.wire_value: g for g in GAMES}
NAMES: tuple[str, ...] = tuple(BY_NAME)


def game(name: str) -> GameSpec:
    """The game called ``name`` (``KeyError`` for an unknown one)."""
    return BY_NAME[name]
