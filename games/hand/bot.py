"""Pure bots for Hand: each sees only one seat's view and picks that seat's next action.

Two levels (a table's ``bot_level``):

* ``normal`` (:func:`next_action`, the meld search): it opens as soon as its melds reach 51,
  takes the top discard only when it can use it at once, releases jokers whenever it holds
  the cards, lays new melds and lays off. Before it opens it discards the card it can best
  spare on the way to 51 (:func:`choose_opening_discard`); once open, its highest-value card
  that is not part of a partial meld. Ties are broken by the handed-in random stream, so a
  bot is deterministic given its stream;
* ``easy`` (:func:`draw_and_discard`): draw from the stock and throw the drawn card away (the
  rules' timeout), going out only when the drawn card lets it lay its whole hand at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from games.hand.actions import (
    Action,
    Discard,
    DrawDiscard,
    DrawStock,
    LayMelds,
    LayOff,
    MeldSpec,
    ReleaseJoker,
    UndoTurn,
)
from games.hand.cards import SUITS, Face, face_of, is_joker
from games.hand.deal_state import DealState, Phase, seat_view
from games.hand.errors import HandMoveError
from games.hand.events import Event
from games.hand.meld_search import (
    KindedMeld,
    best_meld_specs,
    best_melds,
    best_opening,
    best_opening_specs,
    in_partial_meld,
    most_valuable_melds,
)
from games.hand.melds import Meld, MeldKind, card_penalty, lay_off
from games.hand.ruleset import RuleSet
from games.hand.turns import apply

MAX_ACTIONS_PER_TURN = 60
OPENING_NODE_LIMIT = 2_000
"""Search steps for each card weighed by :func:`choose_opening_discard` (15 searches a turn)."""
BOT_TAG = "hand/table/v1/bot"
"""Stream tag of the house bots' tie-breaks (seeded by the service, never the deal's deck)."""
EASY = "easy"
NORMAL = "normal"
"""The bot levels (``games.table.BOT_LEVELS``)."""


class RandomSource(Protocol):
    """What the bot needs from ``games.fair.FairStream``."""

    def randbelow(self, n: int) -> int: ...


def _layoff_target(card: int, melds: Sequence[Meld], rules: RuleSet) -> int | None:
    for meld_id, meld in enumerate(melds):
        try:
            lay_off(meld, card, rules)
        except HandMoveError:
            continue
        return meld_id
    return None


def _release(hand: Sequence[int], melds: Sequence[Meld]) -> tuple[int, tuple[int, ...]] | None:
    """A joker this hand can release: (meld id, the real cards to put in)."""
    for meld_id, meld in enumerate(melds):
        if not meld.jokers or meld.is_closed_four:
            continue
        if meld.kind is MeldKind.RUN:
            for index, card in enumerate(meld.cards):
                if is_joker(card):
                    wanted = meld.stands_for(index)
                    real = next((c for c in hand if face_of(c) == wanted), None)
                    if real is not None:
                        return meld_id, (real,)
        else:
            present = {face_of(c).suit for c in meld.cards if not is_joker(c)}
            missing = [Face(meld.rank, s) for s in SUITS if s not in present]
            cards = [next((c for c in hand if face_of(c) == f), None) for f in missing]
            if all(c is not None for c in cards):
                return meld_id, tuple(c for c in cards if c is not None)
    return None


def _lay(seat: int, melds: Sequence[KindedMeld]) -> LayMelds:
    """Lay the melds found, each with the kind it was found as (which places its jokers)."""
    return LayMelds(seat, tuple(MeldSpec(ids, kind) for ids, kind in melds))


def choose_discard(hand: Sequence[int], rules: RuleSet, stream: RandomSource) -> int:
    """The highest-value card outside any partial meld (a joker only if nothing else)."""
    real = [c for c in hand if not is_joker(c)]
    loose = [c for c in real if not in_partial_meld(c, hand)]
    pool = loose or real or list(hand)
    top = max(card_penalty(c, rules) for c in pool)
    ties = sorted(c for c in pool if card_penalty(c, rules) == top)
    return ties[stream.randbelow(len(ties))]


def _toward_opening(cards: Sequence[int], rules: RuleSet) -> int:
    """How far these cards are toward 51: what they meld counts most, the other cards that
    pair toward a meld half as much, loose cards a quarter (they may still meet a partner)."""
    melds, value = most_valuable_melds(cards, rules, keep=0, node_limit=OPENING_NODE_LIMIT)
    laid = {card for ids, _kind in melds for card in ids}
    left = [c for c in cards if c not in laid and not is_joker(c)]
    partial = sum(card_penalty(c, rules) for c in left if in_partial_meld(c, left))
    loose = sum(card_penalty(c, rules) for c in left) - partial
    return 4 * value + 2 * partial + loose


def choose_opening_discard(hand: Sequence[int], rules: RuleSet, stream: RandomSource) -> int:
    """Before opening: the card whose loss costs least toward 51 (a joker only if nothing else).

    Throwing away the highest loose card, as an open seat does, leaves a hand of low sets that
    never reaches 51: against a passive seat the bot stayed closed for a whole deal in 12 of
    200 deals (benchmarks/bench_hand_opening.py).
    """
    by_face: dict[Face, int] = {}
    for card in sorted(hand):
        if not is_joker(card):
            by_face.setdefault(face_of(card), card)
    if not by_face:
        return choose_discard(hand, rules, stream)
    worth: dict[int, int] = {}
    for card in by_face.values():
        rest = list(hand)
        rest.remove(card)
        worth[card] = _toward_opening(rest, rules)
    best = max(worth.values())
    ties = sorted(card for card, kept in worth.items() if kept == best)
    return ties[stream.randbelow(len(ties))]


def _choose_draw(view: dict[str, Any], rules: RuleSet, melds: Sequence[Meld]) -> Action:
    seat = view["seat"]
    pile = view["discard_pile"]
    if pile:
        top = pile[-1]
        hand = [*view["hand"], top]
        if not view["opened"][seat]:
            if best_opening(hand, rules, must_include=top) is not None:
                return DrawDiscard(seat)
        elif (
            _layoff_target(top, melds, rules) is not None
            or best_melds(hand, rules, must_include=top)[0]
        ):
            return DrawDiscard(seat)
    return DrawStock(seat)


def next_action(view: dict[str, Any], rules: RuleSet, stream: RandomSource) -> Action:
    """The bot's next action for the seat whose :func:`seat_view` this is (its turn)."""
    seat = view["seat"]
    hand: list[int] = list(view["hand"])
    melds = [Meld.from_dict(m) for m in view["melds"]]
    if view["phase"] == Phase.DRAW.value:
        return _choose_draw(view, rules, melds)
    must_use: int | None = view["must_use"]
    if not view["opened"][seat]:
        opening = best_opening_specs(hand, rules, must_include=must_use)
        if opening is not None:
            return _lay(seat, opening)
        if must_use is not None:
            return UndoTurn(seat)
        return Discard(seat, choose_opening_discard(hand, rules, stream))
    may_add = rules.layoff_on_opening_turn or view["opened_turn"][seat] != view["turn_no"]
    if must_use is not None:
        with_card, _ = best_meld_specs(hand, rules, must_include=must_use)
        if with_card:
            return _lay(seat, with_card)
        target = _layoff_target(must_use, melds, rules) if may_add else None
        if target is not None and len(hand) > 1:
            return LayOff(seat, target, must_use)
        return UndoTurn(seat)
    if may_add:
        release = _release(hand, melds)
        if release is not None:
            return ReleaseJoker(seat, *release)
    new_melds, _ = best_meld_specs(hand, rules)
    if new_melds:
        return _lay(seat, new_melds)
    if may_add and len(hand) > 1:
        # Real cards first, the most valuable first; a joker only when it nearly goes out.
        order = sorted(hand, key=lambda c: (is_joker(c), -card_penalty(c, rules), c))
        for card in order:
            if is_joker(card) and len(hand) > 3:
                continue
            target = _layoff_target(card, melds, rules)
            if target is not None:
                return LayOff(seat, target, card)
    return Discard(seat, choose_discard(hand, rules, stream))


def draw_and_discard(view: dict[str, Any], rules: RuleSet, stream: RandomSource) -> Action:
    """The easy bot's next action: draw from the stock; lay the whole hand but one card when
    the melds allow it (a *hand*, or going out once opened); else discard the last card (the
    one drawn; on the starter's first turn, the last dealt). ``stream`` is unused."""
    del stream
    seat = view["seat"]
    if view["phase"] == Phase.DRAW.value:
        return DrawStock(seat)
    hand: list[int] = list(view["hand"])
    if len(hand) > 1:
        melds, value = best_meld_specs(hand, rules)
        laid = sum(len(ids) for ids, _kind in melds)
        if laid == len(hand) - 1 and (view["opened"][seat] or value >= rules.opening_minimum):
            return _lay(seat, melds)
    return Discard(seat, hand[-1])


def action_at(level: str, view: dict[str, Any], rules: RuleSet, stream: RandomSource) -> Action:
    """The next action of a bot of this level (``easy``; anything else: ``normal``)."""
    if level == EASY:
        return draw_and_discard(view, rules, stream)
    return next_action(view, rules, stream)


def play_bot_turn(
    state: DealState, stream: RandomSource, level: str = NORMAL
) -> tuple[DealState, list[Event]]:
    """Play the whole turn of the seat to act with a bot of ``level``; returns the state
    after it."""
    seat = state.turn
    events: list[Event] = []
    for _ in range(MAX_ACTIONS_PER_TURN):
        if state.phase is Phase.ENDED or state.turn != seat:
            return state, events
        action = action_at(level, seat_view(state, seat), state.rules, stream)
        state, new_events = apply(state, action)
        events.extend(new_events)
    raise HandMoveError(f"the bot did not finish seat {seat}'s turn", "BOT_STUCK")
