"""Hand (Rummy 51): the second table game, as a pure rules engine.

The names below are the package's public API: services (``services/``) import only these
(an import-linter contract in ``make lint`` checks it). Where things live:

* ``cards`` — the 106 cards, stable ids, notation (``AS``, ``10H``, ``J1``);
* ``ruleset`` — every ruling (and every case the rules leave open) as one ``RuleSet``;
* ``melds`` — sets, runs, values, laying off, releasing jokers;
* ``deal`` / ``deal_state`` / ``turns`` — dealing, the deal's state and views, and
  ``apply(state, action) -> (state, events)`` over the ``actions``, emitting ``events``;
* ``scoring``, ``game`` — a deal's scores, a game of 7 deals (and the table's checks, the
  actions a seat may take, the game's own events);
* ``autoplay`` — what an absent seat does (the rules' timeout) and a house bot's turn;
* ``pot``, ``ledger``, ``record`` — the pot split, its postings, the settlement records;
* ``flow`` — a game at a table: opening it, closing each deal, the settlement phases due;
* ``view`` — what each viewer sees (and never sees) of a table, and a seat's advice;
* ``meld_search``, ``bot`` — finding melds in a hand, a deterministic bot.

The rules are those of ``docs/rules/hand.md``. Nothing here
performs I/O, reads a clock or draws randomness it was not handed.
"""

from games.hand.actions import (
    Action,
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
from games.hand.autoplay import TIMEOUTS_BEFORE_AUTOPLAY, autoplay_action, house_bot_turn
from games.hand.cards import CARD_COUNT, card_text
from games.hand.deal_state import DealState, Phase
from games.hand.events import Event
from games.hand.flow import PhaseRecord, abandon, close_deal, open_game
from games.hand.game import (
    GameState,
    available_actions,
    check_table,
    is_last_deal,
    record_deal,
    seed_revealed_event,
    start_deal,
    start_game,
    started_event,
)
from games.hand.meld_search import best_meld_specs, best_melds
from games.hand.melds import MeldKind, make_meld
from games.hand.record import BUY_IN, PAYOUT, buy_in_record, payout_record
from games.hand.ruleset import DEFAULT_RULES, RuleSet
from games.hand.spec import GAME
from games.hand.turns import apply
from games.hand.view import (
    Advice,
    HandPublic,
    MeldView,
    SeatSummary,
    SeatView,
    advice_for,
    view_for,
)

__all__ = [
    "BUY_IN",
    "CARD_COUNT",
    "DEFAULT_RULES",
    "GAME",
    "PAYOUT",
    "TIMEOUTS_BEFORE_AUTOPLAY",
    "Action",
    "Advice",
    "DealState",
    "Discard",
    "DrawDiscard",
    "DrawStock",
    "Event",
    "GameState",
    "HandPublic",
    "LayMelds",
    "LayOff",
    "MeldKind",
    "MeldSpec",
    "MeldView",
    "Phase",
    "PhaseRecord",
    "ReleaseJoker",
    "RuleSet",
    "SeatSummary",
    "SeatView",
    "TimeOut",
    "UndoTurn",
    "abandon",
    "advice_for",
    "apply",
    "autoplay_action",
    "available_actions",
    "best_meld_specs",
    "best_melds",
    "buy_in_record",
    "card_text",
    "check_table",
    "close_deal",
    "house_bot_turn",
    "is_last_deal",
    "make_meld",
    "open_game",
    "payout_record",
    "record_deal",
    "seed_revealed_event",
    "start_deal",
    "start_game",
    "started_event",
    "view_for",
]
