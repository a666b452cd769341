"""An expected Redis outage logs as an operator expects: one WARNING when it starts, one with
its length when it ends, no ERROR and no traceback, in the table service and matchmaking.

Real processes: a redis-server of the test's own (AOF), ``kishpa serve wallet|table|
matchmaking``, a settlement worker and ``kishpa bots`` playing through it (so RPCs, timers,
sweeps and watch streams all meet the outage). Redis is frozen with SIGSTOP for longer than
a command's deadline (``shared.retry.REDIS_COMMAND_TIMEOUT_S``, 5 s): connections stay open
and nothing answers, as in a ``DEBUG SLEEP`` or a black-holed link; then SIGCONT.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from shared.retry import REDIS_COMMAND_TIMEOUT_S
from tests.integration.workers_support import (
    KISHPA,
    Backend,
    Process,
    RedisServer,
    Wallet,
    Worker,
    free_port,
    port_open,
    wait_for,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]

PAUSE_S = REDIS_COMMAND_TIMEOUT_S + 4.0
OUTAGE_STARTED = "redis_outage_started"
OUTAGE_ENDED = "redis_outage_ended"


@dataclass
class Stack:
    redis: RedisServer
    services: dict[str, Process]
    worker: Process
    env: dict[str, str]


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[Stack]:
    server = RedisServer(tmp_path / "redis").start()
    backend = Backend(server.url, server.url)
    wallet = Wallet(free_port(), tmp_path / "wallet.sqlite3", backend).start(
        tmp_path / "wallet.log"
    )
    ports = {"table": free_port(), "matchmaking": free_port()}
    env = backend.env(
        KISHPA_WALLET_ADDR=wallet.addr,
        KISHPA_TABLE_ADDR=f"127.0.0.1:{ports['table']}",
        KISHPA_MATCHMAKING_ADDR=f"127.0.0.1:{ports['matchmaking']}",
        KISHPA_LOG_LEVEL="INFO",
    )
    worker = Worker(wallet.addr, tmp_path / "worker.log", backend, extra_args=["--beat"])
    worker.extra_env = {"DATABASE_URL": wallet.url}
    services: dict[str, Process] = {}
    try:
        for name, port in ports.items():
            child = dict(
                env,
                KISHPA_GRPC_PORT=str(port),
                KISHPA_GRPC_HOST="127.0.0.1",
                KISHPA_METRICS_PORT=str(free_port()),
                KISHPA_WORKER_QUEUE=worker.queue,
            )
            services[name] = Process(name, [KISHPA, "serve", name], child, tmp_path / f"{name}.log")
            services[name].start()
            wait_for(lambda p=port: port_open(p), 30, f"{name} to listen")  # type: ignore[misc]
        worker.start()
        assert worker.process is not None
        yield Stack(server, services, worker.process, env)
    finally:
        if server.process is not None and server.process.poll() is None:
            server.process.send_signal(signal.SIGCONT)
        worker.stop()
        for process in services.values():
            process.stop()
        if wallet.process is not None:
            wallet.process.stop()
        server.stop()


def _lines(process: Process) -> list[dict[str, object]]:
    """The service's JSON log lines (anything else, such as a bare traceback, as text)."""
    found: list[dict[str, object]] = []
    for raw in process.output().splitlines():
        try:
            line = json.loads(raw)
        except ValueError:
            line = {"text": raw}
        found.append(line if isinstance(line, dict) else {"text": raw})
    return found


def _events(process: Process, name: str) -> list[dict[str, object]]:
    return [line for line in _lines(process) if line.get("event") == name]


def test_a_redis_pause_logs_one_warning_at_each_end_and_no_error_or_traceback(
    stack: Stack,
) -> None:
    bots = subprocess.Popen(
        [
            KISHPA, "bots", "--tables", "2", "--rounds", "2000", "--turn-seconds", "20",
            "--reveal-seconds", "1", "--pause-ms", "500", "--timeout", "300",
        ],
        env=stack.env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        wait_for(lambda: "phase_settled" in stack.worker.output(), 60, "play to begin")
        before = {name: len(_lines(p)) for name, p in stack.services.items()}
        assert stack.redis.process is not None
        stack.redis.process.send_signal(signal.SIGSTOP)
        paused = time.monotonic()
        time.sleep(PAUSE_S)  # the outage itself: its length is the point of the test
        stack.redis.process.send_signal(signal.SIGCONT)
        for name, process in stack.services.items():
            wait_for(
                lambda p=process: bool(_events(p, OUTAGE_ENDED)),  # type: ignore[misc]
                30,
                f"{name} to log the end of the outage",
            )
        assert bots.poll() is None, "the bots finished before the outage: more rounds"
    finally:
        bots.kill()
        bots.wait(timeout=30)

    for name, process in stack.services.items():
        during = _lines(process)[before[name] :]
        errors = [
            line
            for line in during
            if str(line.get("level", "")).lower() in ("error", "critical", "exception")
            or "exception" in line
            or "Traceback" in str(line)
        ]
        assert not errors, f"{name} logged errors during an expected outage: {errors[:3]}"
        started, ended = _events(process, OUTAGE_STARTED), _events(process, OUTAGE_ENDED)
        assert len(started) == 1, (name, started)
        assert len(ended) == 1, (name, ended)
        assert started[0]["level"] == ended[0]["level"] == "warning"
        length = float(str(ended[0]["outage_s"]))
        # From the last answer before the pause (the loops ask every 0.1-1 s, so up to a
        # second before it) to the first after it: the pause, give or take a loop's interval.
        assert PAUSE_S - 1.5 <= length <= time.monotonic() - paused + 1.5
        # Nothing else warned during the outage: one line at each end is the whole story.
        warnings = [
            line["event"]
            for line in during
            if line.get("level") == "warning"
            and line["event"] not in (OUTAGE_STARTED, OUTAGE_ENDED)
        ]
        assert not warnings, f"{name}: {warnings[:10]}"
