"""Kishpa behind the table service's :class:`~services.table.engine.GameEngine` interface.

A translator, holding no rule: the game across rounds (starter, bowl, streaks, last round,
auto-play) is ``games.kishpa`` (``game``, ``round``, ``autoplay``); the table's rules, the
round dealt next, a timed-out turn and the settlement phases each step records are
``games.kishpa.flow``; what each viewer sees is ``games.kishpa.view``; the deadlines and the
seating are ``games.table``. This module turns table actions into the rules' moves, the
rules' events into stream events, phase records into outbox phases, and the rules' views
into the service's.

The engine's part of the table state (``table.game``) is :meth:`games.kishpa.GameState.to_dict`.
"""

from __future__ import annotations

from typing import Any

import games.kishpa as kishpa
from games import table as rules_table
from games.contributions import deal_seeds
from services.table.engine import (
    BETWEEN_ROUNDS,
    NO_FACTS,
    Action,
    BadRequestError,
    Deadline,
    GameView,
    Hint,
    HintGroup,
    Phase,
    SeatInfo,
    Step,
    Table,
    TableError,
    TableSettings,
    announce_deadline,
    piece_id,
)
from shared.stream import NO_SEAT, PRIVATE, TableEvent

FACES = tuple(str(kishpa.face_of(t)) for t in range(kishpa.TILE_COUNT))
RESTARTS = kishpa.GAME.restarts
"""Round events that begin a new wait (a new deadline even if the kind is the same)."""


def _rules(settings: TableSettings) -> kishpa.RuleSet:
    return kishpa.rules_for(settings)


def _tile_id(value: Any, what: str) -> int:
    return piece_id(value, kishpa.TILE_COUNT, what)


def _table_event(round_no: int, event: kishpa.Event) -> TableEvent:
    """A rules event in the table's stream format; a wholly private one hides its type."""
    if not event.public:
        inner = {"type": event.type, "seat": event.seat, "data": event.data}
        return TableEvent(PRIVATE, round_no, NO_SEAT, {}, event.private_seat, inner)
    return TableEvent(
        event.type, round_no, event.seat, event.data, event.private_seat, event.private_data
    )


def _move(seat: int, action: Action) -> kishpa.Action:
    """The rules' move for a table action, with every argument checked."""
    args = action.args
    if action.kind == "draw":
        source = args.get("source", kishpa.PILE)
        if source not in (kishpa.PILE, kishpa.DISCARD):
            raise BadRequestError("draw from the pile or the discards", "BAD_SOURCE")
        return kishpa.Draw(seat, source)
    if action.kind == "discard":
        return kishpa.Discard(seat, _tile_id(args.get("tile"), "tile"))
    if action.kind == "win":
        tile = _tile_id(args.get("tile"), "tile")
        raw_groups = args.get("arrangement") or ()
        groups = tuple(tuple(_tile_id(t, "arrangement tile") for t in g) for g in raw_groups)
        return kishpa.Win(seat, tile, groups or None)
    if action.kind == "reveal":
        return kishpa.Reveal(seat)
    if action.kind == "decline_reveal":
        return kishpa.Pass(seat)
    raise BadRequestError(f"unknown action {action.kind!r}", "UNKNOWN_ACTION")


class KishpaEngine:
    """Kishpa rounds, bowl and streaks over a table; pure."""

    name = kishpa.GAME.name
    timeouts_before_autoplay = kishpa.DEFAULT_RULES.timeouts_before_autoplay

    @staticmethod
    def _game(table: Table) -> kishpa.GameState | None:
        if not table.game:
            return None
        return kishpa.GameState.from_dict(table.game, table.players, _rules(table.settings))

    def _live_game(self, table: Table) -> kishpa.GameState:
        game = self._game(table)
        if game is None or not game.round_in_progress:
            raise TableError("the round is over; the next one starts shortly", "ROUND_ENDED")
        return game

    def _step(
        self,
        table: Table,
        game: kishpa.GameState,
        events: list[kishpa.Event],
        now_ms: int,
        *,
        timed_out_seat: int | None = None,
        result: dict[str, Any] | None = None,
    ) -> Step:
        """The table step after the game moved (``games.kishpa.settle``)."""
        return self._moved(
            table,
            kishpa.settle(game, events, table.bot_seats()),
            now_ms,
            timed_out_seat=timed_out_seat,
            result=result,
        )

    def _moved(
        self,
        table: Table,
        moved: kishpa.Moved,
        now_ms: int,
        *,
        timed_out_seat: int | None = None,
        result: dict[str, Any] | None = None,
    ) -> Step:
        """The table step of a move: its events, outbox phases, the deadline, closing."""
        game, events = moved.game, moved.events
        state = game.round
        assert state is not None
        round_no = state.round_no
        out = [_table_event(game.round_no - 1, e) for e in moved.earlier]
        out += [_table_event(round_no, e) for e in events]
        phases = [Phase(p.round_no, p.phase, p.record) for p in moved.phases]
        deadline: Deadline | None = None
        waiting = kishpa.waiting_for(state)
        if state.phase == kishpa.ENDED:
            if not game.closed:
                deadline = rules_table.pause_deadline(table, now_ms)
        elif waiting is not None:
            seat = state.turn if waiting == rules_table.TURN else None
            restarted = any(e.type in RESTARTS for e in events)
            deadline = rules_table.deadline_for(table, waiting, seat, now_ms, restarted=restarted)
        announce_deadline(table, round_no, deadline, out)
        return Step(
            game=game.to_dict(),
            events=out,
            phases=phases,
            deadline=deadline,
            result=result or {},
            timed_out_seat=timed_out_seat,
            closed=game.closed,
        )

    def _start_round(self, table: Table, seed: bytes, now_ms: int) -> Step:
        game = self._game(table)
        assert game is not None
        moved = kishpa.next_round(
            game,
            seed,
            deal_seeds(table),
            abandoned=rules_table.abandoned(table),
            bot_seats=table.bot_seats(),
        )
        table.deadline = None
        return self._moved(table, moved, now_ms)

    # ---- the GameEngine interface ------------------------------------------------------

    def check_settings(self, settings: TableSettings) -> None:
        """Kishpa's own options (the table module checks the common limits)."""
        unknown = kishpa.unknown_options(settings.options)
        if unknown:
            raise BadRequestError(f"unknown Kishpa options {unknown}", "BAD_OPTIONS")
        _rules(settings)

    def start(self, table: Table, seed: bytes, now_ms: int) -> Step:
        """Deal the first round."""
        table.game = kishpa.new_game(list(table.players), _rules(table.settings)).to_dict()
        return self._start_round(table, seed, now_ms)

    def act(self, table: Table, seat: int, action: Action, now_ms: int) -> Step:
        """A player's move, checked by the rules."""
        game = self._live_game(table)
        move = _move(seat, action)
        new, events = kishpa.apply_action(game, move)
        result: dict[str, Any] = {}
        drawn = None if new.round is None else new.round.drawn_tile
        if isinstance(move, kishpa.Draw) and drawn is not None:
            result = {"tile_id": drawn, "tile": FACES[drawn]}
        return self._step(table, new, events, now_ms, result=result)

    def on_deadline(self, table: Table, seed: bytes, now_ms: int) -> Step:
        """Play a timed-out turn (auto-play's turn for a seat on it), close a window, or
        deal the next round."""
        deadline = table.deadline
        game = self._game(table)
        if deadline is None or game is None or game.round is None:
            raise TableError("nothing is due", "NOT_DUE")
        if deadline.kind == rules_table.NEXT_ROUND:
            return self._start_round(table, seed, now_ms)
        if deadline.kind == rules_table.WINDOW:
            new, events = kishpa.apply_action(game, kishpa.CloseWindow())
            return self._step(table, new, events, now_ms)
        seat = game.round.turn
        new, events = kishpa.timed_out_turn(
            game,
            seat,
            seed,
            on_autoplay=seat in table.autoplay,
            house_bot=seat in table.bot_seats(),
            bot_level=table.settings.bot_level,
        )
        return self._step(table, new, events, now_ms, timed_out_seat=seat)

    def abandon(self, table: Table, now_ms: int) -> Step | None:
        """Every seat is played by the server after a leave: the round in progress becomes
        the last (``games.kishpa.abandon``); None between rounds, where the next round is
        dealt as the last (``start_round``), or when nothing changes."""
        game = self._game(table)
        if game is None:
            return None
        new, events = kishpa.abandon(game)
        if not events:
            return None
        out = [_table_event(game.round_no, e) for e in events]
        return Step(game=new.to_dict(), events=out, deadline=table.deadline)

    def press_last_round(self, table: Table, now_ms: int) -> Step:
        """The next round to start is the final one."""
        game = self._game(table)
        if game is None:
            raise TableError("the game has not started", "NOT_PLAYING")
        new, events = kishpa.press_last_round(game)
        out = [_table_event(game.round_no, e) for e in events]
        return Step(game=new.to_dict(), events=out, deadline=table.deadline)

    def view(self, table: Table, seat: int | None) -> GameView:
        """Own tiles and public facts only."""
        game = self._game(table)
        view = None if game is None else kishpa.table_view(game, seat)
        if view is None:
            return GameView(0, "waiting", [], [], [], None, [], "", "", NO_FACTS)
        phase = view.phase
        if view.ended and table.status != "closed":
            phase = BETWEEN_ROUNDS
        return GameView(
            round_no=view.round_no,
            phase=phase,
            seats=[
                SeatInfo(s.seat, s.player, s.tiles, streak=s.streak, rounds_won=s.rounds_won)
                for s in view.seats
            ],
            my_tiles=view.my_tiles,
            discards=view.discards,
            turn_seat=view.turn,
            actions=view.actions,
            commitment=view.commitment,
            server_seed=view.server_seed,
            public=view.public,
        )

    def hand(self, table: Table, seat: int) -> list[int]:
        """The seat's tile ids."""
        game = self._game(table)
        return [] if game is None or game.round is None else list(game.round.hands[seat])

    def hint(self, table: Table, seat: int) -> Hint:
        """The solver's advice: the best arrangement of the hand and any winning discards."""
        state = self._live_game(table).round
        assert state is not None
        advice = kishpa.advice_for(state, seat)
        return Hint(
            groups=[HintGroup(kind, list(tiles)) for kind, tiles in advice.groups],
            loose=list(advice.loose),
            winning_discards=list(advice.winning_discards),
        )

    def face(self, tile_id: int) -> str:
        """``R7``, ``DR``..."""
        return FACES[tile_id]
