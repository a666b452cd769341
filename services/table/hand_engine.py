"""Hand (Rummy 51) behind the table service's :class:`~services.table.engine.GameEngine`.

A translator over the pure ``games.hand`` package, holding no rule: a game is
``rules.deals_per_game`` deals (7); each deal is ``games.hand``'s ``apply``; opening a game,
closing a deal and the settlement phases each is due are ``games.hand.flow``; what each viewer
sees (and a seat's advice) is ``games.hand.view``; the deadlines and auto-play are
``games.table``. This module converts between the table envelope and those.

Rounds of the table are the deals, numbered from 1. Settlement has two phases per game (the
rules say when): ``buy_in`` at round 0, written by the commit that starts the game, and
``payout`` at the last deal's round number, written by the commit that scores it.

The engine's part of the table state (``table.game``)::

    {"game": <GameState dict>, "deal": <DealState dict> | None, "round_no": int,
     "server_seed": hex of the current deal's seed (revealed only once the deal ended)}

A turn that times out is played by ``games.hand.autoplay_action`` (the rules' ``TimeOut``:
draw from the stock and discard the card drawn); a seat on auto-play gets that after a short
delay instead of a full turn. A house bot's seat is played a whole turn at a time by
``games.hand.house_bot_turn`` (the solver bot, or draw-and-discard at ``bot_level`` easy).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import games.hand as hand
from games import table as rules_table
from games.contributions import deal_seeds
from games.fair import SERVER_SEED_BYTES, FairStream
from services.common.compat import compat_hit
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
from shared.stream import NO_SEAT, TableEvent

ABANDONED = "the last player left"
"""The ``reason`` of the ``last_round_pressed`` an abandoned table publishes."""
BUY_IN_ROUND = 0
"""The round of the ``game_started`` event (before the first deal)."""
FACES = tuple(hand.card_text(c) for c in range(hand.CARD_COUNT))
DRAW_SOURCES: dict[str, type[hand.DrawStock | hand.DrawDiscard]] = {
    "pile": hand.DrawStock,
    "stock": hand.DrawStock,
    "discard": hand.DrawDiscard,
}
RUN_ENDS = ("low", "high")
RESTARTS = hand.GAME.restarts
"""Deal events that begin a new turn (a new deadline even for the same seat)."""
NO_STREAM = FairStream(bytes(SERVER_SEED_BYTES), (), "kishpa/table/v1/hand-autoplay")
"""Hand's auto-play draws nothing from its stream (the rules' timeout involves no choice)."""


def _card(value: Any, what: str) -> int:
    return piece_id(value, hand.CARD_COUNT, what, "card")


def _cards(values: Any, what: str) -> tuple[int, ...]:
    if isinstance(values, str | bytes) or not isinstance(values, Sequence) or not values:
        raise BadRequestError(f"{what} must be a non-empty list of card ids", "MALFORMED_TILE")
    return tuple(_card(v, what) for v in values)


def _meld_id(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise BadRequestError("meld_id must be a meld's id (0 or more)", "BAD_MELD_ID")
    return value


def _meld_spec(value: Any) -> hand.MeldSpec:
    """A meld asked for as a list of card ids, or ``{"cards": [...], "kind": "run"|"set"}``."""
    kind: hand.MeldKind | None = None
    cards = value
    if isinstance(value, Mapping):
        cards = value.get("cards")
        raw_kind = value.get("kind") or None
        if raw_kind is not None:
            try:
                kind = hand.MeldKind(raw_kind)
            except ValueError:
                raise BadRequestError("a meld's kind is run or set", "BAD_MELD_KIND") from None
    return hand.MeldSpec(_cards(cards, "meld cards"), kind)


def _table_event(round_no: int, event: hand.Event) -> TableEvent:
    """A deal event in the table stream's format (a private one stays wholly private)."""
    parts = event.stream_parts()
    return TableEvent(
        str(parts["type"]),
        round_no,
        int(parts["seat"]),
        parts["data"],
        parts["private_seat"],
        parts["private_data"],
    )


def _phase(due: hand.PhaseRecord) -> Phase:
    """A settlement phase the rules say is due, as the outbox's phase (round = deals played)."""
    return Phase(due.deals_played, due.phase, due.record)


def _seeds_used(table: Table) -> list[str | None]:
    """The client seeds the current deal was shuffled with (its contributions, else the
    sit-down seeds; a deal stored before contributions existed: the sit-down seeds)."""
    used = table.game.get("client_seeds")
    if used is None:
        # Compatibility (services/common/compat.py): goes once this counter has stayed 0 for
        # a week on every replica (a game is 7 deals), and in any case by 2027-03-01.
        compat_hit("hand_deal_without_contributions")
        return [table.client_seeds.get(p) for p in table.players]
    return [None if s is None else str(s) for s in used]


def _rules(settings: TableSettings) -> hand.RuleSet:
    """The rules a table plays by (Hand's turn timer is the table's; the rulings are fixed)."""
    del settings
    return hand.DEFAULT_RULES


class HandEngine:
    """Games of Hand (7 deals and a token pot) over a table; pure."""

    name = hand.GAME.name
    timeouts_before_autoplay = hand.TIMEOUTS_BEFORE_AUTOPLAY

    # ---- state helpers -----------------------------------------------------------------

    @staticmethod
    def _game(table: Table) -> hand.GameState:
        return hand.GameState.from_dict(table.game["game"])

    @staticmethod
    def _deal(table: Table) -> hand.DealState | None:
        raw = table.game.get("deal") if table.game else None
        return None if raw is None else hand.DealState.from_dict(raw)

    def _live_deal(self, table: Table) -> hand.DealState:
        deal = self._deal(table)
        if deal is None or deal.phase is hand.Phase.ENDED:
            raise TableError("the deal is over; the next one starts shortly", "ROUND_ENDED")
        return deal

    def _step(
        self,
        table: Table,
        deal: hand.DealState,
        events: list[hand.Event],
        now_ms: int,
        *,
        before: list[TableEvent] | None = None,
        phases: list[Phase] | None = None,
        timed_out_seat: int | None = None,
        result: dict[str, Any] | None = None,
    ) -> Step:
        """The table step after the deal moved: scores, payout, closing, the deadline."""
        game_dict = dict(table.game)
        game_dict["deal"] = deal.to_dict()
        round_no = int(game_dict["round_no"])
        out = list(before or [])
        out += [_table_event(round_no, e) for e in events]
        all_phases = list(phases or [])
        closed = False
        deadline: Deadline | None
        if deal.phase is hand.Phase.ENDED:
            game, ended, due = hand.close_deal(
                hand.GameState.from_dict(game_dict["game"]),
                deal,
                str(game_dict.get("server_seed", "")),
                _seeds_used(table),
            )
            game_dict["game"] = game.to_dict()
            out += [_table_event(round_no, e) for e in ended]
            all_phases += [_phase(p) for p in due]
            if game.finished:
                closed = True
                deadline = None
            else:
                deadline = rules_table.pause_deadline(table, now_ms)
        else:
            restarted = any(e.kind in RESTARTS for e in events)
            deadline = rules_table.deadline_for(
                table, rules_table.TURN, deal.turn, now_ms, restarted=restarted
            )
        announce_deadline(table, round_no, deadline, out)
        return Step(
            game=game_dict,
            events=out,
            phases=all_phases,
            deadline=deadline,
            result=result or {},
            timed_out_seat=timed_out_seat,
            closed=closed,
        )

    def _start_deal(
        self,
        table: Table,
        seed: bytes,
        now_ms: int,
        *,
        before: list[TableEvent] | None = None,
        phases: list[Phase] | None = None,
    ) -> Step:
        game = self._game(table)
        seeds = deal_seeds(table)
        deal, events = hand.start_deal(game, seed, seeds)
        table.game = {
            **table.game,
            "round_no": game.deals_played + 1,
            "server_seed": seed.hex(),
            "client_seeds": seeds,
        }
        table.deadline = None
        return self._step(table, deal, events, now_ms, before=before, phases=phases)

    # ---- the GameEngine interface ------------------------------------------------------

    def check_settings(self, settings: TableSettings) -> None:
        """Hand's seats and stake (``games.hand.check_table``)."""
        hand.check_table(settings.seats, settings.stake, _rules(settings))

    def start(self, table: Table, seed: bytes, now_ms: int) -> Step:
        """Buy every player into the pot (phase ``buy_in``, round 0) and deal the first deal."""
        game, opened, due = hand.open_game(
            list(table.players), table.settings.stake, _rules(table.settings)
        )
        table.game = {"game": game.to_dict(), "deal": None, "round_no": 0, "server_seed": ""}
        started = [_table_event(BUY_IN_ROUND, e) for e in opened]
        buy_in = [_phase(p) for p in due]
        return self._start_deal(table, seed, now_ms, before=started, phases=buy_in)

    def _move(self, seat: int, action: Action) -> hand.Action:
        """The rules' action for a table action, with every argument checked."""
        args = action.args
        if action.kind == "draw":
            source = DRAW_SOURCES.get(str(args.get("source", "pile")))
            if source is None:
                raise BadRequestError("draw from the pile (stock) or the discards", "BAD_SOURCE")
            return source(seat)
        if action.kind == "discard":
            return hand.Discard(seat, _card(args.get("tile"), "tile"))
        if action.kind == "lay_melds":
            melds = args.get("melds")
            if isinstance(melds, str | bytes) or not isinstance(melds, Sequence) or not melds:
                raise BadRequestError("lay at least one meld", "BAD_MELDS")
            return hand.LayMelds(seat, tuple(_meld_spec(m) for m in melds))
        if action.kind == "lay_off":
            end = args.get("end") or None
            if end is not None and end not in RUN_ENDS:
                raise BadRequestError("end is low or high", "BAD_END")
            return hand.LayOff(
                seat, _meld_id(args.get("meld_id")), _card(args.get("tile"), "tile"), end
            )
        if action.kind == "release_joker":
            return hand.ReleaseJoker(
                seat, _meld_id(args.get("meld_id")), _cards(args.get("tiles"), "tiles")
            )
        if action.kind == "undo_turn":
            return hand.UndoTurn(seat)
        raise BadRequestError(f"Hand has no action {action.kind!r}", "UNKNOWN_ACTION")

    def act(self, table: Table, seat: int, action: Action, now_ms: int) -> Step:
        """A player's move, checked by the Hand rules."""
        deal = self._live_deal(table)
        move = self._move(seat, action)
        new, events = hand.apply(deal, move)
        result: dict[str, Any] = {}
        if isinstance(move, hand.DrawStock | hand.DrawDiscard) and new.drawn_card is not None:
            result = {"tile_id": new.drawn_card, "tile": FACES[new.drawn_card]}
        return self._step(table, new, events, now_ms, result=result)

    def on_deadline(self, table: Table, seed: bytes, now_ms: int) -> Step:
        """Deal the next deal, play a house bot's whole turn (``games.hand.house_bot_turn`` at
        the table's bot level), or play a timed-out turn (``games.hand.autoplay_action``: the
        rules' timeout, the same whether or not the seat is on auto-play)."""
        deadline = table.deadline
        deal = self._deal(table)
        if deadline is None or deal is None:
            raise TableError("nothing is due", "NOT_DUE")
        if deadline.kind == "next_round":
            return self._start_deal(table, seed, now_ms)
        seat = deal.turn
        if seat in table.bot_seats():
            new, events = hand.house_bot_turn(deal, seed, table.settings.bot_level)
            return self._step(table, new, events, now_ms, timed_out_seat=seat)
        move = hand.autoplay_action(deal, seat, NO_STREAM)
        if move is None:
            raise TableError("nothing is due", "NOT_DUE")
        new, events = hand.apply(deal, move)
        return self._step(table, new, events, now_ms, timed_out_seat=seat)

    def abandon(self, table: Table, now_ms: int) -> Step | None:
        """Every seat is played by the server after a leave: the game ends with the deal in
        progress, or at once between deals (``games.hand.abandon``); None when nothing
        changes (the ruling is off, or it ended already)."""
        deal = self._deal(table)
        if deal is None:
            return None
        game = self._game(table)
        ended = deal.phase is hand.Phase.ENDED
        new, events, due = hand.abandon(game, ended)
        if new == game:
            return None
        round_no = int(table.game["round_no"])
        data = {"next_round": round_no, "reason": ABANDONED}
        out = [TableEvent("last_round_pressed", round_no, NO_SEAT, data)]
        out += [_table_event(round_no, e) for e in events]
        return Step(
            game={**table.game, "game": new.to_dict()},
            events=out,
            phases=[_phase(p) for p in due],
            deadline=None if new.finished else table.deadline,
            closed=new.finished,
        )

    def press_last_round(self, table: Table, now_ms: int) -> Step:
        """A Hand game is always its full number of deals: nothing to press."""
        raise TableError("a Hand game always plays all its deals", "NOT_SUPPORTED")

    def view(self, table: Table, seat: int | None) -> GameView:
        """The seat's view as ``games.hand.view_for`` decides it (own cards, the melds on the
        table and public facts; never another hand before the deal ends, nor the stock)."""
        deal: dict[str, Any] | None = table.game.get("deal") if table.game else None
        if deal is None:
            return GameView(0, "waiting", [], [], [], None, [], "", "", NO_FACTS)
        view = hand.view_for(
            self._game(table),
            deal,
            seat,
            server_seed_hex=str(table.game.get("server_seed", "")),
            client_seeds=_seeds_used(table),
        )
        phase = view.phase
        if view.ended and table.status != "closed":
            phase = BETWEEN_ROUNDS
        return GameView(
            round_no=int(table.game["round_no"]),
            phase=phase,
            seats=[
                SeatInfo(s.seat, s.player, s.cards, streak=0, rounds_won=s.deals_won, score=s.total)
                for s in view.seats
            ],
            my_tiles=view.my_cards,
            discards=view.discards,
            turn_seat=view.turn,
            actions=view.actions,
            commitment=view.commitment,
            server_seed=view.server_seed,
            public=view.public,
        )

    def hand(self, table: Table, seat: int) -> list[int]:
        """The seat's card ids."""
        deal = self._deal(table)
        return [] if deal is None else list(deal.hands[seat])

    def hint(self, table: Table, seat: int) -> Hint:
        """The melds that would lay down the most cards of the seat's hand now."""
        advice = hand.advice_for(self._live_deal(table), seat)
        return Hint(
            groups=[HintGroup(kind, list(cards)) for kind, cards in advice.groups],
            loose=list(advice.loose),
            winning_discards=[],
        )

    def face(self, tile_id: int) -> str:
        """``AS``, ``10H``, ``J1``..."""
        return FACES[tile_id]
