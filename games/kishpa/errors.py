"""Typed errors of the rules engine.

Each error carries a machine-readable ``reason`` (used as the gRPC error reason), a
``category`` (``"invalid"``: malformed whatever the state; ``"refused"``: the state refuses
it; the services map categories to status codes in one table) and a message a player or
client developer understands.
"""


class RulesError(Exception):
    """Base class: the rules refuse something."""

    reason = "RULES_VIOLATION"
    category = "refused"


class TileNotationError(RulesError, ValueError):
    """A tile written in text is malformed or unknown."""

    reason = "MALFORMED_TILE"
    category = "invalid"


class IllegalMoveError(RulesError):
    """A move the rules do not allow in the current state."""

    reason = "ILLEGAL_MOVE"

    def __init__(self, message: str, reason: str | None = None) -> None:
        super().__init__(message)
        if reason is not None:
            self.reason = reason


class InvalidRecordError(RulesError, ValueError):
    """A round record (deal, hands, reveals, winner) that the rules reject as impossible."""

    reason = "INVALID_RECORD"
    category = "invalid"
