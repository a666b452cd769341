"""What the table does for a seat on auto-play at Hand (a player who left or let his turns
run out): the rules' own timeout, draw from the stock and discard the card drawn.

One pure policy, ``(state, seat, stream) -> action``, the same shape as Kishpa's
(``games.kishpa.autoplay``); the stream is unused (the timeout involves no choice).
"""

from __future__ import annotations

from games.fair import FairStream
from games.hand.actions import Action, TimeOut
from games.hand.deal_state import DealState, Phase

TIMEOUTS_BEFORE_AUTOPLAY = 3
"""Late turns in a row after which the table plays a seat until its player acts (not a
``RuleSet`` field: stored rule sets are read strictly by every replica)."""


def autoplay_action(state: DealState, seat: int, stream: FairStream) -> Action | None:
    """The next move of an auto-played seat, or ``None`` when it is not the seat's turn."""
    del stream
    if state.phase is Phase.ENDED or state.turn != seat:
        return None
    return TimeOut(seat)
