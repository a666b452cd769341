"""The production image installs the runtime lock only: the commands that need an extra
(`rich` for play and bots) say which one, and every other command still works."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.unit

WITHOUT_RICH = "import sys; sys.modules['rich'] = None; from cli.main import main; "


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", WITHOUT_RICH + code], capture_output=True, text=True, timeout=60
    )


def test_play_without_rich_names_the_extra() -> None:
    done = _run("sys.exit(main(['play']))")
    assert done.returncode == 2, done.stderr
    assert "pip install 'kishpa[play]'" in done.stderr
    assert "Traceback" not in done.stderr


def test_the_other_commands_parse_without_rich() -> None:
    done = _run("main(['--help'])")
    assert done.returncode == 0, done.stderr
    assert "wallet" in done.stdout
    assert "bots" in done.stdout  # listed, with what it needs
