"""Kishpa behind the table service's :class:`~services.table.engine.GameEngine` interface.

A thin adapter: the round is ``games.kishpa.round`` (B's state machine), the bowl and the
streaks across rounds are ``games.kishpa.bowl``, hints and auto-play are the solver and the
pure bot. This module only converts between the table envelope and those, and decides the
deadlines (turn, reveal window, pause before the next round) from the table's settings.

The engine's part of the table state (``table.game``)::

    {"round": <RoundState dict> | None, "round_no": int, "starter": int,
     "bowl_before": int, "bowl_after": int | None, "streaks": {player: int},
     "wins": {player: int}, "last_round_pressed": bool}
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from games.fair import SERVER_SEED_BYTES, FairStream
from games.kishpa import bot
from games.kishpa import round as rnd
from games.kishpa.bowl import completes_streak, contribution, next_streaks, previous_winner_of
from games.kishpa.payouts import win_payout
from games.kishpa.ruleset import DEFAULT_RULES, RuleSet
from games.kishpa.solver import best_arrangement, winning_discards
from games.kishpa.tiles import TILE_COUNT, face_of
from services.table.engine import (
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
)
from shared.stream import NO_SEAT, PRIVATE, TableEvent

AUTOPLAY_DELAY_MS = 1000
"""A seat on auto-play is played this soon (never later than its turn timer)."""
AUTOPLAY_TAG = "kishpa/table/v1/autoplay"
BETWEEN_ROUNDS = "between_rounds"
FACES = tuple(str(face_of(t)) for t in range(TILE_COUNT))


KNOWN_OPTIONS = frozenset({"allow_high_wrap"})


def _rules(settings: TableSettings) -> RuleSet:
    return replace(
        DEFAULT_RULES,
        turn_seconds=settings.turn_seconds,
        reveal_window_seconds=settings.reveal_window_seconds,
        allow_run_12_13_1=bool(settings.options.get("allow_high_wrap", False)),
        stake=settings.stake,
    )


def _tile_id(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < TILE_COUNT:
        raise BadRequestError(f"{what} must be a tile id 0-{TILE_COUNT - 1}", "MALFORMED_TILE")
    return value


def _table_event(round_no: int, event: rnd.Event) -> TableEvent:
    """A round event in the table's stream format; a wholly private one hides its type."""
    if not event.public:
        inner = {"type": event.type, "seat": event.seat, "data": event.data}
        return TableEvent(PRIVATE, round_no, NO_SEAT, {}, event.private_seat, inner)
    return TableEvent(
        event.type, round_no, event.seat, event.data, event.private_seat, event.private_data
    )


class KishpaEngine:
    """Kishpa rounds, bowl and streaks over a table; pure."""

    name = "kishpa"
    timeouts_before_autoplay = DEFAULT_RULES.timeouts_before_autoplay

    # ---- state helpers -----------------------------------------------------------------

    @staticmethod
    def _round(table: Table) -> rnd.RoundState | None:
        raw = table.game.get("round")
        return None if raw is None else rnd.RoundState.from_dict(raw)

    def _live_round(self, table: Table) -> rnd.RoundState:
        state = self._round(table)
        if state is None or state.phase == rnd.ENDED:
            raise TableError("the round is over; the next one starts shortly", "ROUND_ENDED")
        return state

    def _deadline(
        self,
        table: Table,
        state: rnd.RoundState,
        events: Sequence[rnd.Event],
        now_ms: int,
    ) -> Deadline | None:
        """Keep the running deadline within a turn or window; start a new one when it changes.

        A window's deadline names no seats: who may reveal shows who holds the kishpa.
        """
        waiting = rnd.waiting_for(state)
        if waiting is None:
            return None
        restarted = any(
            e.type in ("turn_started", "reveal_window_opened", "kishpa_replaced") for e in events
        )
        previous = table.deadline
        if previous is not None and previous.kind == waiting and not restarted:
            return previous
        if waiting == "window":
            return Deadline(now_ms + table.settings.reveal_window_seconds * 1000, "window")
        turn_ms = table.settings.turn_seconds * 1000
        if state.turn in table.autoplay:
            turn_ms = min(turn_ms, AUTOPLAY_DELAY_MS)
        return Deadline(now_ms + turn_ms, "turn", (state.turn,))

    def _step(
        self,
        table: Table,
        state: rnd.RoundState,
        events: list[rnd.Event],
        now_ms: int,
        *,
        timed_out_seat: int | None = None,
        result: dict[str, Any] | None = None,
    ) -> Step:
        """The table step after the round moved: outbox phases, round end, deadline."""
        state, events = self._bots_in_window(table, state, events)
        game = dict(table.game)
        game["round"] = state.to_dict()
        round_no = state.round_no
        out = [_table_event(round_no, e) for e in events]
        phases: list[Phase] = []
        closed = False
        deadline: Deadline | None
        for event in events:
            if event.type != "phase_recorded":
                continue
            if event.data["phase"] == "start":
                phases.append(Phase(round_no, "start", rnd.start_record(state)))
            else:
                phases.append(Phase(round_no, "end", rnd.end_record(state)))
        if state.phase == rnd.ENDED and game.get("bowl_after") is None:
            closed = self._finish_round(table, game, state, out)
            pause = table.settings.next_round_pause_ms
            deadline = None if closed else Deadline(now_ms + pause, "next_round")
        else:
            deadline = self._deadline(table, state, events, now_ms)
        announce_deadline(table, round_no, deadline, out)
        return Step(
            game=game,
            events=out,
            phases=phases,
            deadline=deadline,
            result=result or {},
            timed_out_seat=timed_out_seat,
            closed=closed,
        )

    def _finish_round(
        self,
        table: Table,
        game: dict[str, Any],
        state: rnd.RoundState,
        out: list[TableEvent],
    ) -> bool:
        """Bowl and streaks after a round; True when the table closes (the last round)."""
        rules = state.ruleset
        winner = None if state.winner is None else state.players[state.winner]
        bowl_now = state.bowl + contribution(state.kishpa, rules) * len(state.players)
        took = completes_streak(winner, state.previous_winner, rules) and bowl_now > 0
        game["streaks"] = next_streaks(dict(game["streaks"]), winner, took)
        wins: dict[str, int] = dict(game["wins"])
        if winner is not None:
            wins[winner] = wins.get(winner, 0) + 1
        game["wins"] = wins
        outcome = "kept"
        if took:
            outcome = "taken"
        elif state.last_round:
            outcome = "split"
        game["bowl_after"] = 0 if outcome != "kept" else bowl_now
        game["bowl_outcome"] = outcome
        out.append(
            TableEvent(
                "bowl",
                state.round_no,
                NO_SEAT if state.winner is None else state.winner,
                {
                    "outcome": outcome,
                    "amount": bowl_now,
                    "bowl": game["bowl_after"],
                    "winner": winner,
                    "streaks": game["streaks"],
                },
            )
        )
        return bool(state.last_round)

    def _new_round(
        self, table: Table, game: dict[str, Any], seed: bytes
    ) -> tuple[rnd.RoundState, list[rnd.Event]]:
        previous = self._round(table)
        seats = len(table.players)
        starter = 0 if previous is None else (int(game["starter"]) + 1) % seats
        round_no = int(game.get("round_no", 0)) + 1
        bowl = int(game["bowl_after"]) if game.get("bowl_after") is not None else 0
        rules = _rules(table.settings)
        state, events = rnd.new_round(
            list(table.players),
            starter,
            seed,
            [table.client_seeds.get(p) for p in table.players],
            round_no=round_no,
            bowl=bowl,
            previous_winner=previous_winner_of(game["streaks"], rules),
            last_round=bool(game.get("last_round_pressed")),
            rules=rules,
        )
        game.update(
            round_no=round_no, starter=starter, bowl_before=bowl, bowl_after=None, bowl_outcome=None
        )
        return state, events

    # ---- the GameEngine interface ------------------------------------------------------

    def check_settings(self, settings: TableSettings) -> None:
        """Kishpa seats 2-4 players (the service checks the common limits)."""
        unknown = set(settings.options) - KNOWN_OPTIONS
        if unknown:
            raise BadRequestError(f"unknown Kishpa options {sorted(unknown)}", "BAD_OPTIONS")
        _rules(settings)

    def start(self, table: Table, seed: bytes, now_ms: int) -> Step:
        """Deal the first round."""
        table.game = {
            "round": None,
            "round_no": 0,
            "starter": 0,
            "bowl_before": 0,
            "bowl_after": None,
            "streaks": dict.fromkeys(table.players, 0),
            "wins": dict.fromkeys(table.players, 0),
            "last_round_pressed": False,
        }
        return self._start_round(table, seed, now_ms)

    def _start_round(self, table: Table, seed: bytes, now_ms: int) -> Step:
        game = dict(table.game)
        abandoned = bool(table.players) and len(set(table.autoplay)) == len(table.players)
        pressed_now = abandoned and not game.get("last_round_pressed")
        if pressed_now:
            # Nobody plays any more: the next round is the last, so the bowl is paid out
            # and the table closes instead of bots playing it forever.
            game["last_round_pressed"] = True
        state, events = self._new_round(table, game, seed)
        table.game = game
        table.deadline = None
        step = self._step(table, state, events, now_ms)
        if pressed_now:
            step.events.insert(
                0,
                TableEvent(
                    "last_round_pressed",
                    state.round_no - 1,
                    NO_SEAT,
                    {"next_round": state.round_no, "reason": "every seat on auto-play"},
                ),
            )
        return step

    def act(self, table: Table, seat: int, action: Action, now_ms: int) -> Step:
        """A player's move, checked by the round's rules."""
        state = self._live_round(table)
        args = action.args
        move: rnd.Action
        if action.kind == "draw":
            source = args.get("source", rnd.PILE)
            if source not in (rnd.PILE, rnd.DISCARD):
                raise BadRequestError("draw from the pile or the discards", "BAD_SOURCE")
            move = rnd.Draw(seat, source)
        elif action.kind == "discard":
            move = rnd.Discard(seat, _tile_id(args.get("tile"), "tile"))
        elif action.kind == "win":
            tile = _tile_id(args.get("tile"), "tile")
            raw_groups = args.get("arrangement") or ()
            groups = tuple(
                tuple(_tile_id(t, "arrangement tile") for t in group) for group in raw_groups
            )
            move = rnd.Win(seat, tile, groups or None)
        elif action.kind == "reveal":
            move = rnd.Reveal(seat)
        elif action.kind == "decline_reveal":
            move = rnd.Pass(seat)
        else:
            raise BadRequestError(f"unknown action {action.kind!r}", "UNKNOWN_ACTION")
        new, events = rnd.apply(state, move)
        result: dict[str, Any] = {}
        if isinstance(move, rnd.Draw) and new.drawn_tile is not None:
            result = {"tile_id": new.drawn_tile, "tile": str(face_of(new.drawn_tile))}
        return self._step(table, new, events, now_ms, result=result)

    def on_deadline(self, table: Table, seed: bytes, now_ms: int) -> Step:
        """Play a timed-out turn, close a window, or deal the next round."""
        deadline = table.deadline
        state = self._round(table)
        if deadline is None or state is None:
            raise TableError("nothing is due", "NOT_DUE")
        if deadline.kind == "next_round":
            return self._start_round(table, seed, now_ms)
        if deadline.kind == "window":
            new, events = rnd.apply(state, rnd.CloseWindow())
            return self._step(table, new, events, now_ms)
        seat = state.turn
        if seat in table.autoplay:
            new, events = self._autoplay(state, seat, seed)
        else:
            new, events = rnd.apply(state, rnd.TurnTimeout(seat))
        return self._step(table, new, events, now_ms, timed_out_seat=seat)

    @staticmethod
    def _bots_in_window(
        table: Table, state: rnd.RoundState, events: list[rnd.Event]
    ) -> tuple[rnd.RoundState, list[rnd.Event]]:
        """The service's bots reveal or pass as soon as a reveal window waits for them, so a
        window with bots lasts only as long as its human players take.

        The window waits for every seat that might hold the kishpa, so a bot's prompt answer
        tells nobody anything about its hand. No randomness is drawn (the stream is unused).
        """
        bots = set(table.bot_seats())
        if not bots:
            return state, events
        stream = FairStream(bytes(SERVER_SEED_BYTES), (), AUTOPLAY_TAG)
        for _ in range(2 * len(state.players)):  # a start window may be followed by another
            if rnd.waiting_for(state) != "window":
                break
            pending = [s for s in rnd.window_waits_for(state) if s in bots]
            move = None
            for seat in pending:
                move = bot.choose_action(rnd.view_for(state, seat), stream, state.ruleset)
                if move is not None:
                    break
            if move is None:
                break
            state, more = rnd.apply(state, move)
            events = [*events, *more]
        return state, events

    @staticmethod
    def _autoplay(
        state: rnd.RoundState, seat: int, seed: bytes
    ) -> tuple[rnd.RoundState, list[rnd.Event]]:
        """The bot plays the seat's whole turn (draw, then discard or win)."""
        stream = FairStream(seed, (), AUTOPLAY_TAG)
        events: list[rnd.Event] = []
        for _ in range(3):
            if state.phase not in (rnd.FIRST_DISCARD, rnd.TURNS) or state.turn != seat:
                break
            move = bot.choose_action(rnd.view_for(state, seat), stream, state.ruleset)
            if move is None:
                break
            state, more = rnd.apply(state, move)
            events += more
        if state.phase in (rnd.FIRST_DISCARD, rnd.TURNS) and state.turn == seat:
            state, more = rnd.apply(state, rnd.TurnTimeout(seat))
            events += more
        return state, events

    def press_last_round(self, table: Table, now_ms: int) -> Step:
        """The next round to start is the final one."""
        game = dict(table.game)
        state = self._round(table)
        if game.get("last_round_pressed") or (state is not None and state.last_round):
            raise TableError("last round was already pressed", "ALREADY_PRESSED")
        game["last_round_pressed"] = True
        round_no = int(game.get("round_no", 0))
        event = TableEvent("last_round_pressed", round_no, NO_SEAT, {"next_round": round_no + 1})
        return Step(game=game, events=[event], deadline=table.deadline)

    def view(self, table: Table, seat: int | None) -> GameView:
        """Own tiles and public facts only."""
        game = table.game
        state = self._round(table)
        if state is None:
            return GameView(0, "waiting", [], [], [], None, [], "", "", {})
        raw = rnd.view_for(state, seat)
        players = state.players
        seats = [
            SeatInfo(
                s,
                p,
                len(state.hands[s]),
                streak=int(game["streaks"].get(p, 0)),
                rounds_won=int(game["wins"].get(p, 0)),
            )
            for s, p in enumerate(players)
        ]
        if state.phase == rnd.ENDED:
            bowl = int(game["bowl_after"] or 0)
        elif state.phase == rnd.START_REVEAL:
            bowl = state.bowl
        else:
            bowl = state.bowl + contribution(state.kishpa, state.ruleset) * len(players)
        actions: list[str] = []
        if seat is not None:
            if raw.get("may_reveal"):
                actions = ["reveal", "decline_reveal"]
            elif raw.get("window_waits_for_me"):
                actions = ["decline_reveal"]  # every seat passes, so nobody learns who holds it
            elif state.phase in (rnd.FIRST_DISCARD, rnd.TURNS) and state.turn == seat:
                if state.phase == rnd.TURNS and not state.drew:
                    actions = ["draw"]
                else:
                    actions = ["discard", "win"]
        phase = state.phase
        if phase == rnd.ENDED and table.status != "closed":
            phase = BETWEEN_ROUNDS
        public = {
            "kishpa_ids": list(state.kishpa_tiles),
            "kishpa": raw["kishpa"],
            "kishpas": raw["kishpas"],
            "joker": raw["joker"],
            "starter": state.starter,
            "drew": state.drew,
            "pile": raw["pile"],
            "bowl": bowl,
            "last_round": state.last_round,
            "last_round_pressed": bool(game.get("last_round_pressed")),
            "start_reveal": raw["start_reveal"],
            "end_reveal": raw["end_reveal"],
            "winner": raw["winner"],
            "final_discard": raw["final_discard"],
            "winning_groups": [list(g) for g in state.winning_groups],
            "final_discard_id": state.final_discard,
            "win_payout": self._win_payout(state),
            "bowl_taken": game.get("bowl_outcome") == "taken",
            "client_seeds": raw["client_seeds"],
        }
        return GameView(
            round_no=state.round_no,
            phase=phase,
            seats=seats,
            my_tiles=[] if seat is None else list(state.hands[seat]),
            discards=list(state.discards),
            turn_seat=raw["turn"],
            actions=actions,
            commitment=state.commitment,
            server_seed=raw["server_seed"] or "",
            public=public,
        )

    @staticmethod
    def _win_payout(state: rnd.RoundState) -> int:
        if state.winner is None or state.final_discard is None:
            return 0
        hand = [face_of(t) for t in state.hands[state.winner]]
        return win_payout(hand, face_of(state.final_discard), state.kishpa, state.ruleset)

    def hand(self, table: Table, seat: int) -> list[int]:
        """The seat's tile ids."""
        state = self._round(table)
        return [] if state is None else list(state.hands[seat])

    def hint(self, table: Table, seat: int) -> Hint:
        """The solver's advice: the best arrangement of the hand and any winning discards."""
        state = self._live_round(table)
        ids = list(state.hands[seat])
        faces = [face_of(t) for t in ids]
        rules = state.ruleset
        groups = best_arrangement(faces, state.joker, rules)
        winners: list[int] = []
        if len(ids) == rules.hand_size + 1:
            wins = winning_discards(faces, state.kishpa, rules)
            winners = [ids[w.position] for w in sorted(wins, key=lambda w: -w.payout_per_loser)]
            if wins:  # show the arrangement that wins (the best-paying one)
                best = max(wins, key=lambda w: w.payout_per_loser)
                groups = best.arrangement
        grouped = {p for g in groups for p in g.positions}
        return Hint(
            groups=[HintGroup(g.kind, [ids[p] for p in g.positions]) for g in groups],
            loose=[ids[p] for p in range(len(ids)) if p not in grouped],
            winning_discards=winners,
        )

    def face(self, tile_id: int) -> str:
        """``R7``, ``DR``..."""
        return FACES[tile_id]
