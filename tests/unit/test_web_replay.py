"""The replay's fold of a deal's public moves in the browser (web/src/replay.ts: every hand,
the discards and the laid cards after each move), run with Node's own test runner against
boards worked out by hand from docs/fairness.md, "Every public move" (web/test/replay.test.mjs):
the take and undo and the joker release that a bots' deal in the browser test may not bring."""

from __future__ import annotations

import pytest

from tests.support.node_tests import run_node_test

pytestmark = pytest.mark.unit


def test_the_replay_folds_every_kind_of_move_as_the_fairness_rules_read_it() -> None:
    run_node_test("replay")
