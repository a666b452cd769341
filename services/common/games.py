"""The games of the platform by their wire enum (``kishpa.common.v1.Game``) and by name,
from the one registry (:mod:`games.registry`).

Every service translates the enum the same way: the table service names its engines with
these names, matchmaking keeps its queues per name.
"""

from __future__ import annotations

from games.registry import GAMES as REGISTERED
from kishpa.common.v1 import common_pb2

GAMES: dict[common_pb2.Game.ValueType, str] = {
    common_pb2.Game.ValueType(g.wire_value): g.name for g in REGISTERED
}
"""Wire enum -> game name."""
GAME_ENUMS: dict[str, common_pb2.Game.ValueType] = {name: value for value, name in GAMES.items()}
"""Game name -> wire enum."""
