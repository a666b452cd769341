"""The web client's answer to a watch refused EVENTS_TRIMMED (web/src/trimmed.ts, used by the
table page's watch loop): reload the table and watch from its view; run with Node's own test
runner (web/test/trimmed.test.mjs) on errors built as the server sends them."""

from __future__ import annotations

import pytest

from tests.support.node_tests import run_node_test

pytestmark = pytest.mark.unit


def test_the_web_client_reloads_the_view_when_its_watch_is_trimmed() -> None:
    output = run_node_test("trimmed")
    assert "# pass 2" in output
