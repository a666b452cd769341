"""What the table does for a seat it plays at Hand.

* A player who left or let his turns run out (auto-play): the rules' own timeout, draw from
  the stock and discard the card drawn. One pure policy, ``(state, seat, stream) -> action``,
  the same shape as Kishpa's (``games.kishpa.autoplay``); the stream is unused.
* A house bot: :func:`house_bot_turn` plays its whole turn with ``games.hand.bot`` at the
  table's bot level (``normal``: open with 51, lay melds, lay off, release jokers, go out).
"""

from __future__ import annotations

from games.fair import FairStream
from games.hand.actions import Action, TimeOut
from games.hand.bot import BOT_TAG, NORMAL, play_bot_turn
from games.hand.deal_state import DealState, Phase
from games.hand.errors import HandMoveError
from games.hand.events import Event
from games.hand.turns import apply

TIMEOUTS_BEFORE_AUTOPLAY = 3
"""Late turns in a row after which the table plays a seat until its player acts (not a
``RuleSet`` field: stored rule sets are read strictly by every replica)."""


def autoplay_action(state: DealState, seat: int, stream: FairStream) -> Action | None:
    """The next move of an auto-played seat, or ``None`` when it is not the seat's turn."""
    del stream
    if state.phase is Phase.ENDED or state.turn != seat:
        return None
    return TimeOut(seat)


def house_bot_turn(
    state: DealState, seed: bytes, level: str = NORMAL
) -> tuple[DealState, list[Event]]:
    """The whole turn of the house bot whose turn it is, at ``level`` (``easy``/``normal``),
    with tie-breaks from a stream of ``seed``; the state after it and its events.

    The bot only proposes moves the rules then check; should one ever be refused, the turn
    is the rules' timeout instead, so a bot's seat never stalls the table.
    """
    try:
        return play_bot_turn(state, FairStream(seed, (), BOT_TAG), level)
    except HandMoveError:
        return apply(state, TimeOut(state.turn))
