"""The game-agnostic interface the table service calls.

The table envelope (:class:`Table`, :class:`TableSettings`, :class:`Deadline`) and its rules
(seating, deadlines, auto-play) are ``games.table``; this module re-exports the types. The
service (store, timers, views, events, servicer) knows only this module. A game — Kishpa
today, Hand (Rummy 51) later — plugs in as a :class:`GameEngine` that owns the opaque
``table.game`` part of the state and turns a request into a :class:`Step`: the next game
state, the events, the settlement outbox records and the next deadline. Engines are pure
(no I/O, no clock, no randomness): the service hands them ``now_ms`` and fresh seeds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from games.table import BOT_EASY as BOT_EASY
from games.table import BOT_NORMAL as BOT_NORMAL
from games.table import SEAT_LIMITS as SEAT_LIMITS
from games.table import WATCH_ANYONE as WATCH_ANYONE
from games.table import WATCH_INVITEES as WATCH_INVITEES
from games.table import WATCH_PLAYERS as WATCH_PLAYERS
from games.table import Deadline as Deadline
from games.table import Table as Table
from games.table import TableSettings as TableSettings
from games.view import NO_FACTS as NO_FACTS
from games.view import PublicFacts as PublicFacts
from services.common.errors import Category, DomainError
from shared.stream import NO_SEAT, TableEvent


class TableError(DomainError):
    """A request the table refuses in its current state (category ``refused``)."""

    category = Category.REFUSED

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


class NotAllowedError(TableError):
    """The caller may not do this at this table (not the creator, not seated)."""

    category = Category.FORBIDDEN


class BadRequestError(TableError):
    """Malformed input (unknown tile, bad arrangement, out-of-range setting)."""

    category = Category.INVALID


BETWEEN_ROUNDS = "between_rounds"
"""The phase a view shows after a round ended while the table goes on."""


def piece_id(value: Any, count: int, what: str, noun: str = "tile") -> int:
    """A tile or card id from a request: an integer ``0``-``count - 1`` (else bad input)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < count:
        raise BadRequestError(f"{what} must be a {noun} id 0-{count - 1}", "MALFORMED_TILE")
    return value


@dataclass(frozen=True, slots=True)
class Action:
    """A player's move, by name (``draw``, ``discard``, ``win``, ``reveal`` ...) with its args."""

    kind: str
    args: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Phase:
    """A settlement phase the step reached (round start/end); the value is the record."""

    round_no: int
    phase: str
    record: Mapping[str, Any]


@dataclass(slots=True)
class Step:
    """What an engine decided: the next game state and everything to publish with it."""

    game: dict[str, Any]
    events: list[TableEvent] = field(default_factory=list)
    phases: list[Phase] = field(default_factory=list)
    deadline: Deadline | None = None
    result: dict[str, Any] = field(default_factory=dict)
    """Facts for the acting player only (the tile he drew), returned in his answer."""
    timed_out_seat: int | None = None
    """Set when the step played a turn for a seat whose time ran out."""
    closed: bool = False


@dataclass(frozen=True, slots=True)
class SeatInfo:
    """Public facts about one seat."""

    seat: int
    player_id: str
    tile_count: int
    streak: int
    rounds_won: int
    score: int = 0
    """Game-defined points (Hand); Kishpa pays in tokens and keeps none."""


@dataclass(frozen=True, slots=True)
class GameView:
    """What one viewer may see of the game: his own tiles and public facts only."""

    round_no: int
    phase: str
    seats: Sequence[SeatInfo]
    my_tiles: Sequence[int]
    discards: Sequence[int]
    turn_seat: int | None
    actions: Sequence[str]
    commitment: str
    server_seed: str
    public: PublicFacts
    """The round's public facts: every game's (``games.view.PublicFacts``), as the game's
    own type (``games.kishpa.KishpaPublic``, ``games.hand.HandPublic``)."""


@dataclass(frozen=True, slots=True)
class HintGroup:
    """One group of a suggested arrangement: ``run`` or ``set`` and its tile ids in order."""

    kind: str
    tiles: Sequence[int]


@dataclass(frozen=True, slots=True)
class Hint:
    """Advice for a hand: the best arrangement, the tiles left loose, any winning discards."""

    groups: Sequence[HintGroup]
    loose: Sequence[int]
    winning_discards: Sequence[int]


class GameEngine(Protocol):
    """One game's rules behind the table service. Pure: no I/O, clock or own randomness."""

    name: str
    timeouts_before_autoplay: int
    """Late turns in a row after which a seat is played by the server until its player acts."""

    def check_settings(self, settings: TableSettings) -> None:
        """Raise :class:`BadRequestError` for settings the game cannot play with."""

    def start(self, table: Table, seed: bytes, now_ms: int) -> Step:
        """Start the first round at a full (or at least minimal) table."""

    def act(self, table: Table, seat: int, action: Action, now_ms: int) -> Step:
        """Apply a player's move; raise :class:`TableError` (or a rules error) to refuse."""

    def on_deadline(self, table: Table, seed: bytes, now_ms: int) -> Step:
        """The table's deadline passed: play the turn, close the window or start the next round."""

    def press_last_round(self, table: Table, now_ms: int) -> Step:
        """Make the next round to start the final one."""

    def abandon(self, table: Table, now_ms: int) -> Step | None:
        """The last player left and every seat is played by the server: end the table as the
        game's ruling says (docs/rules, "leaving the table"); None when nothing changes."""

    def view(self, table: Table, seat: int | None) -> GameView:
        """What this seat (None: a spectator) may see. Never another hand or the pile order."""

    def hand(self, table: Table, seat: int) -> list[int]:
        """The seat's tiles (ids), for rack orders."""

    def hint(self, table: Table, seat: int) -> Hint:
        """A suggested move for the seat."""

    def face(self, tile_id: int) -> str:
        """The text of a tile id (``R7``, ``DR``; Hand: ``10H``)."""


def announce_deadline(
    table: Table, round_no: int, deadline: Deadline | None, out: list[TableEvent]
) -> None:
    """Publish a new deadline so clients can show the countdown; an unchanged one is not
    announced again."""
    if deadline is not None and deadline != table.deadline:
        data = {"kind": deadline.kind, "at_ms": deadline.at_ms}
        out.append(TableEvent("deadline", round_no, NO_SEAT, data))
