"""Each game's own part of the ``kishpa.table.v1`` messages, by game name.

A table's settings carry the game's options (``TableSettings.game_options``) and a round
carries the game's public facts (``Round.game_round``); everything else in the messages is
the same for every game. Adding a game adds its converter here (one line); a unit test checks
every registered game (``games.registry``) has one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from kishpa.common.v1 import common_pb2
from kishpa.table.v1 import table_pb2
from services.table.engine import PublicFacts, TableSettings
from services.table.hand_wire import HandWire
from services.table.kishpa_wire import KishpaWire

TileOf = Callable[[int], common_pb2.Tile]
"""A tile id of the table's game as its message (``Tile{id, face}``)."""


class GameWire(Protocol):
    """One game's options and round facts on the wire."""

    name: str

    def options_from(self, msg: table_pb2.TableSettings) -> dict[str, Any]:
        """The game's options a CreateTable asks for (empty when it sets none)."""

    def options_message(self, settings: TableSettings, msg: table_pb2.TableSettings) -> None:
        """Set the game's options of a table's settings in ``msg``."""

    def round_message(self, public: PublicFacts, tile: TileOf, msg: table_pb2.Round) -> None:
        """Set the game's branch of a round (``Round.game_round``) from the view's facts
        (the game's own type; another is a ``TypeError``)."""

    def result_message(self, public: PublicFacts, tile: TileOf, msg: table_pb2.RoundResult) -> None:
        """Add the game's own facts of how a round ended to ``msg``."""


WIRES: Mapping[str, GameWire] = {w.name: w for w in (KishpaWire(), HandWire())}
"""Every game's converter, by game name."""


def options_from(msg: table_pb2.TableSettings) -> dict[str, Any]:
    """The options a CreateTable asks for, whichever game's they are (the game's engine
    refuses options it does not know)."""
    out: dict[str, Any] = {}
    for wire in WIRES.values():
        out.update(wire.options_from(msg))
    return out
