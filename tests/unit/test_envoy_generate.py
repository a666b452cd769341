"""Envoy's routes are generated from the access table, and the committed file is the output."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from deploy.envoy import generate
from services.common.access import ACCESS, PLAYER, WORKER

pytestmark = pytest.mark.unit

DRAW = "/kishpa.table.v1.TableService/Draw"
APPLY_BATCH = "/kishpa.wallet.v1.WalletService/ApplyBatch"


def _routed(text: str) -> dict[str, str]:
    config = yaml.safe_load(text)
    manager = config["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]
    routes = manager["typed_config"]["route_config"]["virtual_hosts"][0]["routes"]
    return {r["match"]["path"]: r["route"]["cluster"] for r in routes if "path" in r["match"]}


def test_the_committed_envoy_config_is_the_generated_one() -> None:
    committed = generate.ENVOY_CONFIG.read_text()
    assert generate.render(committed) == committed, (
        "deploy/envoy/envoy.yaml is stale: run python -m deploy.envoy.generate"
    )


def test_a_table_changed_without_regenerating_is_caught() -> None:
    committed = generate.ENVOY_CONFIG.read_text()
    # Draw taken from players, ApplyBatch granted to them: both must show in Envoy's routes.
    changed = {**ACCESS, DRAW: frozenset({WORKER}), APPLY_BATCH: frozenset({PLAYER, WORKER})}
    fresh = generate.render(committed, changed)
    assert fresh != committed
    routed = _routed(fresh)
    assert DRAW not in routed
    assert routed[APPLY_BATCH] == "wallet"
    assert _routed(committed)[DRAW] == "table"


def test_the_check_command_fails_on_a_stale_file_and_the_writer_mends_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "envoy.yaml"
    committed = generate.ENVOY_CONFIG.read_text()
    draw_route = next(line for line in committed.splitlines(keepends=True) if DRAW in line)
    config.write_text(committed.replace(draw_route, ""))
    assert generate.main(["--check", "--config", str(config)]) == 1
    assert "stale routes" in capsys.readouterr().out
    assert generate.main(["--config", str(config)]) == 0
    assert config.read_text() == committed
    assert generate.main(["--check", "--config", str(config)]) == 0


def test_only_the_generated_section_is_rewritten() -> None:
    text = "a: 1\n  # generated:begin x\n  - old\n  # generated:end\nb: 2\n"
    fresh = generate.render(text, {DRAW: frozenset({PLAYER})})
    assert fresh == (
        "a: 1\n  # generated:begin x\n"
        '  - match: {path: "/kishpa.table.v1.TableService/Draw"}\n'
        "    route: {cluster: table, timeout: 0s,"
        " max_stream_duration: {grpc_timeout_header_max: 0s}}\n"
        "  # generated:end\nb: 2\n"
    )
    with pytest.raises(generate.MarkersMissing):
        generate.render("a: 1\n")
