"""Compatibility branches count their uses, so the metric tells when one can go."""

from __future__ import annotations

import pytest
from prometheus_client import REGISTRY

from services.common.compat import BRANCHES
from services.table.engine import Table, TableSettings
from services.table.hand_engine import _seeds_used

pytestmark = pytest.mark.unit


def _hits(branch: str) -> float:
    value = REGISTRY.get_sample_value("kishpa_compat_branch_hits_total", {"branch": branch})
    return value or 0.0


def _table(game: dict[str, object]) -> Table:
    return Table(
        table_id="t-compat",
        game_name="hand",
        creator="ann",
        settings=TableSettings(seats=2),
        created_ms=0,
        players=["ann", "bob"],
        status="playing",
        client_seeds={"ann": "a-sits", "bob": "b-sits"},
        game=game,
    )


def test_a_hand_deal_stored_before_contributions_uses_the_sit_down_seeds_and_is_counted() -> None:
    branch = "hand_deal_without_contributions"
    assert branch in BRANCHES
    before = _hits(branch)
    assert _seeds_used(_table({"round_no": 1})) == ["a-sits", "b-sits"]
    assert _hits(branch) == before + 1


def test_a_hand_deal_with_contributions_is_not_the_compatibility_branch() -> None:
    branch = "hand_deal_without_contributions"
    before = _hits(branch)
    assert _seeds_used(_table({"round_no": 1, "client_seeds": ["x", None]})) == ["x", None]
    assert _hits(branch) == before
