"""What a game tells the platform about itself: one :class:`GameSpec` per game.

Each game declares its spec once, in its own package (``games/<game>/spec.py``, exported as
``GAME``), and :mod:`games.registry` lists every spec. Services, workers, the archive, the
CLI and the SDK loop over the registry or look a game up in it instead of comparing game
names; what a game's part needs that a layer above ``games/`` owns (its service engine, its
protobuf converter) is registered at that layer, keyed by the spec's ``name``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from games.ledger import Posting

PostingsOf = Callable[[Mapping[str, Any]], Sequence[Posting]]
"""A settlement phase's rule: the phase record (plain JSON) -> the wallet postings."""


@dataclass(frozen=True, slots=True)
class GameSpec:
    """One game as the platform sees it."""

    name: str
    """The game's name everywhere inside the platform (state, queues, outbox, archive)."""
    title: str
    """How the docs and tables name it (``Kishpa``)."""
    wire_value: int
    """Its value of the wire enum ``kishpa.common.v1.Game`` (a unit test holds the two equal:
    ``games`` does not import the generated code)."""
    postings: Mapping[str, PostingsOf]
    """Its settlement phases in the order a table writes them, each with its postings."""
    ending_phase: str
    """The phase that ends what a settlement covers (the archive writes rounds with it)."""
    settles_since: str | None
    """``None``: the ending phase settles its own round. A phase name: it settles every round
    played since that phase (Hand's ``payout`` settles the deals after the ``buy_in``)."""
    round_start_event: str
    """The stream event a round (a deal) of the game starts with (the record starts there)."""
    round_end_event: str
    """The stream event that ends a round and reveals its seed (the record ends there)."""
    restarts: frozenset[str]
    """Round events that begin a new wait: a new deadline even when its kind is the same."""
    fixed_rounds: int | None
    """Rounds a table plays (Hand: its deals per game); ``None``: the table plays until its
    creator presses the last round (Kishpa)."""

    @property
    def presses_last_round(self) -> bool:
        """Whether a table's creator may make the next round the last."""
        return self.fixed_rounds is None
