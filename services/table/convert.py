"""Domain values of the table service to and from the kishpa.table.v1 messages.

The table service meets the generated code in four modules: this one (views, hints,
settings), ``wire_events`` (the stream's events), ``wire_enums`` (every internal name of a
wire enum, derived from the descriptors) and the servicer (requests and responses); the
engines and the store never see a message. Game-specific public facts go to the game's
``oneof`` branch of the round (``KishpaRound``, ``HandRound``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from google.protobuf import duration_pb2

from games.contributions import contributed, next_deal
from games.registry import BY_NAME
from games.table import NEXT_ROUND
from kishpa.common.v1 import common_pb2
from kishpa.table.v1 import table_pb2
from services.common.games import GAME_ENUMS, GAMES
from services.table.engine import (
    BOT_NORMAL,
    NO_FACTS,
    WATCH_ANYONE,
    GameView,
    Hint,
    PublicFacts,
    TableSettings,
)
from services.table.game_wire import WIRES, options_from
from services.table.service import TableView
from services.table.wire_enums import (
    BOT_LEVEL_NAMES,
    GROUP_KINDS,
    PLAYER_ACTIONS,
    ROUND_PHASES,
    TABLE_STATUSES,
    WATCH_POLICY_NAMES,
)
from services.table.wire_events import duration, event_message, settings_message, timestamp
from shared.stream import StoredEvent

__all__ = ["GAMES", "GAME_ENUMS", "Converter", "duration", "groups_from", "settings_from"]

SHARED_EVENTS = 8192
"""Converted stream entries kept for the table's other watchers (oldest dropped first)."""


def _ms(value: duration_pb2.Duration) -> int:
    """Whole milliseconds of a Duration (a fraction of a millisecond is dropped)."""
    return value.seconds * 1000 + value.nanos // 1_000_000


def _whole_seconds(value: duration_pb2.Duration) -> int:
    """Whole seconds of a Duration (-1, refused by the range checks, when it has a fraction)."""
    if value.nanos:
        return -1
    return value.seconds


def settings_from(
    msg: table_pb2.TableSettings, defaults: TableSettings | None = None
) -> tuple[str, TableSettings]:
    """The game name and the settings a CreateTable asks for (unset values: ``defaults``,
    the service's KISHPA_TABLE_* settings)."""
    game = GAMES.get(msg.game, "")
    defaults = defaults or TableSettings()
    turn = _whole_seconds(msg.turn_time) if msg.HasField("turn_time") else 0
    window = _whole_seconds(msg.reveal_window) if msg.HasField("reveal_window") else 0
    pause = _ms(msg.next_round_pause) if msg.HasField("next_round_pause") else 0
    bot_pause = _ms(msg.bot_pause) if msg.HasField("bot_pause") else defaults.bot_pause_ms
    return game, TableSettings(
        seats=msg.seats or defaults.seats,
        turn_seconds=turn or defaults.turn_seconds,
        reveal_window_seconds=window or defaults.reveal_window_seconds,
        next_round_pause_ms=pause or defaults.next_round_pause_ms,
        stake=msg.stake or defaults.stake,
        bots=msg.bots,
        bot_level=BOT_LEVEL_NAMES.get(msg.bot_level, BOT_NORMAL),
        bot_pause_ms=bot_pause,
        options=options_from(msg),
        watch_policy=WATCH_POLICY_NAMES.get(msg.watch_policy, WATCH_ANYONE),
        invited_watchers=tuple(msg.invited_watchers),
    )


class Converter:
    """Builds messages; ``face`` gives a tile's text for the table's game."""

    def __init__(self, face: Callable[[str, int], str]) -> None:
        self._face = face
        # (table, entry id, private part shown?) -> its message: the watchers of a table
        # receive the same entry, in one of at most two forms (with the seat's private part,
        # or without), so each form is converted once per process and shared.
        self._shared: dict[tuple[str, str, bool], table_pb2.TableEvent | None] = {}

    def tile(self, game: str, tile_id: int) -> common_pb2.Tile:
        return common_pb2.Tile(id=tile_id, face=self._face(game, tile_id))

    def tiles(self, game: str, ids: Iterable[int]) -> list[common_pb2.Tile]:
        return [self.tile(game, t) for t in ids]

    def view(self, view: TableView) -> table_pb2.TableView:
        """The caller's view as a message (never another hand or the pile order)."""
        table = view.table
        game = view.game
        infos = {s.seat: s for s in game.seats} if game is not None else {}
        seats = []
        for seat in range(table.settings.seats):
            player = table.players[seat] if seat < len(table.players) else ""
            info = infos.get(seat)
            seats.append(
                table_pb2.Seat(
                    seat=seat,
                    player_id=player,
                    display_name=table.names.get(player, ""),
                    tile_count=info.tile_count if info else 0,
                    balance=view.balances.get(player, 0) if player else 0,
                    rounds_won=info.rounds_won if info else 0,
                    streak=info.streak if info else 0,
                    score=info.score if info else 0,
                    client_seed=table.client_seeds.get(player, ""),
                    bot=player in table.bots,
                )
            )
        settings = settings_message(table.game_name, table.settings)
        public = game.public if game is not None else NO_FACTS
        msg = table_pb2.TableView(
            table_id=table.table_id,
            settings=settings,
            status=TABLE_STATUSES.get(table.status, table_pb2.TABLE_STATUS_UNSPECIFIED),
            creator_player_id=table.creator,
            seats=seats,
            my_seat=view.my_seat,
            bowl=public.bowl,
            last_round_pressed=public.last_round_pressed,
            available_actions=self._actions(view),
            last_event_id=view.last_event_id,
            version=view.version,
        )
        msg.next_deal, msg.next_deal_commitment = next_deal(table)
        if view.my_seat is not None:
            msg.contributed = contributed(table, table.players[view.my_seat])
        if table.rematch:
            msg.rematch_of = str(table.rematch.get("of", ""))
            if table.status == "waiting" and table.deadline is not None:
                msg.start_time.CopyFrom(timestamp(table.deadline.at_ms))
        pause = table.deadline if table.status == "playing" else None
        if pause is not None and pause.kind == NEXT_ROUND:
            msg.ready_seats.extend(sorted(table.ready))
            msg.next_deal_time.CopyFrom(timestamp(pause.at_ms))
        if game is not None and game.round_no > 0:
            msg.round.CopyFrom(self._round(view, game))
        return msg

    def _actions(self, view: TableView) -> list[table_pb2.PlayerAction.ValueType]:
        table = view.table
        creator = view.my_seat is not None and table.players[view.my_seat] == table.creator
        if table.status == "waiting":
            if view.my_seat is None:
                full = len(table.players) >= table.settings.seats
                return [] if full else [table_pb2.PLAYER_ACTION_JOIN]
            if creator and not table.rematch:
                ready = len(table.players) >= 2
                return [table_pb2.PLAYER_ACTION_START_GAME] if ready else []
            return [table_pb2.PLAYER_ACTION_LEAVE]
        if table.status != "playing" or view.game is None or view.my_seat is None:
            return []
        out: list[table_pb2.PlayerAction.ValueType] = []
        for action in view.game.actions:
            if action == "draw":
                out.append(table_pb2.PLAYER_ACTION_DRAW_PILE)
                if view.game.discards:
                    out.append(table_pb2.PLAYER_ACTION_DRAW_DISCARD)
            elif action in PLAYER_ACTIONS:
                out.append(PLAYER_ACTIONS[action])
        pausing = table.deadline is not None and table.deadline.kind == NEXT_ROUND
        if pausing and view.my_seat not in table.ready:
            out.append(table_pb2.PLAYER_ACTION_READY)
        # A game of a fixed number of rounds (Hand's deals) always plays them all.
        pressable = BY_NAME[table.game_name].presses_last_round
        if creator and pressable and not view.game.public.last_round_pressed:
            out.append(table_pb2.PLAYER_ACTION_PRESS_LAST_ROUND)
        return out

    def _round(self, view: TableView, game: GameView) -> table_pb2.Round:
        name = view.table.game_name
        public = game.public
        deadline = view.table.deadline
        acting: list[int] = []
        if game.turn_seat is not None:
            acting = [game.turn_seat]
        elif view.my_seat is not None and "reveal" in game.actions:
            acting = [view.my_seat]  # who else may reveal is hidden: it shows a hand
        msg = table_pb2.Round(
            round=game.round_no,
            phase=ROUND_PHASES.get(game.phase, table_pb2.ROUND_PHASE_UNSPECIFIED),
            starter_seat=public.starter,
            turn_seat=game.turn_seat,
            turn_drew=public.drew,
            acting_seats=acting,
            pile_count=public.pile,
            discards=self.tiles(name, game.discards),
            shuffle_commitment=game.commitment,
            server_seed=game.server_seed,
            client_seeds=[s or "" for s in public.client_seeds],
            my_rack=table_pb2.Rack(tiles=self.tiles(name, view.my_tiles)),
        )
        if deadline is not None and deadline.kind in ("turn", "window"):
            msg.deadline.CopyFrom(timestamp(deadline.at_ms))
        if game.phase in ("end_reveal", "ended", "between_rounds"):
            msg.result.CopyFrom(self.result(name, public))
        wire = WIRES.get(name)
        if wire is not None:
            wire.round_message(public, lambda tile_id: self.tile(name, tile_id), msg)
        return msg

    def result(self, game: str, public: PublicFacts) -> table_pb2.RoundResult:
        """How the round ended (no winner when the pile ran out or it has not ended), with
        the game's own facts of it (Kishpa: the payout, the bowl, the winning hand)."""
        out = table_pb2.RoundResult(winner_seat=public.winner)
        wire = WIRES.get(game)
        if wire is not None:
            wire.result_message(public, lambda tile_id: self.tile(game, tile_id), out)
        return out

    def groups(
        self, game: str, groups: Sequence[Sequence[int]], kinds: Sequence[str]
    ) -> list[common_pb2.TileGroup]:
        """Groups with their kinds (``run``/``set``; a missing kind stays unspecified)."""
        named = [*kinds, *[""] * (len(groups) - len(kinds))]
        return [
            common_pb2.TileGroup(
                kind=GROUP_KINDS.get(kind, common_pb2.GROUP_KIND_UNSPECIFIED),
                tiles=self.tiles(game, g),
            )
            for g, kind in zip(groups, named, strict=False)
        ]

    def hint(self, game: str, hint: Hint) -> table_pb2.GetHintResponse:
        return table_pb2.GetHintResponse(
            groups=[
                common_pb2.TileGroup(
                    kind=GROUP_KINDS.get(g.kind, common_pb2.GROUP_KIND_UNSPECIFIED),
                    tiles=self.tiles(game, g.tiles),
                )
                for g in hint.groups
            ],
            loose_tiles=self.tiles(game, hint.loose),
            winning_discards=self.tiles(game, hint.winning_discards),
        )

    def event(self, game: str, stored: StoredEvent) -> table_pb2.TableEvent | None:
        """A stream entry already filtered for its viewer (``TableEvent.for_viewer``) as its
        typed message; None for an internal entry clients are not sent."""
        return event_message(stored, lambda tile_id: self._face(game, tile_id), game)

    def shared_event(
        self, game: str, table_id: str, stored: StoredEvent
    ) -> table_pb2.TableEvent | None:
        """:meth:`event`, converted once per form of the entry for every watcher of the table.

        What a viewer sees of an entry is the entry itself, or it without its private part
        (``TableEvent.for_viewer``); which one is told by whether a private part is shown.
        The message returned is shared: callers copy it into their responses, never change it.
        """
        key = (table_id, stored.id, stored.event.private_data is not None)
        try:
            return self._shared[key]
        except KeyError:
            pass
        message = self.event(game, stored)
        shared = self._shared
        if len(shared) >= SHARED_EVENTS:
            del shared[next(iter(shared))]  # the oldest: its watchers have all had it
        shared[key] = message
        return message


def groups_from(msg: Sequence[table_pb2.ProposedGroup]) -> list[list[int]]:
    """A proposed arrangement as lists of tile ids."""
    return [list(g.tile_ids) for g in msg]
