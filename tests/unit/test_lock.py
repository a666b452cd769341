"""The dependency lock agrees with pyproject.toml, and the check notices when it does not."""

from __future__ import annotations

from pathlib import Path

import pytest

from devkit import lock

pytestmark = pytest.mark.unit


def test_the_committed_locks_match_pyproject() -> None:
    assert [p for name in lock.LOCKS for p in lock.problems(name)] == []


def test_every_locked_package_carries_hashes() -> None:
    for path, _ in lock.LOCKS.values():
        for line in path.read_text().splitlines():
            if lock.PIN.match(line):
                assert line.rstrip().endswith("\\"), f"{path.name}: {line} has no hash"


def test_a_changed_requirement_makes_the_lock_stale(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    changed = lock.PYPROJECT.read_text().replace('"pyjwt~=2.15"', '"pyjwt~=2.16"')
    assert changed != lock.PYPROJECT.read_text()
    (tmp_path / "pyproject.toml").write_text(changed)
    monkeypatch.setattr(lock, "PYPROJECT", tmp_path / "pyproject.toml")
    found = lock.problems("dev")
    assert any("run `make lock`" in p for p in found)
    assert any("pyjwt" in p and "~=2.16" in p for p in found)  # 2.15.x no longer satisfies
