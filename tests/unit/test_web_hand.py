"""Hand's card logic in the browser (web/src/hand.ts: meld values for the 51 opening, the
order picked cards are laid in, the suggested discard), run with Node's own test runner
against values worked out by hand from the rules (web/test/hand.test.mjs)."""

from __future__ import annotations

import pytest

from tests.support.node_tests import run_node_test

pytestmark = pytest.mark.unit


def test_the_browser_hand_logic_counts_melds_by_the_rules() -> None:
    run_node_test("hand")
