"""The built web client (``make web``): within its size budget, hashed names, no source maps.

The budget is for what a phone downloads on a first visit: the script and the style sheet,
gzipped (brotli is smaller still). Raise it deliberately, in the same change that needs it.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

DIST = Path(__file__).resolve().parents[2] / "web" / "dist"
GZIP_BUDGET_BYTES = 80_000
"""Script (with the chunks it imports at once) + style sheet, gzipped. Measured 2026-12-02: see
docs/web.md, "How it is delivered";
raised from 75,000 with issue 33's table (the pause, leaving, play again, the phone dock,
sound): 76,273 then. Issue 31 loads History and the fairness verifier on first use, outside
the budget: 74,828 (from 78,708)."""

pytestmark = pytest.mark.skipif(
    not (DIST / "assets.json").is_file(), reason="the web client is not built (make web)"
)


def _assets() -> dict[str, Any]:
    names: dict[str, Any] = json.loads((DIST / "assets.json").read_text())
    return names


def _first_visit(names: dict[str, Any]) -> list[str]:
    """What the page loads at once: the script, the chunks it imports, the style sheet (not
    the parts loaded on first use, such as History)."""
    return [names["js"], *names["preload"], names["css"]]


def test_the_gzipped_bundle_is_within_its_budget() -> None:
    total = sum(len(gzip.compress((DIST / n).read_bytes(), 9)) for n in _first_visit(_assets()))
    assert total <= GZIP_BUDGET_BYTES, f"{total} gzipped bytes > budget {GZIP_BUDGET_BYTES}"


def test_assets_have_hashed_names_named_by_the_page() -> None:
    names = _assets()
    index = (DIST / "index.html").read_text()
    for name in _first_visit(names):
        assert f'"{name}"' in index
    assert names["lazy"], "History is loaded on first use, apart from the first visit"
    for name in [*_first_visit(names), *names["lazy"]]:
        assert name.count("-") == 1
        assert (DIST / f"{name}.br").is_file()
        assert (DIST / f"{name}.gz").is_file()
    # A lazy part is named (so found) by a script that imports it.
    every = [names["js"], *names["preload"], *names["lazy"]]
    scripts = [(n, (DIST / n).read_text()) for n in every]
    for lazy in names["lazy"]:
        assert any(f'"./{lazy}"' in text for n, text in scripts if n != lazy), lazy


def test_no_source_map_is_published() -> None:
    assert not list(DIST.rglob("*.map"))
    script = (DIST / _assets()["js"]).read_text()
    assert "sourceMappingURL" not in script


def test_a_favicon_is_published() -> None:
    ico = (DIST / "favicon.ico").read_bytes()
    assert ico[:4] == b"\x00\x00\x01\x00"  # an icon file
    assert ico[22:26] == b"\x89PNG"
    assert (DIST / "favicon.svg").read_text().startswith("<svg")
