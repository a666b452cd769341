"""``buf breaking`` guards the released contract (protos/released/contract.binpb): the
protos of this tree pass, and a change that would break a generated client is caught (a
check is trusted once it has been seen to fail)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).parents[2]
BUF = Path(sys.executable).with_name("buf")
BASELINE = ROOT / "protos" / "released" / "contract.binpb"


def _breaking(protos: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BUF), "breaking", "--against", str(BASELINE)],
        cwd=protos,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_contract_of_this_tree_keeps_the_released_one() -> None:
    result = _breaking(ROOT / "protos")
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(
    ("old", "new", "what"),
    [
        ("  int32 pile_count = 8;\n", "", 'Previously present field "8" with name "pile_count"'),
        (
            "    Settled settled = 17;",
            "    Settled settled = 99;",
            'Previously present field "17" with name "settled"',
        ),
        (
            "  TRANSFER_REASON_BANK_LOAD = 9;",
            "  TRANSFER_REASON_BANK_LOAD = 99;",
            'Previously present enum value "9"',
        ),
    ],
)
def test_a_breaking_change_is_caught(tmp_path: Path, old: str, new: str, what: str) -> None:
    protos = tmp_path / "protos"
    shutil.copytree(ROOT / "protos", protos, ignore=shutil.ignore_patterns("released"))
    changed = False
    for path in protos.rglob("*.proto"):
        text = path.read_text()
        if old in text:
            path.write_text(text.replace(old, new, 1))
            changed = True
    assert changed, f"the test's edit {old!r} no longer applies"
    result = _breaking(protos)
    assert result.returncode != 0
    assert what in result.stdout + result.stderr
