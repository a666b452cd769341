"""The rules' errors, shared by every game and by the table (``games.table``).

Each error carries a machine-readable ``reason`` (the gRPC error reason), a ``category``
(``"invalid"``: malformed whatever the state; ``"refused"``: the state refuses it; the
services map categories to status codes in one table, ``services.common.errors``) and a
message a player or client developer understands.

Each game subclasses these for its own pieces (``games.kishpa.errors.TileNotationError``,
``games.hand.errors.CardNotationError``); nothing here belongs to one game.
"""


class RulesError(Exception):
    """Base class: the rules refuse something."""

    reason = "RULES_VIOLATION"
    category = "refused"


class NotationError(RulesError, ValueError):
    """A piece (tile, card) written in text is malformed or unknown.

    Each game raises its own subclass, which names the piece in its ``reason``.
    """

    category = "invalid"


class IllegalMoveError(RulesError):
    """A move the rules do not allow in the current state."""

    reason = "ILLEGAL_MOVE"

    def __init__(self, message: str, reason: str | None = None) -> None:
        super().__init__(message)
        if reason is not None:
            self.reason = reason


class InvalidRecordError(RulesError, ValueError):
    """A settlement record (deal, hands, reveals, winner) that the rules reject as impossible."""

    reason = "INVALID_RECORD"
    category = "invalid"
