"""Hand's part of the table messages: ``HandRound`` (Hand has no options)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import games.hand as hand
from kishpa.common.v1 import common_pb2
from kishpa.table.v1 import table_pb2
from services.table.engine import TableSettings
from services.table.wire_enums import GROUP_KINDS


class HandWire:
    """Hand's round facts on the wire."""

    name = hand.GAME.name

    def options_from(self, msg: table_pb2.TableSettings) -> dict[str, Any]:
        del msg
        return {}

    def options_message(self, settings: TableSettings, msg: table_pb2.TableSettings) -> None:
        del settings, msg

    def round_message(
        self,
        public: Mapping[str, Any],
        tile: Callable[[int], common_pb2.Tile],
        msg: table_pb2.Round,
    ) -> None:
        """The melds on the table and the pot: public to every viewer."""
        out = table_pb2.HandRound(
            melds=[
                table_pb2.Meld(
                    meld_id=int(m["id"]),
                    kind=GROUP_KINDS.get(str(m["kind"]), common_pb2.GROUP_KIND_UNSPECIFIED),
                    cards=[tile(c) for c in m["cards"]],
                    seat=int(m["owner"]),
                )
                for m in public.get("melds", [])
            ],
            opened_seats=[s for s, opened in enumerate(public.get("opened", [])) if opened],
            pot=int(public.get("pot", 0)),
            deals_per_game=int(public.get("deals", 0)),
            hand_win=bool(public.get("hand_win", False)),
            deal_scores=list(public.get("deal_scores") or []),
            payouts=list(public.get("payouts") or []),
            end_hands=[
                table_pb2.SeatTiles(seat=seat, tiles=[tile(c) for c in cards])
                for seat, cards in enumerate(public.get("hands") or [])
            ],
        )
        if public.get("must_use") is not None:
            out.must_use.CopyFrom(tile(int(public["must_use"])))
        msg.hand.CopyFrom(out)
