"""Turn what the terminal showed in a real run into the captures docs/fairness.md shows.

``tests/e2e/test_play_terminal.py`` plays a round with ``kishpa play --bots 3`` through a
pseudo-terminal against the real services and leaves the raw output (colours included) in
``var/screenshots/kishpa-play.log`` and ``kishpa verify``'s in ``kishpa-verify.txt``. This
keeps the end of the round (the last board up to the verdict) and renders both as SVG
terminals and plain text into ``docs/img/``::

    KISHPA_SCREENSHOT_DIR=var/screenshots .venv/bin/pytest tests/e2e/test_play_terminal.py
    .venv/bin/python -m devkit.terminal_capture
"""

from __future__ import annotations

import io
import re
import sys
from pathlib import Path

from rich.console import Console
from rich.text import Text

REPO = Path(__file__).resolve().parents[1]
WIDTH = 100
CLEARED_PROMPT = re.compile(r"kishpa> \r?\n\x1b\[2K")
"""The line reader's prompt, cleared (ESC [2K) before an event line is printed over it."""
NOT_COLOUR = re.compile(r"\x1b\[(?![0-9;]*m)[0-9;?]*[A-Za-z]|\r")
"""Escape sequences other than colours (a terminal obeys them; a capture drops them)."""


def round_end(log: str) -> str:
    """The last board before the round's verdict, through the verdict line."""
    text = NOT_COLOUR.sub("", CLEARED_PROMPT.sub("", log))
    verdict = text.rfind("table verified (")
    if verdict < 0:
        raise ValueError("no 'table verified' in the capture")
    start = text.rfind("╭", 0, verdict)
    end = text.find("kishpa> ", verdict)
    return text[start if start >= 0 else 0 : end if end >= 0 else len(text)].rstrip() + "\n"


def render(ansi: str, title: str, svg: Path) -> str:
    """Write ``ansi`` as an SVG terminal; returns the plain text."""
    console = Console(record=True, width=WIDTH, file=io.StringIO(), color_system="truecolor")
    text = Text.from_ansi(ansi)
    console.print(text, soft_wrap=True)
    svg.write_text(console.export_svg(title=title), encoding="utf-8")
    return text.plain


def main(source: Path = REPO / "var" / "screenshots", out: Path = REPO / "docs" / "img") -> None:
    out.mkdir(parents=True, exist_ok=True)
    play = round_end((source / "kishpa-play.log").read_text(encoding="utf-8"))
    plain = render(play, "kishpa play --bots 3", out / "kishpa-play-table-verified.svg")
    (out / "kishpa-play-table-verified.txt").write_text(plain, encoding="utf-8")
    verify = (source / "kishpa-verify.txt").read_text(encoding="utf-8")
    render(verify, "kishpa verify", out / "kishpa-verify-table-verified.svg")
    (out / "kishpa-verify-table-verified.txt").write_text(verify, encoding="utf-8")


if __name__ == "__main__":
    main(*(Path(a) for a in sys.argv[1:3]))
