"""``make test``'s test run: three lanes of pytest processes side by side.

Most tests wait (on game clocks, on child processes starting, on a browser), so several runs
share the machine's two cores well. They must not share servers: the integration tests use
the machine's PostgreSQL, Redis and RabbitMQ; every other run gets a Redis server and a
PostgreSQL database of its own (``KISHPA_TEST_PRIVATE_SERVERS``, tests/conftest.py). The
lanes: the integration tests (their output streams); the end-to-end stacks with the
integration tests that start whole stacks of their own; and, one after another, the Redis
suites again on a 3-master Redis Cluster (``--redis-cluster``), the unit tests, and the
integration tests that need neither the machine's servers nor RabbitMQ's shared vhost
(``SELF_CONTAINED``). The lanes are balanced to end together; their logs are printed when
they end.

``python -m devkit.run_tests [PYTEST ARGS...]``: options are passed to every run; with a
path among them, only that one pytest run is made (no split, no cluster run).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

PYTEST = [sys.executable, "-m", "pytest"]
WHOLE_STACKS = [
    "tests/e2e",
    "tests/integration/test_round_archive_e2e.py",
    "tests/integration/test_wallet_finance_e2e.py",
    "tests/integration/test_wallet_month_close_e2e.py",
]
"""The second lane: whole stacks, each on the lane's own servers."""

SELF_CONTAINED = [
    "tests/integration/test_soak_short.py",
    "tests/integration/test_bench_ledger_finance.py",
    "tests/integration/test_clients_ride_out_outages.py",
    "tests/integration/test_deploy_image_build.py",
    "tests/integration/test_deploy_postgres_jobs.py",
    "tests/integration/test_deploy_probe.py",
    "tests/integration/test_deploy_workers.py",
]
"""Integration tests that start what they need or use only the run's Redis and PostgreSQL:
they run in the third lane, after the cluster run and the unit tests."""

CLUSTER_SUITES = [
    "tests/integration/tables",
    "tests/integration/test_table_store.py",
    "tests/integration/test_table_load_script.py",
    "tests/integration/test_workers_outbox.py",
    "tests/integration/test_matchmaking_service.py",
    "tests/integration/test_workers_chaos.py",
]
"""The Redis suites (tables, matchmaking, workers), run again on a Redis Cluster the
fixtures start; their Celery broker stays on the single node (docs/DEVELOPING.md). Suites
that only repeat these through more clients or workers (settlement, the matchmaking SDK,
slots, stakes and rates, the watch and replica tests, the whole-table e2e, the stuck-table
refund) run on the single node only, which keeps ``make test`` under 25 minutes on a slow
day of a 2-core machine."""

CLUSTER_ONLY = ["tests/integration/tables"]
"""Run on the Redis Cluster only: the table service's own suites, the largest of the Redis
suites. The single node serves the table service in every other integration test and in
every whole stack."""

LOGS = Path("var")


def verdict(name: str, code: int) -> bool:
    """Whether a run passed; pytest's exit code 5 (it collected nothing) is said as such."""
    if code == 5:
        print(f"{name}: pytest collected no tests (exit 5): an error, not a pass")
    elif code != 0:
        print(f"{name}: failed (pytest exit code {code})")
    return code == 0


class Lane(threading.Thread):
    """One lane: its pytest runs one after another, each on servers of its own, stopping at
    the first that fails; ``code`` is then that run's exit code."""

    def __init__(self, options: list[str], runs: list[list[str]], log: Path) -> None:
        super().__init__(daemon=True)
        self.options, self.runs, self.log = options, runs, log
        self.code = 0

    def run(self) -> None:
        with self.log.open("w") as out:
            for args in self.runs:
                self.code = subprocess.run(
                    [*PYTEST, *self.options, "-p", "no:cacheprovider", *args],
                    env={**os.environ, "KISHPA_TEST_PRIVATE_SERVERS": "1"},
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    check=False,
                ).returncode
                if self.code != 0:
                    return


def all_at_once(options: list[str]) -> bool:
    """The integration tests, and beside them on servers of their own the other two lanes;
    True when every run passes."""
    LOGS.mkdir(exist_ok=True)
    beside = {
        "the whole-stack tests": ("whole-stack", [WHOLE_STACKS]),
        # Each run is a process of its own: a unit test leaves Celery thinking it runs in a
        # task, which no later test may see.
        "the Redis Cluster run, the unit tests and the self-contained integration tests": (
            "cluster-unit",
            [["--redis-cluster", *CLUSTER_SUITES], ["tests/unit"], SELF_CONTAINED],
        ),
    }
    running = {}
    for name, (short, runs) in beside.items():
        log = LOGS / f"test-{short}.log"
        running[name] = (log, Lane(options, runs, log))
        running[name][1].start()
    started = time.monotonic()
    ignored = [
        f"--ignore={path}" for path in [*WHOLE_STACKS, *SELF_CONTAINED, *CLUSTER_ONLY, "tests/unit"]
    ]
    codes = {
        "the integration tests": subprocess.run(
            [*PYTEST, *options, "tests", *ignored], check=False
        ).returncode
    }
    print(f"== the integration tests ended after {time.monotonic() - started:.0f} s", flush=True)
    for name, (log, lane) in running.items():
        lane.join()
        codes[name] = lane.code
        waited = time.monotonic() - started
        print(f"== {name} (on servers of their own, {log}), after {waited:.0f} s:", flush=True)
        print(log.read_text(), end="", flush=True)
    passed = [verdict(name, code) for name, code in codes.items()]
    return all(passed)


def main(argv: list[str]) -> int:
    if any(Path(a.split("::")[0]).exists() for a in argv if not a.startswith("-")):
        code = subprocess.run([*PYTEST, *argv], check=False).returncode
        return 0 if verdict("pytest", code) else code
    return 0 if all_at_once(argv) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
