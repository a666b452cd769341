"""``kishpa wallet explain`` knows a rule for every reason the ledger records."""

from __future__ import annotations

import pytest

from cli.wallet_explain import RULES
from games.ledger import Reason

pytestmark = pytest.mark.unit


def test_every_ledger_reason_has_its_rule() -> None:
    assert set(RULES) == {r.value for r in Reason}
