"""The Hand rule set: every ruling of docs/rules/hand.md, and every case the rules leave open,
as one value with the documented defaults.

A table carries its ``RuleSet`` (it is stored inside the deal and game state), so code never
scatters an ``if`` for a ruling anywhere else.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any


@dataclass(frozen=True, slots=True)
class RuleSet:
    # Seats and deal.
    min_seats: int = 2
    max_seats: int = 4
    hand_size: int = 14
    """Cards dealt to every player; the starter gets one more and skips his first draw."""

    # Melds.
    min_meld_size: int = 3
    max_set_size: int = 4
    max_run_length: int = 13
    """A run never holds the ace at both ends (``A 2 … K A``)."""
    max_jokers_per_meld: int = 2
    """Open case: the pack has two jokers and nothing forbids both in one meld."""
    meld_needs_real_card: bool = True
    """Open case: a meld holds at least one real card (two jokers alone are no meld anyway)."""

    # Card values (opening count and penalties).
    ace_value: int = 11
    low_ace_value: int = 1
    """The ace as the low end of a run (``A 2 3``), in the opening count."""
    court_value: int = 10
    joker_penalty: int = 25

    # Opening and the turn.
    opening_minimum: int = 51
    layoff_on_opening_turn: bool = True
    """Open case: once a player's opening melds are down he may lay off in that same turn."""
    discard_pick_must_be_in_opening: bool = True
    """A player who has not opened may take the top discard only to put it in his opening."""

    # Ending a deal and scoring.
    stock_out_ends_at_discard: bool = True
    """Open case: the deal ends with the discard that follows the last stock card. When
    False the next player may still take the top discard to use it, and the deal ends when
    someone must draw from the empty stock."""
    win_score: int = 50
    hand_win_score: int = 100
    hand_penalty_multiplier: int = 2
    deals_per_game: int = 7
    abandoned_ends_with_deal: bool = True
    """Ruling (docs/rules/hand.md, "leaving the table"): when the last player leaves a table
    where only bots remain, the game ends with the deal in progress (at once between deals)
    and the pot is paid out by the totals at that point. False: the bots play every deal."""

    # The pot.
    winner_min_percent: int = 75
    share_window: int = 50
    """Others within this many points of the winner share the rest; weight = window − gap."""

    def __post_init__(self) -> None:
        if not 2 <= self.min_seats <= self.max_seats <= 4:
            raise ValueError("seats must satisfy 2 <= min <= max <= 4")
        if self.hand_size < 1 or self.max_seats * (self.hand_size + 1) + 2 > 106:
            raise ValueError("the pack cannot deal that many cards")
        if not 0 <= self.winner_min_percent <= 100:
            raise ValueError("the winner's part is a percentage 0-100")
        if self.deals_per_game < 1:
            raise ValueError("a game has at least one deal")
        if not 3 <= self.min_meld_size <= self.max_set_size <= 4:
            raise ValueError("a set holds 3 or 4 cards of different suits")

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-serialisable values, for storing with a table's state."""
        return {name: getattr(self, name) for name in _FIELD_NAMES}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RuleSet:
        """Rebuild from :meth:`to_dict`; unknown keys are refused, missing ones default."""
        unknown = set(data) - set(_FIELD_NAMES)
        if unknown:
            raise ValueError(f"unknown Hand rulings: {sorted(unknown)}")
        return cls(**data)


_FIELD_NAMES = tuple(f.name for f in fields(RuleSet))
DEFAULT_RULES = RuleSet()
