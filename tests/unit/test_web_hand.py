"""Hand's card logic in the browser (web/src/hand.ts: meld values for the 51 opening, the
order picked cards are laid in, the suggested discard), run with Node's own test runner
against values worked out by hand from the rules (web/test/hand.test.mjs)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

WEB = Path(__file__).resolve().parents[2] / "web"


def test_the_browser_hand_logic_counts_melds_by_the_rules() -> None:
    if shutil.which("node") is None or not (WEB / "test" / "dist" / "hand.mjs").exists():
        pytest.skip("the web client is not built (make web)")
    run = subprocess.run(
        ["node", "--test", "test/hand.test.mjs"],
        cwd=WEB,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert "# fail 0" in run.stdout
