"""The web client's answer to a watch refused EVENTS_TRIMMED (web/src/trimmed.ts, used by the
table page's watch loop): reload the table and watch from its view; run with Node's own test
runner (web/test/trimmed.test.mjs) on errors built as the server sends them."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

WEB = Path(__file__).resolve().parents[2] / "web"


def test_the_web_client_reloads_the_view_when_its_watch_is_trimmed() -> None:
    if shutil.which("node") is None or not (WEB / "test" / "dist" / "trimmed.mjs").exists():
        pytest.skip("the web client is not built (make web)")
    run = subprocess.run(
        ["node", "--test", "test/trimmed.test.mjs"],
        cwd=WEB,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert "# fail 0" in run.stdout
    assert "# pass 2" in run.stdout
