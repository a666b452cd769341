"""The games of the platform by their wire enum (``kishpa.common.v1.Game``) and by name.

Every service translates the enum the same way: the table service names its engines with
these names, matchmaking keeps its queues per name.
"""

from __future__ import annotations

from kishpa.common.v1 import common_pb2

GAMES = {common_pb2.GAME_KISHPA: "kishpa", common_pb2.GAME_HAND: "hand"}
"""Wire enum -> game name."""
GAME_ENUMS = {name: value for value, name in GAMES.items()}
"""Game name -> wire enum."""
