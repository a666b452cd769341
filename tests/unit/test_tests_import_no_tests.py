"""No test module imports another (CONTRIBUTING.md, "Tests never import tests"): what several
share lives in tests/support/. A test module is run, not a library; importing one runs its
module-level code and collects its tests twice."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

TESTS = Path(__file__).resolve().parents[1]


def imported_test_modules(source: str) -> list[str]:
    """The test modules (``test_*``) the Python ``source`` imports, as written."""
    found = []
    for node in ast.walk(ast.parse(source)):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = "." * node.level + (node.module or "")
            names = [module] + [f"{module}.{alias.name}" for alias in node.names]
        found += [n for n in names if n.rsplit(".", 1)[-1].startswith("test_")]
    return found


def test_the_check_sees_every_form_of_import() -> None:
    source = (
        "from tests.unit.test_a import helper\n"
        "from tests.e2e import test_b as b\n"
        "import tests.integration.test_c\n"
        "from .test_d import x\n"
        "from tests.support.waiting import wait_until\n"
        "from tests.integration.tables.conftest import cleanup\n"
    )
    assert imported_test_modules(source) == [
        "tests.unit.test_a",
        "tests.e2e.test_b",
        "tests.integration.test_c",
        ".test_d",
    ]


def test_no_test_module_imports_another() -> None:
    offenders = {
        str(path.relative_to(TESTS)): imported
        for path in sorted(TESTS.rglob("*.py"))
        if (imported := imported_test_modules(path.read_text()))
    }
    assert offenders == {}, "move what they share into tests/support/"
