"""What the table does for a seat on auto-play (a player who left or let his turns run out).

One pure policy, ``(state, seat, stream) -> action``: on the seat's turn the solver-driven
bot's move (draw, then win if the hand wins, else discard its least useful tile), or a
timeout when the bot has none; outside the seat's turn nothing. Reveal windows are not
played for an absent player: a kishpa not revealed is not paid (docs/rules/kishpa.md section 7).
Randomness comes only from the :class:`~games.fair.FairStream` handed in (tie-breaks).
"""

from __future__ import annotations

from games.fair import FairStream
from games.kishpa import bot
from games.kishpa import round as kround

AUTOPLAY_TAG = "kishpa/table/v1/autoplay"
"""Stream tag of auto-play's tie-breaks (seeded by the service, never the round's deck)."""


def autoplay_action(
    state: kround.RoundState, seat: int, stream: FairStream, level: str = bot.NORMAL
) -> kround.Action | None:
    """The next move of an auto-played seat, or ``None`` when it is not the seat's turn.

    ``level`` is the house bots' level (``easy``/``normal``); an absent player is always
    played at ``normal``."""
    if state.phase not in (kround.FIRST_DISCARD, kround.TURNS) or state.turn != seat:
        return None
    move = bot.action_at(level, kround.view_for(state, seat), stream, state.ruleset)
    return move if move is not None else kround.TurnTimeout(seat)
