"""The repository's documents link only inside the repository, to files and headings that
exist (issue 23: the README pointed at ``../shared/RULES.md``, which a clone does not have)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)|!\[[^\]]*\]\(([^)\s]+)\)")
CODE = re.compile(r"```.*?```", re.S)


def documents() -> list[Path]:
    return [*sorted(ROOT.glob("*.md")), *sorted((ROOT / "docs").rglob("*.md"))]


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = CODE.sub("", path.read_text())
    found: set[str] = set()
    for line in text.splitlines():
        if line.startswith("#"):
            base = slug(line.lstrip("#"))
            n = 0
            name = base
            while name in found:
                n += 1
                name = f"{base}-{n}"
            found.add(name)
    return found


def links(path: Path) -> list[str]:
    text = CODE.sub("", path.read_text())
    return [a or b for a, b in LINK.findall(text)]


@pytest.mark.parametrize("doc", documents(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_stays_in_the_repository_and_exists(doc: Path) -> None:
    for target in links(doc):
        if re.match(r"^[a-z]+:", target):  # http(s), mailto: not a file of the repo
            continue
        file, _, anchor = target.partition("#")
        resolved = (doc.parent / file).resolve() if file else doc
        assert resolved.is_relative_to(ROOT), f"{doc.name} links outside the repository: {target}"
        assert resolved.exists(), f"{doc.name} links to a missing file: {target}"
        if anchor and resolved.suffix == ".md":
            assert anchor in anchors(resolved), f"{doc.name}: no heading #{anchor} in {file}"


def test_slugs_follow_githubs_rules() -> None:
    assert slug(" 2. The kishpa, the joker and the dolls") == "2-the-kishpa-the-joker-and-the-dolls"
    assert (
        slug(" House bots: solver against draw-and-discard (benchmarks/bench_bots.py)")
        == "house-bots-solver-against-draw-and-discard-benchmarksbench_botspy"
    )


@pytest.mark.parametrize("doc", documents(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_document_names_a_path_outside_the_repository(doc: Path) -> None:
    """Links or not (``../shared/RULES.md`` in backticks was the README's): a relative path
    a document names must resolve inside the clone."""
    for path in re.findall(r"(?:\.\./)+[\w.-][\w./-]*", doc.read_text()):
        resolved = (doc.parent / path).resolve()
        assert resolved.is_relative_to(ROOT), f"{doc.name} names {path}, outside the repository"
