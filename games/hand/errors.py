"""Typed errors of the Hand engine, built on the rules' shared base classes (``games.errors``).

Every refusal carries a machine-readable ``reason`` (the gRPC error reason); the constants
below are the whole vocabulary of reasons the Hand engine uses.
"""

from __future__ import annotations

from games.errors import IllegalMoveError, InvalidRecordError, NotationError, RulesError

__all__ = [
    "CardNotationError",
    "HandMoveError",
    "IllegalMoveError",
    "InvalidRecordError",
    "Reason",
    "RulesError",
]


class CardNotationError(NotationError):
    """A card written in text (``AS``, ``10H``, ``J1``) is malformed or unknown."""

    reason = "MALFORMED_CARD"


class HandMoveError(IllegalMoveError):
    """A move the Hand rules do not allow; ``reason`` is one of :class:`Reason`."""


class Reason:
    """Machine-readable reasons carried by :class:`HandMoveError`."""

    DEAL_OVER = "DEAL_OVER"
    NOT_YOUR_TURN = "NOT_YOUR_TURN"
    UNKNOWN_SEAT = "UNKNOWN_SEAT"
    MUST_DRAW_FIRST = "MUST_DRAW_FIRST"
    ALREADY_DREW = "ALREADY_DREW"
    EMPTY_DISCARD_PILE = "EMPTY_DISCARD_PILE"
    CARD_NOT_IN_HAND = "CARD_NOT_IN_HAND"
    DUPLICATE_CARD = "DUPLICATE_CARD"
    INVALID_MELD = "INVALID_MELD"
    OPENING_BELOW_51 = "OPENING_BELOW_51"
    NOT_OPENED = "NOT_OPENED"
    DISCARD_NOT_USED = "DISCARD_NOT_USED"
    MUST_KEEP_DISCARD = "MUST_KEEP_DISCARD"
    UNKNOWN_MELD = "UNKNOWN_MELD"
    INVALID_LAYOFF = "INVALID_LAYOFF"
    INVALID_RELEASE = "INVALID_RELEASE"
    CLOSED_FOUR = "CLOSED_FOUR"
    NOTHING_TO_UNDO = "NOTHING_TO_UNDO"
    GAME_OVER = "GAME_OVER"
    INVALID_STATE = "INVALID_STATE"
    MALFORMED_ACTION = "MALFORMED_ACTION"
