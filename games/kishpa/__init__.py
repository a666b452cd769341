"""The Kishpa rules engine: the rules of ``docs/rules/kishpa.md`` (every ruling and example),
which every service enforces; "section N" in comments here is that page's section N.

The names below are the package's public API: services (``services/``) import only these
(an import-linter contract in ``make lint`` checks it); the modules behind them are free to
change. Where things live: ``tiles`` (faces, ids, notation), ``deal`` and ``round`` (one
round's state machine), ``game`` (the table across rounds: starter, bowl, streaks, last
round), ``flow`` (a game at a table: its rules, the next round, timed-out turns, the
settlement phases due), ``view`` (what each viewer sees), ``autoplay`` (what an absent seat
does), ``solver``/``hints`` (winning hands and advice),
``bonuses``/``payouts``/``bowl``/``ledger``/``record`` (who pays whom), ``spec`` (the game
as the platform sees it, :mod:`games.registry`).
"""

from games.kishpa.autoplay import AUTOPLAY_TAG, autoplay_action
from games.kishpa.errors import IllegalMoveError, InvalidRecordError, RulesError, TileNotationError
from games.kishpa.game import (
    GameState,
    apply_action,
    autoplay_turn,
    available_actions,
    bots_in_window,
    new_game,
    abandon,
    press_last_round,
    round_win_payout,
    start_round,
)
from games.kishpa.flow import (
    KNOWN_OPTIONS,
    Moved,
    PhaseRecord,
    next_round,
    rules_for,
    settle,
    timed_out_turn,
    unknown_options,
)
from games.kishpa.hints import Advice, advice_for
from games.kishpa.round import (
    DISCARD,
    END_REVEAL,
    ENDED,
    FIRST_DISCARD,
    PILE,
    START_REVEAL,
    TURNS,
    Action,
    CloseWindow,
    Discard,
    Draw,
    Event,
    Pass,
    Reveal,
    RoundState,
    TurnTimeout,
    Win,
    end_record,
    start_record,
    view_for,
    waiting_for,
    winning_group_kinds,
)
from games.kishpa.ruleset import DEFAULT_RULES, RuleSet
from games.kishpa.spec import GAME
from games.kishpa.tiles import TILE_COUNT, face_of
from games.kishpa.view import KishpaPublic, SeatSummary, SeatView, table_view

__all__ = [
    "KishpaPublic",
    "unknown_options",
    "timed_out_turn",
    "table_view",
    "settle",
    "rules_for",
    "next_round",
    "SeatView",
    "SeatSummary",
    "PhaseRecord",
    "Moved",
    "KNOWN_OPTIONS",
    "GAME",
    "AUTOPLAY_TAG",
    "DEFAULT_RULES",
    "DISCARD",
    "ENDED",
    "END_REVEAL",
    "FIRST_DISCARD",
    "PILE",
    "START_REVEAL",
    "TILE_COUNT",
    "TURNS",
    "Action",
    "Advice",
    "CloseWindow",
    "Discard",
    "Draw",
    "Event",
    "GameState",
    "IllegalMoveError",
    "InvalidRecordError",
    "Pass",
    "Reveal",
    "RoundState",
    "RuleSet",
    "RulesError",
    "TileNotationError",
    "TurnTimeout",
    "Win",
    "advice_for",
    "apply_action",
    "autoplay_action",
    "autoplay_turn",
    "available_actions",
    "bots_in_window",
    "end_record",
    "face_of",
    "new_game",
    "abandon",
    "press_last_round",
    "round_win_payout",
    "start_record",
    "start_round",
    "view_for",
    "waiting_for",
    "winning_group_kinds",
]
