"""``serve()`` in a real process: health SERVING, /metrics, then SIGTERM drains and exits 0."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

pytestmark = pytest.mark.integration

# A service process with only health and reflection: what every service's main() does.
SERVER_SCRIPT = """
import sys
from services.common.server import run
from services.common.settings import load_settings
sys.exit(run(load_settings("matchmaking"), []))
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_serving(address: str, deadline: float) -> None:
    with grpc.insecure_channel(address) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        while True:
            try:
                reply = stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=1)
                if reply.status == health_pb2.HealthCheckResponse.SERVING:
                    return
            except grpc.RpcError:
                if time.monotonic() > deadline:
                    raise
            time.sleep(0.1)


def test_serve_runs_until_sigterm_then_exits_cleanly() -> None:
    grpc_port, metrics_port = free_port(), free_port()
    env = {
        **os.environ,
        "KISHPA_TOKEN_SECRET": "t" * 40,
        "KISHPA_SERVICE_SECRET": "s" * 40,
        "KISHPA_GRPC_HOST": "127.0.0.1",
        "KISHPA_GRPC_PORT": str(grpc_port),
        "KISHPA_METRICS_PORT": str(metrics_port),
        "KISHPA_LOG_FORMAT": "json",
        "KISHPA_SHUTDOWN_GRACE_SECONDS": "1",
    }
    proc = subprocess.Popen(
        [sys.executable, "-c", SERVER_SCRIPT],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_serving(f"127.0.0.1:{grpc_port}", time.monotonic() + 30)
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5) as r:
            body = r.read().decode()
        assert 'kishpa_grpc_server_handled_total{grpc_code="OK",grpc_method="Check"' in body
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, stderr
    events = [json.loads(line)["event"] for line in stderr.splitlines() if line.startswith("{")]
    lifecycle = [e for e in events if e.startswith("server.")]
    assert lifecycle == ["server.started", "server.stopping", "server.stopped"]


def test_serve_refuses_to_start_without_its_secret() -> None:
    env = {k: v for k, v in os.environ.items() if k != "KISHPA_TOKEN_SECRET"}
    proc = subprocess.run(
        [sys.executable, "-c", SERVER_SCRIPT],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode != 0
    assert "KISHPA_TOKEN_SECRET is not set" in proc.stderr
