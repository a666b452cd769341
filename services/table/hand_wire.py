"""Hand's part of the table messages: ``HandRound`` (Hand has no options, and its result
says no more than who won: the scores are in ``HandRound``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import games.hand as hand
from kishpa.common.v1 import common_pb2
from kishpa.table.v1 import table_pb2
from services.table.engine import PublicFacts, TableSettings
from services.table.wire_enums import GROUP_KINDS

Tile = Callable[[int], common_pb2.Tile]


def _facts(public: PublicFacts) -> hand.HandPublic:
    if not isinstance(public, hand.HandPublic):
        raise TypeError(f"a Hand deal's facts are HandPublic, not {type(public).__name__}")
    return public


class HandWire:
    """Hand's round facts on the wire."""

    name = hand.GAME.name

    def options_from(self, msg: table_pb2.TableSettings) -> dict[str, Any]:
        del msg
        return {}

    def options_message(self, settings: TableSettings, msg: table_pb2.TableSettings) -> None:
        del settings, msg

    def round_message(self, public: PublicFacts, tile: Tile, msg: table_pb2.Round) -> None:
        """The melds on the table and the pot: public to every viewer."""
        facts = _facts(public)
        out = table_pb2.HandRound(
            melds=[
                table_pb2.Meld(
                    meld_id=m.id,
                    kind=GROUP_KINDS.get(m.kind, common_pb2.GROUP_KIND_UNSPECIFIED),
                    cards=[tile(c) for c in m.cards],
                    seat=m.owner,
                )
                for m in facts.melds
            ],
            opened_seats=[s for s, opened in enumerate(facts.opened) if opened],
            pot=facts.pot,
            deals_per_game=facts.deals,
            hand_win=facts.hand_win,
            deal_scores=facts.deal_scores or [],
            payouts=facts.payouts or [],
            end_hands=[
                table_pb2.SeatTiles(seat=seat, tiles=[tile(c) for c in cards])
                for seat, cards in enumerate(facts.hands or [])
            ],
        )
        if facts.must_use is not None:
            out.must_use.CopyFrom(tile(facts.must_use))
        msg.hand.CopyFrom(out)

    def result_message(self, public: PublicFacts, tile: Tile, msg: table_pb2.RoundResult) -> None:
        del tile
        _facts(public)
        del msg
