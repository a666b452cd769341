"""The soak benchmark's short variant (the long one: ``python benchmarks/bench_soak.py
--tables 200 --minutes 30``, docs/BENCHMARKS.md): the real stack plays bot tables in waves
for half a minute; the script samples every series, draws them and judges their flatness.
Half a minute is two waves of tables: too short for the 5 % verdict (connections come and
go with the waves), which belongs to the long run; here the machinery is checked, and that
nothing grows without bound (a leak per table would double the descriptors of a service)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.bench_soak import SERIES_CHECKED, flatness

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


def test_a_short_soak_samples_everything_and_nothing_grows_without_bound(tmp_path: Path) -> None:
    out_json, out_svg = tmp_path / "soak.json", tmp_path / "soak.svg"
    done = subprocess.run(
        [
            sys.executable, str(ROOT / "benchmarks" / "bench_soak.py"),
            "--tables", "2", "--minutes", "0.5", "--rounds", "2", "--sample-s", "2",
            "--finished-ttl-s", "5", "--warmup", "0.3", "--drift-interval", "5",
            "--json", str(out_json), "--svg", str(out_svg),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )  # fmt: skip
    assert done.returncode in (0, 1), done.stdout + done.stderr  # 2: bots failed
    rows = json.loads(out_json.read_text())["rows"]
    assert len(rows) >= 8
    assert all(set(SERIES_CHECKED) <= set(row) for row in rows)
    assert max(row["open_streams"] for row in rows) > 0  # tables were played meanwhile
    svg = out_svg.read_text()
    # + latency, phases recorded, drift checks
    assert svg.count("<polyline") == len(SERIES_CHECKED) + 3
    assert rows[-1]["drift_checks"] >= 1  # the drift check's own worker ran it
    growth = flatness(rows, 0.3)
    assert set(growth) == set(SERIES_CHECKED)
    for name in SERIES_CHECKED:
        assert f"{name} " in done.stdout  # every series is reported with its growth
    for name in ("table_fds", "matchmaking_fds", "wallet_fds", "worker_fds", "drift_fds"):
        assert growth[name] < 1.0, (name, growth[name], done.stdout)
    # After the players' sessions, every key they left expires on its own, except the ones
    # kept on purpose: the device's starting-grant marker (it guards money) and what a
    # table still open at the end holds (it expires once the table has closed), and the
    # broker's few fixed bindings.
    census = json.loads(out_json.read_text())["keys"]
    forever = {pattern for pattern, (_, persistent, _) in census.items() if persistent}
    kept = ("kishpa:limits:grant:{*}", "kishpa:table:", "_kombu.binding")
    assert all(p.startswith(kept) for p in forever), forever
