"""A game is a plug-in: registered once (``games.registry``), never named in a branch outside
``games/``, and found by every layer that has a per-game part."""

from __future__ import annotations

import ast
import itertools
from pathlib import Path

import pytest

from archive.round_fold import FOLDS, STARTS
from cli.play.games import ADAPTERS, BY_NAME
from cli.play.uis import UIS
from games.registry import BY_WIRE, GAMES, NAMES
from kishpa.common.v1 import common_pb2
from sdk.fairness import GAME_CHECKS
from services.common.games import GAME_ENUMS
from services.common.settings import Settings
from services.table.engines import engines
from services.table.game_wire import WIRES
from workers.settlement import PHASE_POSTINGS

ROOT = Path(__file__).resolve().parents[2]
CHECKED = ("services", "workers", "archive", "shared", "cli", "sdk")
"""The production packages outside ``games/`` (the generated ``kishpa`` package is not
checked, nor the tests, the benchmarks and the dev kit)."""


def per_game_branches(source: str, names: frozenset[str]) -> list[int]:
    """The lines of ``source`` that branch on a particular game: a comparison with a game's
    name (``game == "hand"``, ``game in ("kishpa", ...)``) or its wire enum
    (``== GAME_HAND``), a ``case "hand":``, or a table keyed by two games' names."""
    enums = {f"GAME_{n.upper()}" for n in names}

    def is_name(node: ast.expr) -> bool:
        return isinstance(node, ast.Constant) and node.value in names

    def is_enum(node: ast.expr) -> bool:
        return (isinstance(node, ast.Attribute) and node.attr in enums) or (
            isinstance(node, ast.Name) and node.id in enums
        )

    def holds_name(node: ast.expr) -> bool:
        containers = (ast.Tuple, ast.List, ast.Set)
        return isinstance(node, containers) and any(is_name(e) or is_enum(e) for e in node.elts)

    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            pairs = itertools.pairwise(operands)
            for op, (left, right) in zip(node.ops, pairs, strict=True):
                if isinstance(op, ast.In | ast.NotIn):
                    # "hand" in data is a key of the data, not a game; x in ("hand", ...) is.
                    hit = holds_name(right) or is_enum(left)
                else:
                    hit = any(is_name(o) or is_enum(o) for o in (left, right))
                if hit:
                    lines.append(node.lineno)
        elif isinstance(node, ast.MatchValue) and (is_name(node.value) or is_enum(node.value)):
            lines.append(node.lineno)
        elif (
            isinstance(node, ast.Dict)
            and len(node.keys) > 1
            and all(k is not None and is_name(k) for k in node.keys)
        ):
            lines.append(node.lineno)  # a table keyed by games (a "hand" key of data is not)
    return sorted(set(lines))


def test_no_per_game_branch_outside_games() -> None:
    names = frozenset(NAMES)
    found = []
    for package in CHECKED:
        for path in sorted((ROOT / package).rglob("*.py")):
            if path.name.endswith(("_pb2.py", "_pb2_grpc.py")):
                continue
            for line in per_game_branches(path.read_text(), names):
                found.append(f"{path.relative_to(ROOT)}:{line}")
    assert found == [], "per-game branches outside games/ (look the game up in games.registry)"


@pytest.mark.parametrize(
    ("source", "branches"),
    [
        ('if game == "hand":\n    pass\n', [1]),
        ('x = game != "kishpa"\n', [1]),
        ('x = g in ("kishpa", "other")\n', [1]),
        ("x = v.game == common_pb2.GAME_HAND\n", [1]),
        ('x = {"kishpa": 1, "hand": 2}\n', [1]),
        ('match g:\n    case "hand":\n        pass\n', [2]),
        # Data keys that happen to be a game's name are not a game.
        (
            'x = "hand" in private\ny = d.get("hand")\nz = {"kishpa": k, "joker": j, "hand": h}\n',
            [],
        ),
        ("x = spec.presses_last_round\n", []),
    ],
)
def test_the_check_finds_what_it_should(source: str, branches: list[int]) -> None:
    assert per_game_branches(source, frozenset({"kishpa", "hand"})) == branches


def test_every_game_has_its_wire_enum() -> None:
    enum = common_pb2.Game.DESCRIPTOR.values_by_name
    assert {g.wire_value: g.name for g in GAMES} == {
        v.number: n.removeprefix("GAME_").lower() for n, v in enum.items() if v.number
    }
    assert {g.name: g.wire_value for g in GAMES} == GAME_ENUMS
    assert set(BY_WIRE) == {g.wire_value for g in GAMES}


def test_every_layer_registers_every_game() -> None:
    names = set(NAMES)
    assert set(engines()) == names
    assert set(WIRES) == names
    assert set(FOLDS) == names
    assert set(STARTS) == {g.round_start_event for g in GAMES}
    assert set(GAME_CHECKS) == names
    assert set(BY_NAME) == names
    assert {a.name: common_pb2.Game.ValueType(v) for v, a in ADAPTERS.items()} == GAME_ENUMS
    assert set(UIS) == names
    assert set(Settings().stakes()) == names
    assert set(PHASE_POSTINGS) == {(g.name, p) for g in GAMES for p in g.postings}


def test_each_games_specs_agree_with_its_parts() -> None:
    for game in GAMES:
        engine = engines()[game.name]
        assert engine.name == game.name
        assert game.ending_phase in game.postings
        assert game.settles_since is None or game.settles_since in game.postings
        assert game.round_start_event != game.round_end_event
