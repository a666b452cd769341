"""Kishpa's part of the table messages: ``KishpaOptions`` and ``KishpaRound``."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import games.kishpa as kishpa
from kishpa.common.v1 import common_pb2
from kishpa.table.v1 import table_pb2
from services.table.engine import TableSettings

HIGH_WRAP = "allow_high_wrap"


class KishpaWire:
    """Kishpa's options and round facts on the wire."""

    name = kishpa.GAME.name

    def options_from(self, msg: table_pb2.TableSettings) -> dict[str, Any]:
        return {HIGH_WRAP: True} if msg.kishpa.allow_high_wrap else {}

    def options_message(self, settings: TableSettings, msg: table_pb2.TableSettings) -> None:
        allow = bool(settings.options.get(HIGH_WRAP, False))
        msg.kishpa.CopyFrom(table_pb2.KishpaOptions(allow_high_wrap=allow))

    def round_message(
        self,
        public: Mapping[str, Any],
        tile: Callable[[int], common_pb2.Tile],
        msg: table_pb2.Round,
    ) -> None:
        """The kishpa turned (and the one it replaced), the joker and who revealed."""
        ids = list(public.get("kishpa_ids", []))
        revealed = public.get("start_reveal")
        if revealed is None:
            revealed = public.get("end_reveal")
        out = table_pb2.KishpaRound(
            kishpa=tile(ids[-1]),
            joker_face=str(public.get("joker", "")),
            revealed_by_seat=None if revealed is None else int(revealed),
        )
        if len(ids) > 1:
            out.replaced_kishpa.CopyFrom(tile(ids[0]))
            out.first_kishpa.CopyFrom(tile(ids[0]))
        msg.kishpa.CopyFrom(out)
