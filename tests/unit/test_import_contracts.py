"""The import-linter contracts of ``make lint`` pass on the tree, and each one fails when a
forbidden import is added (a check is trusted once it has been seen to fail).

The packages are copied to a temporary directory and ``lint-imports`` runs there with the
project's own ``pyproject.toml``; each case adds one import to one copied module.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = (
    "games", "shared", "archive", "services", "workers", "cli", "sdk", "kishpa",
    "devkit", "benchmarks", "tests",
)  # fmt: skip
LINT_IMPORTS = str(Path(sys.executable).with_name("lint-imports"))


def _lint(tree: Path, *contracts: str) -> subprocess.CompletedProcess[str]:
    args = [LINT_IMPORTS, "--no-cache"]
    for contract in contracts:
        args += ["--contract", contract]
    env = {**os.environ, "PYTHONPATH": str(tree)}
    return subprocess.run(
        args, cwd=tree, env=env, capture_output=True, text=True, timeout=300, check=False
    )


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the project's packages and its pyproject.toml."""
    if not (ROOT / "kishpa").is_dir():
        pytest.fail("the generated kishpa package is missing: run `make proto`")
    copy = tmp_path_factory.mktemp("layers")
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for package in PACKAGES:
        shutil.copytree(ROOT / package, copy / package, ignore=ignore)
    shutil.copy(ROOT / "pyproject.toml", copy / "pyproject.toml")
    return copy


@pytest.fixture
def edit(tree: Path) -> Iterator[Path]:
    """The copied tree; every module changed by a test is restored after it."""
    snapshot = {p: p.read_text() for p in tree.rglob("*.py")}
    yield tree
    for path, text in snapshot.items():
        if path.read_text() != text:
            path.write_text(text)


def test_the_project_keeps_every_contract(tree: Path) -> None:
    done = _lint(tree)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "BROKEN" not in done.stdout


CASES = [
    # (contract id, module that gains an import, the forbidden import)
    ("deployables", "workers/outbox.py", "from services.table import store"),
    ("deployables", "services/table/server.py", "import workers.enqueue"),
    ("deployables", "services/matchmaking/gateways.py", "from services.table import convert"),
    ("deployables", "services/wallet/servicer.py", "import services.matchmaking.store"),
    ("layers", "games/kishpa/round.py", "import services.common.errors"),
    ("layers", "shared/keys.py", "import services.common.settings"),
    ("layers", "shared/phase_record.py", "import games.kishpa"),
    ("layers", "services/table/service.py", "import cli.main"),
    ("layers", "games/table.py", "import shared.keys"),
    ("sdk-clients", "sdk/client.py", "import services.table.service"),
    ("play-clients", "cli/play/bot.py", "import services.table.engine"),
    ("play-clients", "cli/play/games.py", "from services.common import errors"),
    ("generic-clients", "cli/play/bot.py", "from games.kishpa import bot"),
    ("generic-clients", "cli/play/session.py", "import games.hand.melds"),
    ("games-apart", "games/hand/errors.py", "from games.kishpa.errors import TileNotationError"),
    ("games-apart", "games/kishpa/tiles.py", "import games.hand.cards"),
    ("games-shared", "games/table.py", "from games.kishpa import errors"),
    ("games-shared", "games/errors.py", "import games.hand"),
    ("dev-only", "workers/settlement.py", "from devkit import phase_samples"),
    ("dev-only", "services/table/service.py", "import tests.servers"),
    ("benchmarks-not-tests", "benchmarks/bench_capacity.py", "from tests import backends"),
    ("benchmarks-not-tests", "devkit/redis_servers.py", "import tests.conftest"),
    ("games-public-api", "services/table/kishpa_engine.py", "import games.kishpa.round"),
    ("games-public-api", "services/table/hand_engine.py", "from games.hand import turns"),
    ("games-public-api", "services/table/service.py", "from games.kishpa.bowl import contribution"),
]


@pytest.mark.parametrize(("contract", "module", "line"), CASES)
def test_a_forbidden_import_breaks_its_contract(
    edit: Path, contract: str, module: str, line: str
) -> None:
    path = edit / module
    path.write_text(path.read_text() + f"\n{line}  # noqa\n")
    done = _lint(edit, contract)
    assert done.returncode != 0, f"{contract} kept despite `{line}` in {module}:\n{done.stdout}"
    assert "BROKEN" in done.stdout
    # The report names the offending module.
    assert module.removesuffix(".py").replace("/", ".") in done.stdout
