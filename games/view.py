"""What every game's view tells every viewer of a round (``PublicFacts``); each game's own
view type adds its facts (``games.kishpa.KishpaPublic``, ``games.hand.HandPublic``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True, kw_only=True)
class PublicFacts:
    """The facts of a round the same for every viewer, in every game."""

    starter: int = 0
    """The seat that began the round."""
    drew: bool = False
    """Whether the seat on turn has drawn."""
    pile: int = 0
    """Tiles (cards) left in the pile (stock); never their order."""
    winner: int | None = None
    """The seat that won the round, once it did."""
    last_round: bool = False
    """Whether this is the table's last round."""
    client_seeds: Sequence[str | None] = ()
    """The client seeds the round was shuffled with, in seat order."""
    bowl: int = 0
    """What the table's bowl holds (a game without a bowl: 0)."""
    last_round_pressed: bool = False
    """Whether the table's next round is its last (a game that cannot press it: False)."""


NO_FACTS = PublicFacts()
"""The facts of a table before its first round."""
