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
from pathlib import Path

import pytest

from shared.retry import REDIS_COMMAND_TIMEOUT_S
from tests.integration.workers_support import (
    KISHPA,
    Process,
    wait_for,
)
from tests.support.services_stack import ServicesStack, services_on_own_redis

pytestmark = [pytest.mark.integration, pytest.mark.slow]

PAUSE_S = REDIS_COMMAND_TIMEOUT_S + 4.0
OUTAGE_STARTED = "redis_outage_started"
OUTAGE_ENDED = "redis_outage_ended"


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[ServicesStack]:
    with services_on_own_redis(tmp_path, log_level="INFO") as stack:
        try:
            yield stack
        finally:  # a failure while Redis was paused must not leave it stopped
            if stack.redis.process is not None and stack.redis.process.poll() is None:
                stack.redis.process.send_signal(signal.SIGCONT)


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
    stack: ServicesStack,
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
