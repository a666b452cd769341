"""Hand (Rummy 51) behind the table service's :class:`~services.table.engine.GameEngine`.

A thin adapter over the pure ``games.hand`` package: a game is ``rules.deals_per_game``
deals (7); each deal is ``games.hand.turns``; the totals and the pot are ``games.hand.game``.
This module converts between the table envelope and those, and decides the deadlines.

Rounds of the table are the deals, numbered from 1. Settlement has two phases per game:

* ``buy_in`` at round 0, written by the commit that starts the game (every player pays the
  stake into the table's pot);
* ``payout`` at the last deal's round number, written by the commit that scores it.

The engine's part of the table state (``table.game``)::

    {"game": <GameState dict>, "deal": <DealState dict> | None, "round_no": int,
     "server_seed": hex of the current deal's seed (revealed only once the deal ended)}

A turn that times out is played by the rules' ``TimeOut``: draw from the stock and discard
the card drawn. A seat on auto-play gets that after a short delay instead of a full turn.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from games.hand import turns
from games.hand.actions import Action as HandAction
from games.hand.actions import (
    Discard,
    DrawDiscard,
    DrawStock,
    LayMelds,
    LayOff,
    MeldSpec,
    ReleaseJoker,
    TimeOut,
    UndoTurn,
)
from games.hand.cards import CARD_COUNT, card_text
from games.hand.deal_state import DealState
from games.hand.deal_state import Phase as DealPhase
from games.hand.events import Event
from games.hand.game import GameState, record_deal, start_deal, start_game
from games.hand.meld_search import best_melds
from games.hand.melds import MeldKind, make_meld
from games.hand.record import BUY_IN, PAYOUT, buy_in_record, payout_record
from games.hand.ruleset import DEFAULT_RULES, RuleSet
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
from shared.stream import NO_SEAT, TableEvent

AUTOPLAY_DELAY_MS = 1000
"""A seat on auto-play is played this soon (never later than its turn timer)."""
BETWEEN_ROUNDS = "between_rounds"
BUY_IN_ROUND = 0
"""The round number of the ``buy_in`` phase (before the first deal)."""
FACES = tuple(card_text(c) for c in range(CARD_COUNT))
DRAW_SOURCES: dict[str, type[DrawStock | DrawDiscard]] = {
    "pile": DrawStock,
    "stock": DrawStock,
    "discard": DrawDiscard,
}
RUN_ENDS = ("low", "high")


def _card(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < CARD_COUNT:
        raise BadRequestError(f"{what} must be a card id 0-{CARD_COUNT - 1}", "MALFORMED_TILE")
    return value


def _cards(values: Any, what: str) -> tuple[int, ...]:
    if isinstance(values, str | bytes) or not isinstance(values, Sequence) or not values:
        raise BadRequestError(f"{what} must be a non-empty list of card ids", "MALFORMED_TILE")
    return tuple(_card(v, what) for v in values)


def _meld_id(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise BadRequestError("meld_id must be a meld's id (0 or more)", "BAD_MELD_ID")
    return value


def _meld_spec(value: Any) -> MeldSpec:
    """A meld asked for as a list of card ids, or ``{"cards": [...], "kind": "run"|"set"}``."""
    kind: MeldKind | None = None
    cards = value
    if isinstance(value, Mapping):
        cards = value.get("cards")
        raw_kind = value.get("kind") or None
        if raw_kind is not None:
            try:
                kind = MeldKind(raw_kind)
            except ValueError:
                raise BadRequestError("a meld's kind is run or set", "BAD_MELD_KIND") from None
    return MeldSpec(_cards(cards, "meld cards"), kind)


def _table_event(round_no: int, event: Event) -> TableEvent:
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


def _rules(settings: TableSettings) -> RuleSet:
    """The rules a table plays by (Hand's turn timer is the table's; the rulings are fixed)."""
    del settings
    return DEFAULT_RULES


class HandEngine:
    """Games of Hand (7 deals and a token pot) over a table; pure."""

    name = "hand"
    timeouts_before_autoplay = 3

    # ---- state helpers -----------------------------------------------------------------

    @staticmethod
    def _game(table: Table) -> GameState:
        return GameState.from_dict(table.game["game"])

    @staticmethod
    def _deal(table: Table) -> DealState | None:
        raw = table.game.get("deal") if table.game else None
        return None if raw is None else DealState.from_dict(raw)

    def _live_deal(self, table: Table) -> DealState:
        deal = self._deal(table)
        if deal is None or deal.phase is DealPhase.ENDED:
            raise TableError("the deal is over; the next one starts shortly", "ROUND_ENDED")
        return deal

    def _turn_deadline(
        self, table: Table, deal: DealState, events: Sequence[Event], now_ms: int
    ) -> Deadline:
        """Keep the running turn's deadline while the same turn goes on; a new turn restarts it."""
        previous = table.deadline
        restarted = any(e.kind in ("turn_started", "deal_started") for e in events)
        if (
            previous is not None
            and previous.kind == "turn"
            and previous.seats == (deal.turn,)
            and not restarted
        ):
            return previous
        turn_ms = table.settings.turn_seconds * 1000
        if deal.turn in table.autoplay:
            turn_ms = min(turn_ms, AUTOPLAY_DELAY_MS)
        return Deadline(now_ms + turn_ms, "turn", (deal.turn,))

    def _step(
        self,
        table: Table,
        deal: DealState,
        events: list[Event],
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
        if deal.phase is DealPhase.ENDED:
            game, scored = record_deal(GameState.from_dict(game_dict["game"]), deal)
            game_dict["game"] = game.to_dict()
            out.append(
                TableEvent(
                    "seed_revealed",
                    round_no,
                    NO_SEAT,
                    {
                        "server_seed": game_dict.get("server_seed", ""),
                        "commitment": deal.commitment,
                        "client_seeds": [table.client_seeds.get(p) for p in table.players],
                    },
                )
            )
            out += [_table_event(round_no, e) for e in scored]
            if game.finished:
                all_phases.append(Phase(round_no, PAYOUT, payout_record(game)))
                closed = True
                deadline = None
            else:
                deadline = Deadline(now_ms + table.settings.next_round_pause_ms, "next_round")
        else:
            deadline = self._turn_deadline(table, deal, events, now_ms)
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
        deal, events = start_deal(game, seed, [table.client_seeds.get(p) for p in table.players])
        table.game = {
            **table.game,
            "round_no": game.deals_played + 1,
            "server_seed": seed.hex(),
        }
        table.deadline = None
        return self._step(table, deal, events, now_ms, before=before, phases=phases)

    # ---- the GameEngine interface ------------------------------------------------------

    def check_settings(self, settings: TableSettings) -> None:
        """Hand seats 2-4 players with the table's stake as each player's buy-in."""
        rules = _rules(settings)
        if not rules.min_seats <= settings.seats <= rules.max_seats:
            raise BadRequestError(
                f"Hand seats {rules.min_seats}-{rules.max_seats} players", "BAD_SEATS"
            )
        if settings.stake < 0:
            raise BadRequestError("the stake is never negative", "BAD_STAKE")

    def start(self, table: Table, seed: bytes, now_ms: int) -> Step:
        """Buy every player into the pot (phase ``buy_in``, round 0) and deal the first deal."""
        rules = _rules(table.settings)
        game, _postings = start_game(list(table.players), table.settings.stake, rules)
        table.game = {"game": game.to_dict(), "deal": None, "round_no": 0, "server_seed": ""}
        started = TableEvent(
            "game_started",
            BUY_IN_ROUND,
            NO_SEAT,
            {
                "game": self.name,
                "stake": game.stake,
                "pot": game.pot,
                "deals": rules.deals_per_game,
                "players": list(game.players),
            },
        )
        buy_in = Phase(BUY_IN_ROUND, BUY_IN, buy_in_record(game))
        return self._start_deal(table, seed, now_ms, before=[started], phases=[buy_in])

    def _move(self, seat: int, action: Action) -> HandAction:
        """The rules' action for a table action, with every argument checked."""
        args = action.args
        if action.kind == "draw":
            source = DRAW_SOURCES.get(str(args.get("source", "pile")))
            if source is None:
                raise BadRequestError("draw from the pile (stock) or the discards", "BAD_SOURCE")
            return source(seat)
        if action.kind == "discard":
            return Discard(seat, _card(args.get("tile"), "tile"))
        if action.kind == "lay_melds":
            melds = args.get("melds")
            if isinstance(melds, str | bytes) or not isinstance(melds, Sequence) or not melds:
                raise BadRequestError("lay at least one meld", "BAD_MELDS")
            return LayMelds(seat, tuple(_meld_spec(m) for m in melds))
        if action.kind == "lay_off":
            end = args.get("end") or None
            if end is not None and end not in RUN_ENDS:
                raise BadRequestError("end is low or high", "BAD_END")
            return LayOff(seat, _meld_id(args.get("meld_id")), _card(args.get("tile"), "tile"), end)
        if action.kind == "release_joker":
            return ReleaseJoker(
                seat, _meld_id(args.get("meld_id")), _cards(args.get("tiles"), "tiles")
            )
        if action.kind == "undo_turn":
            return UndoTurn(seat)
        raise BadRequestError(f"Hand has no action {action.kind!r}", "UNKNOWN_ACTION")

    def act(self, table: Table, seat: int, action: Action, now_ms: int) -> Step:
        """A player's move, checked by the Hand rules."""
        deal = self._live_deal(table)
        move = self._move(seat, action)
        new, events = turns.apply(deal, move)
        result: dict[str, Any] = {}
        if isinstance(move, DrawStock | DrawDiscard) and new.drawn_card is not None:
            result = {"tile_id": new.drawn_card, "tile": card_text(new.drawn_card)}
        return self._step(table, new, events, now_ms, result=result)

    def on_deadline(self, table: Table, seed: bytes, now_ms: int) -> Step:
        """Deal the next deal, or play a timed-out turn (draw from the stock, discard it)."""
        deadline = table.deadline
        deal = self._deal(table)
        if deadline is None or deal is None:
            raise TableError("nothing is due", "NOT_DUE")
        if deadline.kind == "next_round":
            return self._start_deal(table, seed, now_ms)
        seat = deal.turn
        new, events = turns.apply(deal, TimeOut(seat))
        return self._step(table, new, events, now_ms, timed_out_seat=seat)

    def press_last_round(self, table: Table, now_ms: int) -> Step:
        """A Hand game is always its full number of deals: nothing to press."""
        raise TableError("a Hand game always plays all its deals", "NOT_SUPPORTED")

    def view(self, table: Table, seat: int | None) -> GameView:
        """Own cards, the melds on the table and public facts; never the stock order.

        Read from the stored deal as it is: every view of every action would otherwise
        rebuild and re-check the whole deal (``DealState.from_dict``), which the commit that
        wrote it already did.
        """
        deal: dict[str, Any] | None = table.game.get("deal") if table.game else None
        if deal is None:
            return GameView(0, "waiting", [], [], [], None, [], "", "", {})
        game = self._game(table)
        totals = game.totals
        hands: list[list[int]] = deal["hands"]
        wins = [sum(1 for r in game.results if r.winner == s) for s in range(game.seats)]
        seats = [
            SeatInfo(s, p, len(hands[s]), streak=0, rounds_won=wins[s], score=totals[s])
            for s, p in enumerate(game.players)
        ]
        phase = str(deal["phase"])
        ended = phase == DealPhase.ENDED.value
        turn = int(deal["turn"])
        opened = [int(t) >= 0 for t in deal["opened_turn"]]
        my_turn = seat is not None and not ended and turn == seat
        actions: list[str] = []
        if my_turn:
            if phase == DealPhase.DRAW.value:
                actions = ["draw"]
            else:
                actions = ["lay_melds"]
                if opened[turn]:
                    actions += ["lay_off", "release_joker"]
                if deal["must_use"] is None:
                    actions.append("discard")
                if deal["undo"] is not None:
                    actions.append("undo_turn")
        if ended and table.status != "closed":
            phase = BETWEEN_ROUNDS
        scores = deal["scores"]
        public: dict[str, Any] = {
            "deal_no": int(deal["deal_no"]) + 1,
            "deals": game.rules.deals_per_game,
            "starter": int(deal["starter"]),
            "drew": deal["phase"] == DealPhase.PLAY.value,
            "pile": len(deal["stock"]),
            "pot": 0 if game.finished else game.pot,
            "stake": game.stake,
            "melds": [dict(m, id=i) for i, m in enumerate(deal["melds"])],
            "opened": opened,
            "must_use": deal["must_use"] if my_turn else None,
            "winner": deal["winner"],
            "hand_win": bool(deal["hand_win"]),
            "deal_scores": None if scores is None else list(scores),
            "totals": totals,
            # The deal is over: the hands left are shown to justify the penalties.
            "hands": [list(h) for h in hands] if ended else None,
            "payouts": game.payouts() if game.finished else None,
            "last_round": game.deals_played + (0 if ended else 1) >= game.rules.deals_per_game,
            "client_seeds": [table.client_seeds.get(p) for p in table.players],
        }
        return GameView(
            round_no=int(table.game["round_no"]),
            phase=phase,
            seats=seats,
            my_tiles=[] if seat is None else list(hands[seat]),
            discards=list(deal["discard_pile"]),
            turn_seat=None if ended else turn,
            actions=actions,
            commitment=str(deal["commitment"]),
            server_seed=str(table.game.get("server_seed", "")) if ended else "",
            public=public,
        )

    def hand(self, table: Table, seat: int) -> list[int]:
        """The seat's card ids."""
        deal = self._deal(table)
        return [] if deal is None else list(deal.hands[seat])

    def hint(self, table: Table, seat: int) -> Hint:
        """The melds that would lay down the most cards of the seat's hand now."""
        deal = self._live_deal(table)
        hand = list(deal.hands[seat])
        melds, _value = best_melds(hand, deal.rules)
        grouped = {c for m in melds for c in m}
        groups = [HintGroup(make_meld(m, seat, deal.rules).kind.value, list(m)) for m in melds]
        return Hint(groups=groups, loose=[c for c in hand if c not in grouped], winning_discards=[])

    def face(self, tile_id: int) -> str:
        """``AS``, ``10H``, ``J1``..."""
        return FACES[tile_id]
