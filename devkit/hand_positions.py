"""Building a deal position from card text: for tests, hints and rules tooling.

``position(hands=[["AS", "2S", ...], ...], discard_pile=["7C"], ...)`` names each card by its
text; the copies of a face are handed out in order (the first ``7H`` written anywhere is
copy 0, the second copy 1), and every card not named goes to the stock in id order after
``stock_top``.
"""

from __future__ import annotations

from collections.abc import Sequence

from games.hand.cards import CARD_COUNT, is_joker, parse_card
from games.hand.deal_state import DealState, Phase, check_consistent
from games.hand.errors import CardNotationError
from games.hand.melds import make_meld
from games.hand.ruleset import DEFAULT_RULES, RuleSet


class _Pool:
    def __init__(self) -> None:
        self.used: set[int] = set()

    def take(self, text: str) -> int:
        first = parse_card(text)
        candidates = [first] if is_joker(first) else [first, parse_card(text, copy=1)]
        for card in candidates:
            if card not in self.used:
                self.used.add(card)
                return card
        raise CardNotationError(f"{text} is named more often than the pack holds it")

    def take_all(self, texts: Sequence[str]) -> list[int]:
        return [self.take(t) for t in texts]


def position(
    hands: Sequence[Sequence[str]],
    *,
    discard_pile: Sequence[str] = (),
    stock_top: Sequence[str] = (),
    melds: Sequence[tuple[int, Sequence[str]]] = (),
    opened: Sequence[int] = (),
    turn: int = 0,
    phase: Phase = Phase.PLAY,
    starter: int = 0,
    turn_no: int = 1,
    rules: RuleSet = DEFAULT_RULES,
) -> DealState:
    """A consistent deal state from text.

    ``melds`` are (owner seat, cards low to high); ``opened`` lists the seats that opened
    before this turn. Turn numbers default to 1 so that openings in it are this turn's.
    """
    pool = _Pool()
    hand_ids = [pool.take_all(h) for h in hands]
    pile = pool.take_all(discard_pile)
    top = pool.take_all(stock_top)
    table = []
    for owner, texts in melds:
        cards = pool.take_all(texts)
        table.append(make_meld(cards, owner, rules))
    rest = [c for c in range(CARD_COUNT) if c not in pool.used]
    opened_turn = [0 if seat in opened else -1 for seat in range(len(hands))]
    state = DealState(
        rules=rules,
        starter=starter,
        hands=hand_ids,
        stock=[*top, *rest],
        discard_pile=pile,
        melds=table,
        opened_turn=opened_turn,
        turn=turn,
        turn_no=turn_no,
        phase=phase,
    )
    check_consistent(state)
    return state
