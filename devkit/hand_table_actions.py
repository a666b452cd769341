"""The table action a Hand player would send for a bot's move: how the engine tests and the
Hand table benchmark feed bot play to the table service's Hand engine."""

from __future__ import annotations

from games.hand import actions as ha
from services.table.engine import Action


def table_action(move: ha.Action) -> Action:
    """The table service's action for ``move`` (the wire names of docs/api.md)."""
    match move:
        case ha.DrawStock():
            return Action("draw", {"source": "pile"})
        case ha.DrawDiscard():
            return Action("draw", {"source": "discard"})
        case ha.LayMelds(melds=melds):
            return Action("lay_melds", {"melds": [list(m.cards) for m in melds]})
        case ha.LayOff(meld_id=meld_id, card=card, end=end):
            return Action("lay_off", {"meld_id": meld_id, "tile": card, "end": end})
        case ha.ReleaseJoker(meld_id=meld_id, cards=cards):
            return Action("release_joker", {"meld_id": meld_id, "tiles": list(cards)})
        case ha.Discard(card=card):
            return Action("discard", {"tile": card})
        case ha.UndoTurn():
            return Action("undo_turn")
    raise ValueError(f"no table action for {move!r}")
