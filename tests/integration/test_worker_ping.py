"""`kishpa worker ping`, the worker pod's liveness probe: 0 while this host's worker answers
a Celery ping over the broker, 1 (with the reason) once it is gone."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

import pytest

from tests.integration.workers_support import KISHPA, SHARED, Wallet, Worker, free_port

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _ping(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [KISHPA, "worker", "ping", "--timeout", "3"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_probe_passes_while_the_worker_answers_and_fails_when_it_is_gone(
    tmp_path: Path,
) -> None:
    wallet = Wallet(free_port(), tmp_path / "wallet.sqlite3", SHARED).start(tmp_path / "w.log")
    worker = Worker(wallet.addr, tmp_path / "worker.log", SHARED).start(concurrency=1)
    env = SHARED.env(KISHPA_WALLET_ADDR=wallet.addr)
    try:
        alive = _ping(env)
        assert alive.returncode == 0, alive.stderr
        assert f"@{socket.gethostname()}" in alive.stdout
    finally:
        worker.stop()
        if wallet.process is not None:
            wallet.process.stop()
    gone = _ping(env)
    assert gone.returncode == 1
    assert f"no worker of {socket.gethostname()} answered" in gone.stderr
    assert "Traceback" not in gone.stderr
