"""The deal's transitions: ``apply(state, action) -> (new_state, events)``.

A turn is: draw (the starter skips it on his first turn), optionally lay melds, lay off and
release jokers, then discard. The engine never mutates the state it is handed; a refused
action raises :class:`HandMoveError` and changes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

from games.hand.actions import (
    Action,
    Discard,
    DrawDiscard,
    DrawStock,
    LayMelds,
    LayOff,
    ReleaseJoker,
    TimeOut,
    UndoTurn,
)
from games.hand.cards import CARD_COUNT, card_text, cards_text
from games.hand.deal_state import DealState, EndReason, Phase
from games.hand.errors import HandMoveError, Reason
from games.hand.events import Event
from games.hand.melds import Meld, MeldKind, lay_off, make_meld, meld_value, release_joker
from games.hand.scoring import deal_scores


def apply(state: DealState, action: Action) -> tuple[DealState, list[Event]]:
    """The state after ``action`` and the events it produced (public or private to a seat)."""
    _check_turn(state, action.seat)
    _check_card_ids(action)
    new = state.copy()
    events: list[Event] = []
    match action:
        case DrawStock():
            _draw_stock(new, events)
        case DrawDiscard():
            _draw_discard(new, events)
        case LayMelds(melds=specs):
            _lay_melds(new, [(s.cards, s.kind) for s in specs], events)
        case LayOff(meld_id=meld_id, card=card, end=end):
            _lay_off(new, meld_id, card, end, events)
        case ReleaseJoker(meld_id=meld_id, cards=cards):
            _release(new, meld_id, cards, events)
        case Discard(card=card):
            _discard(new, card, events)
        case UndoTurn():
            new = _undo(new, events)
        case TimeOut():
            new = _time_out(new, events)
        case _:  # pragma: no cover - the Action union is closed
            raise HandMoveError(f"unknown action {action!r}", Reason.MALFORMED_ACTION)
    return new, events


def _check_card_ids(action: Action) -> None:
    match action:
        case LayMelds(melds=specs):
            named = [c for s in specs for c in s.cards]
        case LayOff(card=card) | Discard(card=card):
            named = [card]
        case ReleaseJoker(cards=cards):
            named = list(cards)
        case _:
            named = []
    bad = [c for c in named if type(c) is not int or not 0 <= c < CARD_COUNT]
    if bad:
        raise HandMoveError(f"no such card id: {bad}", Reason.MALFORMED_ACTION)


def _check_turn(state: DealState, seat: int) -> None:
    if state.phase is Phase.ENDED:
        raise HandMoveError("the deal is over", Reason.DEAL_OVER)
    if not 0 <= seat < state.seats:
        raise HandMoveError(f"no seat {seat} at this table", Reason.UNKNOWN_SEAT)
    if seat != state.turn:
        raise HandMoveError(
            f"it is seat {state.turn}'s turn, not seat {seat}'s", Reason.NOT_YOUR_TURN
        )


def _must_have_drawn(state: DealState) -> None:
    if state.phase is Phase.DRAW:
        raise HandMoveError("draw a card first", Reason.MUST_DRAW_FIRST)


def _must_have_opened(state: DealState) -> None:
    if not state.has_opened(state.turn):
        raise HandMoveError(
            f"open with {state.rules.opening_minimum} points of melds first", Reason.NOT_OPENED
        )
    if not state.rules.layoff_on_opening_turn and state.opened_turn[state.turn] == state.turn_no:
        raise HandMoveError("lay off from the turn after your opening", Reason.NOT_OPENED)


def _check_in_hand(state: DealState, cards: Sequence[int], keep_one: bool = True) -> None:
    hand = state.hands[state.turn]
    if len(set(cards)) != len(cards):
        raise HandMoveError("a card is named twice", Reason.DUPLICATE_CARD)
    missing = [c for c in cards if c not in hand]
    if missing:
        raise HandMoveError(
            f"not in your hand: {' '.join(cards_text(missing))}", Reason.CARD_NOT_IN_HAND
        )
    if keep_one and len(cards) >= len(hand):
        raise HandMoveError(
            "keep a card to discard: nobody goes out without a discard", Reason.MUST_KEEP_DISCARD
        )


def _take_from_hand(state: DealState, cards: Sequence[int], keep_one: bool = True) -> None:
    _check_in_hand(state, cards, keep_one)
    hand = state.hands[state.turn]
    for card in cards:
        hand.remove(card)


def _note_used(state: DealState, cards: Sequence[int]) -> None:
    if state.must_use is not None and state.must_use in cards:
        state.must_use = None


def _draw_stock(state: DealState, events: list[Event]) -> None:
    if state.phase is not Phase.DRAW:
        raise HandMoveError("you have already drawn this turn", Reason.ALREADY_DREW)
    if not state.stock:
        # Only when the deal goes on past the last stock card (a table setting).
        _end(state, events, None, False, EndReason.STOCK_EXHAUSTED)
        return
    card = state.stock.pop(0)
    state.hands[state.turn].append(card)
    state.drawn_card = card
    state.phase = Phase.PLAY
    events.append(Event("drew_from_stock", state.turn, {"stock_size": len(state.stock)}))
    events.append(
        Event("card_drawn", state.turn, {"card": card, "text": card_text(card)}, state.turn)
    )


def _draw_discard(state: DealState, events: list[Event]) -> None:
    if state.phase is not Phase.DRAW:
        raise HandMoveError("you have already drawn this turn", Reason.ALREADY_DREW)
    if not state.discard_pile:
        raise HandMoveError("the discard pile is empty", Reason.EMPTY_DISCARD_PILE)
    snapshot = state.to_dict()
    card = state.discard_pile.pop()
    state.hands[state.turn].append(card)
    state.drawn_card = card
    state.must_use = card
    state.undo = snapshot
    state.phase = Phase.PLAY
    events.append(Event("drew_from_discard", state.turn, {"card": card, "text": card_text(card)}))


def _lay_melds(
    state: DealState,
    specs: Sequence[tuple[Sequence[int], MeldKind | None]],
    events: list[Event],
) -> None:
    _must_have_drawn(state)
    if not specs:
        raise HandMoveError("lay at least one meld", Reason.INVALID_MELD)
    seat = state.turn
    used = [c for cards, _ in specs for c in cards]
    _check_in_hand(state, used)
    melds = [make_meld(cards, seat, state.rules, kind) for cards, kind in specs]
    opening = not state.has_opened(seat)
    value = sum(meld_value(m, state.rules) for m in melds)
    if opening and value < state.rules.opening_minimum:
        raise HandMoveError(
            f"an opening needs {state.rules.opening_minimum} points; these melds make {value}",
            Reason.OPENING_BELOW_51,
        )
    if (
        opening
        and state.must_use is not None
        and state.rules.discard_pick_must_be_in_opening
        and state.must_use not in used
    ):
        raise HandMoveError(
            f"you took {card_text(state.must_use)} from the discard pile: open with it",
            Reason.DISCARD_NOT_USED,
        )
    _take_from_hand(state, used)
    first_id = len(state.melds)
    state.melds.extend(melds)
    if opening:
        state.opened_turn[seat] = state.turn_no
    _note_used(state, used)
    events.append(
        Event(
            "melds_laid",
            seat,
            {
                "opening": opening,
                "value": value,
                "melds": [dict(m.to_dict(), id=first_id + i) for i, m in enumerate(melds)],
                "text": [str(m) for m in melds],
            },
        )
    )


def _meld_at(state: DealState, meld_id: int) -> Meld:
    if not 0 <= meld_id < len(state.melds):
        raise HandMoveError(f"there is no meld {meld_id} on the table", Reason.UNKNOWN_MELD)
    return state.melds[meld_id]


def _lay_off(
    state: DealState, meld_id: int, card: int, end: str | None, events: list[Event]
) -> None:
    _must_have_drawn(state)
    _must_have_opened(state)
    meld = _meld_at(state, meld_id)
    grown = lay_off(meld, card, state.rules, end)
    _take_from_hand(state, [card])
    state.melds[meld_id] = grown
    _note_used(state, [card])
    events.append(
        Event(
            "laid_off",
            state.turn,
            {"meld_id": meld_id, "card": card, "meld": grown.to_dict(), "text": str(grown)},
        )
    )


def _release(state: DealState, meld_id: int, cards: Sequence[int], events: list[Event]) -> None:
    _must_have_drawn(state)
    _must_have_opened(state)
    meld = _meld_at(state, meld_id)
    new_meld, freed = release_joker(meld, cards, state.rules)
    # The freed joker comes back to hand, so a release never empties the hand.
    _take_from_hand(state, cards, keep_one=False)
    state.hands[state.turn].extend(freed)
    state.melds[meld_id] = new_meld
    _note_used(state, cards)
    events.append(
        Event(
            "joker_released",
            state.turn,
            {
                "meld_id": meld_id,
                "cards": list(cards),
                "jokers": list(freed),
                "meld": new_meld.to_dict(),
                "text": str(new_meld),
            },
        )
    )


def _discard(state: DealState, card: int, events: list[Event]) -> None:
    _must_have_drawn(state)
    seat = state.turn
    if state.must_use is not None:
        raise HandMoveError(
            f"use {card_text(state.must_use)}, taken from the discard pile, before discarding",
            Reason.DISCARD_NOT_USED,
        )
    _take_from_hand(state, [card], keep_one=False)
    state.discard_pile.append(card)
    events.append(Event("discarded", seat, {"card": card, "text": card_text(card)}))
    if not state.hands[seat]:
        hand_win = state.opened_turn[seat] == state.turn_no
        _end(state, events, seat, hand_win, EndReason.WENT_OUT)
    elif not state.stock and state.rules.stock_out_ends_at_discard:
        _end(state, events, None, False, EndReason.STOCK_EXHAUSTED)
    else:
        state.turn = (seat + 1) % state.seats
        state.turn_no += 1
        state.phase = Phase.DRAW
        state.drawn_card = None
        state.undo = None
        events.append(
            Event("turn_started", state.turn, {"phase": Phase.DRAW.value, "turn_no": state.turn_no})
        )


def _end(
    state: DealState,
    events: list[Event],
    winner: int | None,
    hand_win: bool,
    reason: EndReason,
) -> None:
    state.phase = Phase.ENDED
    state.winner = winner
    state.hand_win = hand_win
    state.end_reason = reason
    state.undo = None
    state.drawn_card = None
    state.scores = deal_scores(state.hands, winner, hand_win, state.rules)
    if winner is not None:
        events.append(Event("went_out", winner, {"hand": hand_win}))
    events.append(
        Event(
            "deal_ended",
            data={
                "reason": reason.value,
                "winner": winner,
                "hand": hand_win,
                "scores": list(state.scores),
                # The deal is over: the hands left are shown to justify the penalties.
                "hands": [list(h) for h in state.hands],
            },
        )
    )


def _undo(state: DealState, events: list[Event]) -> DealState:
    if state.undo is None:
        raise HandMoveError(
            "only a turn begun from the discard pile can be taken back", Reason.NOTHING_TO_UNDO
        )
    restored = DealState.from_dict(state.undo)
    events.append(
        Event(
            "turn_undone",
            state.turn,
            {
                "discard_pile": list(restored.discard_pile),
                "melds": [dict(m.to_dict(), id=i) for i, m in enumerate(restored.melds)],
            },
        )
    )
    return restored


def _time_out(state: DealState, events: list[Event]) -> DealState:
    seat = state.turn
    events.append(Event("timed_out", seat, {"phase": state.phase.value}))
    if state.undo is not None:
        state = _undo(state, events)
    if state.phase is Phase.DRAW:
        _draw_stock(state, events)
        if state.end_reason is not None:
            return state
    hand = state.hands[seat]
    # The drawn card if still held; on the starter's first turn, the last card dealt.
    card = state.drawn_card if state.drawn_card in hand else hand[-1]
    assert card is not None
    _discard(state, card, events)
    return state
