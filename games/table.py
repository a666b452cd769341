"""The table, whatever game it plays: seats, the deadlines it keeps and when a seat is auto-played.

Pure like the games themselves (standard library only, no I/O, no clock: ``now_ms`` is handed
in). The table service stores a :class:`Table` and asks this module what its rules allow:

* **seating** — :func:`seat`, :func:`leave`, :func:`check_start`, :func:`check_players`,
  :func:`check_settings`: who may sit, leave, start; a table seats 2-4 players;
* **deadlines** — :func:`deadline_for` keeps a turn's or a window's running deadline and
  starts a new one when the wait changes; :func:`pause_deadline` is the pause between rounds;
  a seat on auto-play is played after :data:`AUTOPLAY_DELAY_MS` instead of a whole turn;
* **auto-play** — :func:`record_timeout` puts a seat on auto-play after the game's number of
  late turns in a row, :func:`player_acted` takes it back, :func:`leave` during a game puts it
  on auto-play, :func:`abandoned` says nobody plays any more. *What* an auto-played seat does
  is each game's policy, a pure function ``(state, seat, stream) -> action``:
  ``games.kishpa.autoplay_action`` and ``games.hand.autoplay_action``.

Refusals are :class:`TableRuleError` subclasses carrying a ``reason`` and a ``category``
(``refused``, ``forbidden``, ``invalid``, ``exhausted``) the services map to status codes.
Events are :class:`TableFact` values the service publishes on the table's stream.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from games.errors import IllegalMoveError

SEAT_LIMITS = (2, 4)
"""Every game seats 2 to 4 players."""
DEFAULT_TURN_SECONDS = 30
"""A turn's time when the table's creator does not choose one (KISHPA_TABLE_TURN_SECONDS
overrides it for the service; docs/rules state it, checked by tests/unit/test_timer_docs.py)."""
DEFAULT_NEXT_DEAL_PAUSE_MS = 30_000
"""The longest pause between two deals when the creator does not choose one
(KISHPA_TABLE_NEXT_DEAL_PAUSE_MS): it ends sooner once every human seat says it is ready."""
TURN_SECONDS = (1, 600)
WINDOW_SECONDS = (1, 600)
PAUSE_MS = (0, 60_000)
BOT_PAUSE_MS = (0, 5000)
MAX_PLAYER_ID = 128
BOT_NAMES = ("Bot Noa", "Bot Eitan", "Bot Maya")
"""Display names of the service's bots, by their order at the table."""
AUTOPLAY_DELAY_MS = 1000
"""A seat on auto-play is played this soon (never later than its turn timer); the service's
bots, after their table's ``bot_pause_ms`` (this by default)."""

BOT_EASY = "easy"
"""House bots that draw from the stock and throw the drawn card away (they still take a win
the drawn card completes): a table for learning the rules."""
BOT_NORMAL = "normal"
"""House bots that play with the solver (the default)."""
BOT_LEVELS = (BOT_EASY, BOT_NORMAL)
"""A seat on auto-play is played this soon (never later than its turn timer)."""

WAITING = "waiting"
PLAYING = "playing"
CLOSED = "closed"

WATCH_PLAYERS = "players"
WATCH_INVITEES = "invitees"
WATCH_ANYONE = "anyone"

TURN = "turn"
WINDOW = "window"
NEXT_ROUND = "next_round"
CONTRIBUTIONS_WAIT = "contributions"
"""The short wait for the seats that contribute to a deal's shuffle (games/contributions.py)."""


# --- refusals ---------------------------------------------------------------------------


class TableRuleError(IllegalMoveError):
    """The table's rules refuse this in its current state."""

    category = "refused"

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message, reason)


class NotAllowed(TableRuleError):
    """This caller may not do this at this table (not seated, not its creator)."""

    category = "forbidden"


class BadTableRequest(TableRuleError):
    """Malformed whatever the state (settings out of range, bad players)."""

    category = "invalid"


class TableFull(TableRuleError):
    """Every seat is taken."""

    category = "exhausted"


# --- the stored table -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TableSettings:
    """What the creator chose for the table."""

    seats: int = 4
    turn_seconds: int = DEFAULT_TURN_SECONDS
    reveal_window_seconds: int = 15
    next_round_pause_ms: int = DEFAULT_NEXT_DEAL_PAUSE_MS
    stake: int = 1
    bots: int = 0
    """Seats the service fills with its own bots at creation (played on auto-play)."""
    bot_level: str = BOT_NORMAL
    """How the house bots play: ``easy`` (draw and discard) or ``normal`` (the solver)."""
    bot_pause_ms: int = AUTOPLAY_DELAY_MS
    """How long each house bot takes over its turn (the pace only, never the play)."""
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
            "bot_level": self.bot_level,
            "bot_pause_ms": self.bot_pause_ms,
            "options": dict(self.options),
        }

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any]) -> TableSettings:
        # Only known fields: a replica running older code must still read newer tables.
        known = _SETTINGS_NUMBERS
        numbers = {k: int(v) for k, v in obj.items() if k in known}
        options = {str(k): bool(v) for k, v in obj.get("options", {}).items()}
        return cls(
            **numbers,
            options=options,
            watch_policy=str(obj.get("watch_policy", WATCH_ANYONE)),
            invited_watchers=tuple(str(p) for p in obj.get("invited_watchers", ())),
            bot_level=str(obj.get("bot_level", BOT_NORMAL)),
        )


_SETTINGS_NUMBERS = frozenset(f.name for f in fields(TableSettings)) - {
    "options",
    "watch_policy",
    "invited_watchers",
    "bot_level",
}
"""The whole-number fields of :class:`TableSettings` (its stored form's other fields are text)."""


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
    status: str = WAITING
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
    fair: dict[str, Any] = field(default_factory=dict)
    """The coming deal's commitment and contributions (services/table/fair_deals.py); holds
    the secret server seed of that deal, so it is never part of any view."""
    ready: list[int] = field(default_factory=list)
    """Seats whose player said he is ready for the next deal, during the pause between two
    deals (emptied when a deal is dealt)."""
    rematch: dict[str, Any] = field(default_factory=dict)
    """A table that replays another (services/table/rematch.py): ``of`` (its id) and the
    ``humans`` awaited."""

    def bot_seats(self) -> list[int]:
        """Seats where the service's bots sit."""
        return [seat for seat, player in enumerate(self.players) if player in self.bots]

    def seat_of(self, player_id: str) -> int | None:
        """The player's seat, or None when he does not sit here."""
        try:
            return self.players.index(player_id)
        except ValueError:
            return None

    @property
    def full(self) -> bool:
        return len(self.players) >= self.settings.seats

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
            "fair": self.fair,
            "ready": self.ready,
            **({"rematch": self.rematch} if self.rematch else {}),
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
            fair=dict(obj.get("fair") or {}),
            ready=[int(s) for s in obj.get("ready") or []],
            rematch=dict(obj.get("rematch") or {}),
        )


@dataclass(frozen=True, slots=True)
class TableFact:
    """Something that happened at the table itself (a join, a leave, auto-play on)."""

    type: str
    seat: int
    data: Mapping[str, Any]


# --- seating ----------------------------------------------------------------------------


def check_settings(settings: TableSettings) -> None:
    """The limits every game shares (each game checks its own options besides)."""
    low, high = SEAT_LIMITS
    if not low <= settings.seats <= high:
        raise BadTableRequest(f"seats must be {low}-{high}", "BAD_SEATS")
    low, high = TURN_SECONDS
    if not low <= settings.turn_seconds <= high:
        raise BadTableRequest(f"turn_time must be {low}-{high} whole seconds", "BAD_TURN_SECONDS")
    low, high = WINDOW_SECONDS
    if not low <= settings.reveal_window_seconds <= high:
        raise BadTableRequest(
            f"reveal_window must be {low}-{high} whole seconds", "BAD_WINDOW_SECONDS"
        )
    low, high = PAUSE_MS
    if not low <= settings.next_round_pause_ms <= high:
        raise BadTableRequest(f"next_round_pause must be 0-{high // 1000} s", "BAD_PAUSE")
    low, high = BOT_PAUSE_MS
    if not low <= settings.bot_pause_ms <= high:
        raise BadTableRequest(f"bot_pause must be 0-{high} ms", "BAD_PAUSE")
    if settings.bot_level not in BOT_LEVELS:
        raise BadTableRequest(f"bot_level must be one of {', '.join(BOT_LEVELS)}", "BAD_BOT_LEVEL")


def check_players(creator: str, players: Sequence[str], settings: TableSettings) -> None:
    """Players seated at creation: distinct, the creator first, at most one per seat."""
    if not players or players[0] != creator or len(set(players)) != len(players):
        raise BadTableRequest(
            "players must be distinct, creator first, at most one per seat", "BAD_PLAYERS"
        )
    if len(players) > settings.seats:
        raise BadTableRequest(
            "players must be distinct, creator first, at most one per seat", "BAD_PLAYERS"
        )
    if any(not p or len(p) > MAX_PLAYER_ID for p in players):
        raise BadTableRequest(f"a player id must be 1-{MAX_PLAYER_ID} characters", "BAD_PLAYERS")


def house_bots(settings: TableSettings, seated: int, table_id: str) -> list[tuple[str, str]]:
    """The service's own bots (id, name) a new table seats after its ``seated`` players."""
    if not 0 <= settings.bots <= min(len(BOT_NAMES), settings.seats - seated):
        raise BadTableRequest(
            "bots must leave a seat for every player (0 to seats - 1)", "BAD_BOTS"
        )
    return [(f"bot-{n + 1}-{table_id}", BOT_NAMES[n]) for n in range(settings.bots)]


def start_playing(table: Table) -> None:
    """The game starts: the service plays its bots' seats from the first deal."""
    table.status = PLAYING
    table.autoplay = sorted(set(table.autoplay) | set(table.bot_seats()))


def seat(table: Table, player_id: str, *, name: str = "", client_seed: str = "") -> TableFact:
    """Seat the player in the next free seat of a table that has not started."""
    if table.seat_of(player_id) is not None:
        raise TableRuleError("you already sit at this table", "ALREADY_SEATED")
    if table.status != WAITING:
        raise TableRuleError("the game has already started", "GAME_STARTED")
    if table.full:
        raise TableFull("the table is full", "TABLE_FULL")
    table.players.append(player_id)
    if client_seed:
        table.client_seeds[player_id] = client_seed
    if name:
        table.names[player_id] = name
    return TableFact(
        "player_joined", len(table.players) - 1, {"player_id": player_id, "name": name}
    )


def seat_of(table: Table, player_id: str) -> int:
    """The seat of a player who must sit here."""
    found = table.seat_of(player_id)
    if found is None:
        raise NotAllowed("you do not sit at this table", "NOT_SEATED")
    return found


def leave(table: Table, player_id: str) -> TableFact:
    """Leave a waiting table (``player_left``); during a game the seat goes on auto-play."""
    place = seat_of(table, player_id)
    if table.status == CLOSED:
        raise TableRuleError("the table is closed", "TABLE_CLOSED")
    if table.status == WAITING:
        if player_id == table.creator:
            raise TableRuleError("the creator cannot leave before the game", "CREATOR")
        table.players.pop(place)
        table.client_seeds.pop(player_id, None)
        table.names.pop(player_id, None)
        return TableFact("player_left", place, {"player_id": player_id})
    if place not in table.autoplay:
        table.autoplay.append(place)
    return TableFact("autoplay_on", place, {"player_id": player_id})


def check_creator(table: Table, player_id: str, what: str) -> None:
    """Only the table's creator may do ``what``."""
    if player_id != table.creator:
        raise NotAllowed(f"only the table's creator may {what}", "NOT_CREATOR")


def check_start(table: Table, player_id: str) -> None:
    """The creator starts a waiting table once at least two players sit."""
    check_creator(table, player_id, "start it")
    if table.rematch:
        raise NotAllowed("a table that replays a game starts by itself", "NOT_ALLOWED")
    if table.status != WAITING:
        raise TableRuleError(f"the table is {table.status}", "GAME_STARTED")
    if len(table.players) < SEAT_LIMITS[0]:
        raise TableRuleError("at least two players must sit", "NOT_ENOUGH_PLAYERS")


def starts_by_itself(table: Table) -> bool:
    """An auto-start table (made by matchmaking) starts as soon as every seat is taken."""
    return table.auto_start and table.status == WAITING and table.full


def check_playing(table: Table) -> None:
    if table.status != PLAYING:
        raise TableRuleError(f"the table is {table.status}, not playing", "NOT_PLAYING")


def check_rack_order(hand: Sequence[int], order: Sequence[int]) -> None:
    """A rack order lists each of the player's tiles exactly once."""
    if len(set(order)) != len(order) or sorted(order) != sorted(hand):
        raise BadTableRequest(
            "the rack order must list each of your tiles exactly once", "BAD_RACK_ORDER"
        )


# --- deadlines --------------------------------------------------------------------------


def deadline_for(
    table: Table, kind: str, seat_to_act: int | None, now_ms: int, *, restarted: bool
) -> Deadline:
    """The deadline of a turn (``seat_to_act``) or a reveal window (no seat: who may reveal
    shows who holds the kishpa).

    The running deadline is kept while the same wait goes on; ``restarted`` (a new turn or
    window began) or a different wait starts a new one. A seat on auto-play gets
    :data:`AUTOPLAY_DELAY_MS` instead of a whole turn, a house bot its table's bot pause (as
    does every seat once the server plays them all).
    """
    seats = () if seat_to_act is None else (seat_to_act,)
    previous = table.deadline
    same_wait = previous is not None and previous.kind == kind and previous.seats == seats
    if previous is not None and same_wait and not restarted:
        return previous
    if kind == WINDOW:
        window_ms = table.settings.reveal_window_seconds * 1000
        if abandoned(table):  # nobody left to answer it but the server's own seats
            window_ms = min(window_ms, table.settings.bot_pause_ms)
        return Deadline(now_ms + window_ms, WINDOW)
    turn_ms = table.settings.turn_seconds * 1000
    if seat_to_act in table.autoplay:
        # A human seat on auto-play keeps a second for its player to come back; once every
        # seat is played by the server (the last human left), it goes at the bots' pace.
        bot = seat_to_act in table.bot_seats() or abandoned(table)
        turn_ms = min(turn_ms, table.settings.bot_pause_ms if bot else AUTOPLAY_DELAY_MS)
    return Deadline(now_ms + turn_ms, TURN, seats)


def deadline_after_leave(table: Table, seat: int, now_ms: int) -> Deadline | None:
    """The running deadline once ``seat`` left during a game: a turn of that seat still
    waiting for its player is cut to the auto-play pace (nobody is coming to play it), and a
    reveal window to the bots' pause when nobody else is left to answer it."""
    deadline = table.deadline
    if deadline is None or (deadline.kind == TURN and seat not in deadline.seats):
        return deadline
    if deadline.kind not in (TURN, WINDOW):
        return deadline
    sooner = deadline_for(
        table, deadline.kind, seat if deadline.kind == TURN else None, now_ms, restarted=True
    )
    return sooner if sooner.at_ms < deadline.at_ms else deadline


def pause_deadline(table: Table, now_ms: int) -> Deadline:
    """The pause after a round before the next one is dealt (it ends sooner when every
    human seat says it is ready: :func:`mark_ready`)."""
    table.ready = []
    return Deadline(now_ms + table.settings.next_round_pause_ms, NEXT_ROUND)


# --- the pause between deals ---------------------------------------------------------------


def in_pause(table: Table) -> bool:
    """Is the table in the pause between two deals (the next deal not dealt yet)?"""
    return (
        table.status == PLAYING
        and table.deadline is not None
        and table.deadline.kind in (NEXT_ROUND, CONTRIBUTIONS_WAIT)
    )


def awaited_ready(table: Table) -> list[int]:
    """The seats the pause still waits for: human seats not on auto-play that have not said
    they are ready (a bot, or a seat the server plays, is always ready)."""
    return [
        seat
        for seat in range(len(table.players))
        if seat not in table.autoplay and seat not in table.bot_seats() and seat not in table.ready
    ]


def mark_ready(table: Table, player_id: str, ended_round: int, current_round: int) -> int | None:
    """The player says he is ready for the deal after ``ended_round``; his seat when this is
    news (None when he said it already, or that deal was dealt already: nothing to do).

    Refused while ``ended_round`` is the deal being played (``NOT_BETWEEN_DEALS``) or is a
    deal the table has not reached (``BAD_ROUND``).
    """
    place = seat_of(table, player_id)
    check_playing(table)
    if ended_round < 1 or ended_round > current_round:
        raise BadTableRequest(f"round must be the deal that ended (1-{current_round})", "BAD_ROUND")
    if ended_round < current_round:
        return None  # the next deal was dealt already: a late click changes nothing
    if not in_pause(table):
        raise TableRuleError("the deal is still being played", "NOT_BETWEEN_DEALS")
    if place in table.ready:
        return None
    table.ready.append(place)
    return place


# --- auto-play --------------------------------------------------------------------------


def player_acted(table: Table, seat_acting: int) -> None:
    """A player who acts takes his seat back from auto-play."""
    table.timeouts.pop(str(seat_acting), None)
    if seat_acting in table.autoplay:
        table.autoplay.remove(seat_acting)


def record_timeout(table: Table, seat_late: int, limit: int) -> TableFact | None:
    """A seat let its turn run out; after ``limit`` in a row it goes on auto-play
    (``autoplay_on``, returned once)."""
    key = str(seat_late)
    table.timeouts[key] = table.timeouts.get(key, 0) + 1
    if table.timeouts[key] >= limit and seat_late not in table.autoplay:
        table.autoplay.append(seat_late)
        return TableFact("autoplay_on", seat_late, {"player_id": table.players[seat_late]})
    return None


def abandoned(table: Table) -> bool:
    """Nobody plays any more: every seat is on auto-play."""
    return bool(table.players) and len(set(table.autoplay)) == len(table.players)
