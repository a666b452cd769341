"""Typed errors of the Kishpa rules: the shared ones (``games.errors``) and the tile's.

Each error carries a machine-readable ``reason`` (used as the gRPC error reason), a
``category`` and a message a player or client developer understands (see ``games.errors``).
"""

from games.errors import IllegalMoveError, InvalidRecordError, NotationError, RulesError

__all__ = ["IllegalMoveError", "InvalidRecordError", "RulesError", "TileNotationError"]


class TileNotationError(NotationError):
    """A tile written in text is malformed or unknown."""

    reason = "MALFORMED_TILE"
