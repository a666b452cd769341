"""The internal names of the wire enums (``services/table/wire_enums.py``) are read off the
descriptors; these tests hold them to the names the rules and the table really use, written
out here (an independent list), so a renamed enum value or a new internal name shows up."""

from __future__ import annotations

import pytest

from games import contributions as fair_order
from games import table as table_rules
from kishpa.common.v1 import common_pb2
from kishpa.table.v1 import table_pb2
from kishpa.wallet.v1 import wallet_pb2
from services.table import wire_enums as names

pytestmark = pytest.mark.unit


def test_each_map_holds_the_internal_names_with_their_wire_values() -> None:
    assert dict(names.GROUP_KINDS) == {
        "run": common_pb2.GROUP_KIND_RUN,
        "set": common_pb2.GROUP_KIND_SET,
    }
    assert dict(names.DRAW_SOURCE_NAMES) == {
        table_pb2.DRAW_SOURCE_PILE: "pile",
        table_pb2.DRAW_SOURCE_DISCARD: "discard",
    }
    assert dict(names.RUN_END_NAMES) == {
        table_pb2.RUN_END_LOW: "low",
        table_pb2.RUN_END_HIGH: "high",
    }
    assert dict(names.SETTLEMENT_PHASES) == {
        "start": table_pb2.SETTLEMENT_PHASE_START,
        "end": table_pb2.SETTLEMENT_PHASE_END,
        "buy_in": table_pb2.SETTLEMENT_PHASE_BUY_IN,
        "payout": table_pb2.SETTLEMENT_PHASE_PAYOUT,
    }
    assert names.ROUND_PHASES["between_rounds"] == table_pb2.ROUND_PHASE_ENDED
    assert names.ROUND_PHASES["draw"] == names.ROUND_PHASES["play"] == table_pb2.ROUND_PHASE_TURNS
    assert names.ROUND_PHASES["start_reveal"] == table_pb2.ROUND_PHASE_START_REVEAL
    assert (
        names.TRANSFER_REASONS["bowl_contribution"] == wallet_pb2.TRANSFER_REASON_BOWL_CONTRIBUTION
    )
    assert 0 not in names.TRANSFER_REASONS.values()


def test_the_table_rules_names_are_the_maps_keys() -> None:
    """``games.table`` (and the deal's contributions) name statuses, watch policies and
    deadline kinds; each has its enum."""
    assert set(names.TABLE_STATUSES) == {
        table_rules.WAITING,
        table_rules.PLAYING,
        table_rules.CLOSED,
    }
    assert set(names.WATCH_POLICIES) == {
        table_rules.WATCH_PLAYERS,
        table_rules.WATCH_INVITEES,
        table_rules.WATCH_ANYONE,
    }
    assert dict(names.DEADLINE_KINDS) == {
        table_rules.TURN: table_pb2.DEADLINE_KIND_TURN,
        table_rules.WINDOW: table_pb2.DEADLINE_KIND_REVEAL_WINDOW,
        table_rules.NEXT_ROUND: table_pb2.DEADLINE_KIND_NEXT_ROUND,
        fair_order.CONTRIBUTIONS: table_pb2.DEADLINE_KIND_CONTRIBUTIONS,
    }


def test_every_round_phase_of_the_games_has_its_wire_phase() -> None:
    from games.hand import Phase
    from games.kishpa.round import PHASES as KISHPA_ROUND_PHASES

    for phase in (*KISHPA_ROUND_PHASES, *(p.value for p in Phase)):
        assert phase in names.ROUND_PHASES, phase
