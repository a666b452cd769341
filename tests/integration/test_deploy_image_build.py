"""The Dockerfile's build steps, replayed without Docker: does the image get all the code?

An editable install hides packaging mistakes (a package without ``__init__.py``, a Lua
script or migration file not declared as package data): the image's non-editable install
would silently lack them. This test copies exactly what the Dockerfile copies (minus what
.dockerignore drops), runs the Dockerfile's own protoc command, builds and installs the
package into an empty directory, and runs the installed ``kishpa`` from there, away from the
source tree: its commands parse and ``kishpa migrate`` works on a fresh SQLite database.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from deploy import dockerfile
from deploy.contract import WORKLOADS
from deploy.render import REPO_ROOT

pytestmark = pytest.mark.integration

DOCKERFILE = REPO_ROOT / "deploy" / "docker" / "Dockerfile"
SHIPPED_SUFFIXES = (".py", ".lua", ".ini", ".mako", ".pyi")


def run(command: list[str], cwd: Path, env: dict[str, str] | None = None) -> str:
    result = subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert result.returncode == 0, f"{shlex.join(command)}:\n{result.stdout}\n{result.stderr}"
    return result.stdout


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """(build context copy, wheel, install target) after the Dockerfile's builder steps."""
    stages = dockerfile.parse(DOCKERFILE.read_text())
    context = tmp_path_factory.mktemp("context")
    for copy in stages[0].args_of("COPY"):
        *sources, _ = copy.split()
        for source in sources:
            path = REPO_ROOT / source.rstrip("/")
            if path.is_dir():
                shutil.copytree(
                    path,
                    context / path.name,
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".env"),
                )
            else:
                shutil.copy2(path, context / path.name)
    protoc = next(r for r in stages[0].args_of("RUN") if "grpc_tools.protoc" in r)
    # The builder's own virtualenv is this one (same pinned grpcio-tools).
    protoc = protoc.replace("/opt/build-tools/bin/python", shlex.quote(sys.executable))
    run(["bash", "-euo", "pipefail", "-c", protoc], cwd=context)
    wheels = tmp_path_factory.mktemp("wheels")
    run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(wheels),
            ".",
        ],
        cwd=context,
    )
    (wheel,) = wheels.glob("kishpa-*.whl")
    target = tmp_path_factory.mktemp("site")
    run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--target",
            str(target),
            str(wheel),
        ],
        cwd=target,
    )
    return context, wheel, target


def test_the_wheel_holds_every_source_file(built: tuple[Path, Path, Path]) -> None:
    context, wheel, _ = built
    expected = {
        str(path.relative_to(context))
        for top in ("games", "services", "workers", "cli", "kishpa")
        for path in (context / top).rglob("*")
        if path.suffix in SHIPPED_SUFFIXES and "__pycache__" not in path.parts
    }
    assert any(name.endswith("_pb2.py") for name in expected), "protoc generated nothing"
    shipped = set(zipfile.ZipFile(wheel).namelist())
    missing = sorted(expected - shipped)
    assert missing == [], f"the image would lack: {missing}"


def installed_env(target: Path, tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG")}
    env["PYTHONPATH"] = str(target)
    env["KISHPA_LOG_FORMAT"] = "json"
    env["DATABASE_URL"] = f"sqlite:///{tmp_path / 'wallet.sqlite3'}"
    return env


def test_installed_kishpa_runs_away_from_the_sources(
    built: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    _, _, target = built
    env = installed_env(target, tmp_path)
    where = run(
        [sys.executable, "-c", "import cli, services; print(cli.__file__, services.__file__)"],
        tmp_path,
        env,
    )
    assert all(path.startswith(str(target)) for path in where.split()), where
    kishpa = [sys.executable, str(target / "bin" / "kishpa")]
    commands = run([*kishpa, "--help"], tmp_path, env)
    for workload in WORKLOADS.values():
        if re.search(rf"\b{workload.args[0]}\b", commands) is None:
            continue  # a command group not written yet: test_deploy_manifests skips it too
        run([*kishpa, *workload.args, "--help"], tmp_path, env)


def test_installed_migrations_create_the_wallet_schema(
    built: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    _, _, target = built
    env = installed_env(target, tmp_path)
    kishpa = [sys.executable, str(target / "bin" / "kishpa")]
    run([*kishpa, *WORKLOADS["migrate"].args], tmp_path, env)
    assert (tmp_path / "wallet.sqlite3").stat().st_size > 0
    # The CronJob records its run through the wallet service; with no wallet running here it
    # records straight into the migrated database (which needs the runs table too).
    args = list(WORKLOADS["reconcile"].args)
    args[args.index("--record-to") + 1] = "database"
    report = json.loads(run([*kishpa, *args], tmp_path, env))
    assert report["ok"] is True
    assert report["discrepancies"] == []
