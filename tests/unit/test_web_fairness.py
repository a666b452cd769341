"""The browser's fairness check (web/src/fair.ts, WebCrypto HMAC-SHA256) recomputes the
decks and the deal of docs/fairness.md's test vectors (Node's own test runner)."""

from __future__ import annotations

import pytest

from tests.support.node_tests import run_node_test

pytestmark = pytest.mark.unit


def test_the_browser_fairness_code_matches_the_documented_vectors() -> None:
    run_node_test("fair")
