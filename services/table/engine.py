"""The game-agnostic interface the table service calls, and the table envelope around a game.

The service (store, timers, views, events, servicer) knows only this module. A game — Kishpa
today, Hand (Rummy 51) later — plugs in as a :class:`GameEngine` that owns the opaque
``table.game`` part of the state and turns a request into a :class:`Step`: the next game
state, the events, the settlement outbox records and the next deadline. Engines are pure
(no I/O, no clock, no randomness): the service hands them ``now_ms`` and fresh seeds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Protocol

from services.common.errors import Category, DomainError
from shared.stream import NO_SEAT, TableEvent

SEAT_LIMITS = (2, 4)


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


class TableFullError(TableError):
    """Every seat is taken."""

    category = Category.EXHAUSTED


WATCH_PLAYERS = "players"
WATCH_INVITEES = "invitees"
WATCH_ANYONE = "anyone"


@dataclass(frozen=True, slots=True)
class TableSettings:
    """What the creator chose for the table."""

    seats: int = 4
    turn_seconds: int = 30
    reveal_window_seconds: int = 15
    next_round_pause_ms: int = 3000
    stake: int = 1
    bots: int = 0
    """Seats the service fills with its own bots at creation (played on auto-play)."""
    options: Mapping[str, bool] = field(default_factory=dict)
    """Game-specific switches (Kishpa: ``allow_high_wrap``, the 12-13-1 run)."""
    watch_policy: str = WATCH_ANYONE
    """Who may watch without a seat: ``players`` (nobody), ``invitees``, ``anyone``."""
    invited_watchers: tuple[str, ...] = ()
    """With ``invitees``: the player ids that may watch."""

    def may_watch(self, player_id: str) -> bool:
        """Whether a player without a seat may watch (GetTable, WatchTable)."""
        if self.watch_policy == WATCH_ANYONE:
            return True
        return self.watch_policy == WATCH_INVITEES and player_id in self.invited_watchers

    def to_dict(self) -> dict[str, Any]:
        return {
            "watch_policy": self.watch_policy,
            "invited_watchers": list(self.invited_watchers),
            "seats": self.seats,
            "turn_seconds": self.turn_seconds,
            "reveal_window_seconds": self.reveal_window_seconds,
            "next_round_pause_ms": self.next_round_pause_ms,
            "stake": self.stake,
            "bots": self.bots,
            "options": dict(self.options),
        }

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any]) -> TableSettings:
        # Only known fields: a replica running older code must still read newer tables.
        known = {f.name for f in fields(cls)} - {"options", "watch_policy", "invited_watchers"}
        numbers = {k: int(v) for k, v in obj.items() if k in known}
        options = {str(k): bool(v) for k, v in obj.get("options", {}).items()}
        return cls(
            **numbers,
            options=options,
            watch_policy=str(obj.get("watch_policy", WATCH_ANYONE)),
            invited_watchers=tuple(str(p) for p in obj.get("invited_watchers", ())),
        )


@dataclass(frozen=True, slots=True)
class Deadline:
    """When the table stops waiting, and for what (``turn``, ``window``, ``next_round``)."""

    at_ms: int
    kind: str
    seats: tuple[int, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"at_ms": self.at_ms, "kind": self.kind, "seats": list(self.seats)}

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any] | None) -> Deadline | None:
        if obj is None:
            return None
        return cls(int(obj["at_ms"]), str(obj["kind"]), tuple(int(s) for s in obj["seats"]))


@dataclass(slots=True)
class Table:
    """The whole stored state of a table: the generic envelope plus the game's own state."""

    table_id: str
    game_name: str
    creator: str
    settings: TableSettings
    created_ms: int
    players: list[str] = field(default_factory=list)
    status: str = "waiting"
    """``waiting`` for players, ``playing`` (rounds and the pauses between them), ``closed``."""
    names: dict[str, str] = field(default_factory=dict)
    """Display names of the seated players (from their tokens)."""
    auto_start: bool = False
    """Start the game as soon as every seat is taken (tables made by matchmaking)."""
    client_seeds: dict[str, str] = field(default_factory=dict)
    rack_orders: dict[str, list[int]] = field(default_factory=dict)
    timeouts: dict[str, int] = field(default_factory=dict)
    """Turns in a row each seat (as text) let run out; reset when its player acts."""
    autoplay: list[int] = field(default_factory=list)
    bots: list[str] = field(default_factory=list)
    """Players who are the service's bots (always on auto-play; marked in every view)."""
    deadline: Deadline | None = None
    game: dict[str, Any] = field(default_factory=dict)

    def bot_seats(self) -> list[int]:
        """Seats where the service's bots sit."""
        return [seat for seat, player in enumerate(self.players) if player in self.bots]

    def seat_of(self, player_id: str) -> int | None:
        """The player's seat, or None when he does not sit here."""
        try:
            return self.players.index(player_id)
        except ValueError:
            return None

    def to_dict(self) -> dict[str, Any]:
        return {
            "table_id": self.table_id,
            "game_name": self.game_name,
            "creator": self.creator,
            "settings": self.settings.to_dict(),
            "created_ms": self.created_ms,
            "players": self.players,
            "status": self.status,
            "names": self.names,
            "auto_start": self.auto_start,
            "client_seeds": self.client_seeds,
            "rack_orders": self.rack_orders,
            "timeouts": self.timeouts,
            "autoplay": self.autoplay,
            "bots": self.bots,
            "deadline": None if self.deadline is None else self.deadline.to_dict(),
            "game": self.game,
        }

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any]) -> Table:
        return cls(
            table_id=obj["table_id"],
            game_name=obj["game_name"],
            creator=obj["creator"],
            settings=TableSettings.from_dict(obj["settings"]),
            created_ms=int(obj["created_ms"]),
            players=list(obj["players"]),
            status=obj["status"],
            names=dict(obj.get("names", {})),
            auto_start=bool(obj.get("auto_start", False)),
            client_seeds=dict(obj["client_seeds"]),
            rack_orders={k: list(v) for k, v in obj["rack_orders"].items()},
            timeouts=dict(obj["timeouts"]),
            autoplay=list(obj["autoplay"]),
            bots=list(obj.get("bots", [])),
            deadline=Deadline.from_dict(obj["deadline"]),
            game=dict(obj["game"]),
        )


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
    public: Mapping[str, Any]
    """Game-specific public facts (Kishpa: kishpa, joker, bowl, last_round, replaced...)."""


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
