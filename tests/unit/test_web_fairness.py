"""The browser's fairness check (web/src/fair.ts, WebCrypto HMAC-SHA256) recomputes the
decks and the deal of docs/fairness.md's test vectors (Node's own test runner)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

WEB = Path(__file__).resolve().parents[2] / "web"


def test_the_browser_fairness_code_matches_the_documented_vectors() -> None:
    if shutil.which("node") is None or not (WEB / "test" / "dist" / "fair.mjs").exists():
        pytest.skip("the web client is not built (make web)")
    run = subprocess.run(
        ["node", "--test", "test/fair.test.mjs"],
        cwd=WEB,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert "# fail 0" in run.stdout
