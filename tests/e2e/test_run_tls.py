"""`kishpa run --tls`: the production identity model on one machine.

The whole stack runs as separate processes with a development CA and one certificate per
workload; no child holds the shared service key, each has its own certificate and only the
secrets its workload needs (read back from ``/proc/<pid>/environ``). Bots play over mutual
TLS with the ``cli`` certificate and the worker settles by its certificate alone; an
operator credits through the development issuer, while the same command with the shared key
of plain ``make run`` is refused.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from tests.child_env import TEST_LIMITS_PREFIX
from tests.e2e.test_make_run import KISHPA, free_port

pytestmark = pytest.mark.e2e

WORKLOAD_CHILDREN = ("wallet", "table", "matchmaking", "worker", "beat", "edge")


def _children(parent: int) -> dict[str, dict[str, str]]:
    """The environment of each child of ``parent``, by the workload it runs."""
    found: dict[str, dict[str, str]] = {}
    for pid in Path(f"/proc/{parent}/task/{parent}/children").read_text().split():
        try:
            argv = [a.decode() for a in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")]
            raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except FileNotFoundError:
            continue
        name = next((a for a in reversed(argv) if a in WORKLOAD_CHILDREN), None)
        if name is not None:
            found[name] = dict(e.decode().split("=", 1) for e in raw if b"=" in e)
    return found


def _sourced(path: Path) -> dict[str, str]:
    out = {}
    for line in path.read_text().splitlines():
        key, _, value = line.removeprefix("export ").partition("=")
        out[key] = value.strip("'")
    return out


def test_run_tls_gives_each_workload_its_certificate_and_no_shared_key(tmp_path: Path) -> None:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("KISHPA_", "REDIS_URL")) or k.startswith(TEST_LIMITS_PREFIX)
    }
    env.pop("DATABASE_URL", None)
    ports = {name: free_port() for name in ("wallet", "table", "matchmaking")}
    for name, port in ports.items():
        env[f"KISHPA_{name.upper()}_PORT"] = str(port)
        env[f"KISHPA_{name.upper()}_METRICS_PORT"] = str(free_port())
    env["KISHPA_WORKER_METRICS_PORT"] = str(free_port())
    env["KISHPA_EMBEDDED_REDIS_PORT"] = str(free_port())
    env["KISHPA_EDGE_PORT"] = edge_port = str(free_port())
    var = tmp_path / "var"
    log_path = tmp_path / "run.log"
    log = log_path.open("w")
    stack = subprocess.Popen(
        [KISHPA, "run", "--tls", "--var-dir", str(var)],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 120
        while "Kishpa is running" not in log_path.read_text():
            assert stack.poll() is None, log_path.read_text()[-3000:]
            assert time.monotonic() < deadline, "the stack did not come up in time"
            time.sleep(0.5)
        assert f"https://127.0.0.1:{edge_port}/" in log_path.read_text()
        tls = var / "tls"
        children = _children(stack.pid)
        assert set(children) == set(WORKLOAD_CHILDREN)
        for name, child in children.items():
            assert not any(k.startswith("KISHPA_SERVICE_SECRET") for k in child), name
            assert "KISHPA_DEV_ISSUER_KEY_FILE" not in child, name
            assert child["KISHPA_TLS_CERT_FILE"] == str(tls / f"{name}.crt"), name
            assert child["KISHPA_TLS_KEY_FILE"] == str(tls / f"{name}.key"), name
            holds_player_key = "KISHPA_TOKEN_SECRET" in child
            assert holds_player_key == (name in ("wallet", "table", "matchmaking")), name
        addresses = {f"KISHPA_{n.upper()}_ADDR": f"127.0.0.1:{p}" for n, p in ports.items()}
        client = {**env, **addresses, **_sourced(tls / "client.env")}
        bots = subprocess.run(
            [KISHPA, "bots", "--tables", "2", "--timeout", "150"],
            env=client,
            capture_output=True,
            text=True,
            timeout=200,
        )
        assert bots.returncode == 0, bots.stdout[-3000:] + bots.stderr[-2000:]
        while "phase_settled" not in log_path.read_text():  # the worker, by its certificate
            assert time.monotonic() < deadline + 120, "nothing settled"
            time.sleep(0.5)
        with sqlite3.connect(var / "kishpa-wallet.sqlite3") as db:
            row = db.execute("select id from accounts where id like 'player:%' limit 1").fetchone()
        player = row[0].removeprefix("player:")
        credit = ["admin", "--as", "ann", "credit", "--player", player, "--amount", "5"]
        credit += ["--reason", "goodwill", "--ticket", "T-1"]
        operator = {**env, **addresses, **_sourced(tls / "operator.env")}
        done = subprocess.run([KISHPA, *credit], env=operator, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        assert "oidc:ann credit" in done.stdout
        # The shared key plain `make run` would use (it is still in var/) makes no operator.
        shared = dict(
            line.split("=", 1) for line in (var / "dev-secrets.env").read_text().splitlines()
        )
        forged = {**env, **addresses, **_sourced(tls / "client.env"), **shared}
        refused = subprocess.run([KISHPA, *credit], env=forged, capture_output=True, text=True)
        assert refused.returncode == 2, refused.stdout
        assert "OPERATOR_TOKEN_NOT_ACCEPTED" in refused.stderr
    finally:
        stack.send_signal(signal.SIGINT)
        code = stack.wait(timeout=60)
        log.close()
    assert code == 0
    text = log_path.read_text()
    assert "Traceback" not in text, text[-3000:]
