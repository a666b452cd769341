"""Running one of the web client's Node tests (web/test/<name>.test.mjs, Node's own runner)
against the modules `make web` builds into web/test/dist/."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

WEB = Path(__file__).resolve().parents[2] / "web"


def run_node_test(name: str) -> str:
    """Run ``web/test/<name>.test.mjs``; skip when Node or the build is missing, fail on any
    failed test; returns the runner's output (its TAP summary)."""
    if shutil.which("node") is None or not (WEB / "test" / "dist" / f"{name}.mjs").exists():
        pytest.skip("the web client is not built (make web)")
    run = subprocess.run(
        ["node", "--test", f"test/{name}.test.mjs"],
        cwd=WEB,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert "# fail 0" in run.stdout
    return run.stdout
