"""Kishpa's part of the table messages: ``KishpaOptions``, ``KishpaRound`` and its facts of
a round's result."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import games.kishpa as kishpa
from kishpa.common.v1 import common_pb2
from kishpa.table.v1 import table_pb2
from services.table.engine import PublicFacts, TableSettings
from services.table.wire_enums import GROUP_KINDS

HIGH_WRAP = "allow_high_wrap"
Tile = Callable[[int], common_pb2.Tile]


def _facts(public: PublicFacts) -> kishpa.KishpaPublic:
    if not isinstance(public, kishpa.KishpaPublic):
        raise TypeError(f"a Kishpa round's facts are KishpaPublic, not {type(public).__name__}")
    return public


class KishpaWire:
    """Kishpa's options and round facts on the wire."""

    name = kishpa.GAME.name

    def options_from(self, msg: table_pb2.TableSettings) -> dict[str, Any]:
        return {HIGH_WRAP: True} if msg.kishpa.allow_high_wrap else {}

    def options_message(self, settings: TableSettings, msg: table_pb2.TableSettings) -> None:
        allow = bool(settings.options.get(HIGH_WRAP, False))
        msg.kishpa.CopyFrom(table_pb2.KishpaOptions(allow_high_wrap=allow))

    def round_message(self, public: PublicFacts, tile: Tile, msg: table_pb2.Round) -> None:
        """The kishpa turned (and the one it replaced), the joker and who revealed."""
        facts = _facts(public)
        ids = facts.kishpa_ids
        revealed = facts.start_reveal if facts.start_reveal is not None else facts.end_reveal
        out = table_pb2.KishpaRound(
            kishpa=tile(ids[-1]), joker_face=facts.joker, revealed_by_seat=revealed
        )
        if len(ids) > 1:
            out.replaced_kishpa.CopyFrom(tile(ids[0]))
            out.first_kishpa.CopyFrom(tile(ids[0]))
        msg.kishpa.CopyFrom(out)

    def result_message(self, public: PublicFacts, tile: Tile, msg: table_pb2.RoundResult) -> None:
        """The win's payout, whether the bowl was taken, the winning hand as its groups."""
        facts = _facts(public)
        msg.win_payout = facts.win_payout
        msg.bowl_taken = facts.bowl_taken
        kinds = [*facts.winning_group_kinds, *[""] * len(facts.winning_groups)]
        msg.winning_groups.extend(
            common_pb2.TileGroup(
                kind=GROUP_KINDS.get(kind, common_pb2.GROUP_KIND_UNSPECIFIED),
                tiles=[tile(t) for t in group],
            )
            for group, kind in zip(facts.winning_groups, kinds, strict=False)
        )
        if facts.final_discard_id is not None:
            msg.final_discard.CopyFrom(tile(facts.final_discard_id))
