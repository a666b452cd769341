"""The replay's fold of a deal's public moves in the browser (web/src/replay.ts: every hand,
the discards and the laid cards after each move), run with Node's own test runner against
boards worked out by hand from docs/fairness.md, "Every public move" (web/test/replay.test.mjs):
the take and undo and the joker release that a bots' deal in the browser test may not bring."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

WEB = Path(__file__).resolve().parents[2] / "web"


def test_the_replay_folds_every_kind_of_move_as_the_fairness_rules_read_it() -> None:
    if shutil.which("node") is None or not (WEB / "test" / "dist" / "replay.mjs").exists():
        pytest.skip("the web client is not built (make web)")
    run = subprocess.run(
        ["node", "--test", "test/replay.test.mjs"],
        cwd=WEB,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert "# fail 0" in run.stdout
