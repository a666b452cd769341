"""``make test``'s test run: three pytest processes side by side.

Most tests wait (on game clocks, on child processes starting, on a browser), so several runs
share the machine's two cores well. They must not share servers: the integration tests use
the machine's PostgreSQL, Redis and RabbitMQ; the unit tests with the end-to-end stacks and
the integration tests that start whole stacks of their own, and the Redis suites run again
on a 3-master Redis Cluster (``--redis-cluster``), each get a Redis server and a PostgreSQL
database of their own (``KISHPA_TEST_PRIVATE_SERVERS``, tests/conftest.py). The first run's
output streams; the others' are printed when they end.

``python -m devkit.run_tests [PYTEST ARGS...]``: options are passed to every run; with a
path among them, only that one pytest run is made (no split, no cluster run).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

PYTEST = [sys.executable, "-m", "pytest"]
OWN_SERVERS = [
    "tests/e2e",
    "tests/integration/test_round_archive_e2e.py",
    "tests/integration/test_wallet_finance_e2e.py",
    "tests/integration/test_wallet_month_close_e2e.py",
    "tests/unit",
]
"""What runs beside the integration tests: nothing here touches the machine's servers. The
unit tests come last, as in a whole run (one leaves Celery thinking it runs in a task)."""

CLUSTER_SUITES = [
    "tests/integration/tables",
    "tests/integration/test_table_store.py",
    "tests/integration/test_table_load_script.py",
    "tests/integration/test_table_watch_settlement.py",
    "tests/integration/test_table_replicas.py",
    "tests/integration/test_table_settlement.py",
    "tests/integration/test_workers_outbox.py",
    "tests/integration/test_workers_settlement.py",
    "tests/integration/test_workers_table_e2e.py",
    "tests/integration/test_matchmaking_service.py",
    "tests/integration/test_shared_rates.py",
    "tests/integration/test_matchmaking_sdk.py",
    "tests/integration/test_hand_table_matchmaking.py",
    "tests/integration/test_matchmaking_slots.py",
    "tests/integration/test_matchmaking_stakes.py",
    "tests/integration/test_admin.py::test_closing_a_stuck_table_refunds_the_bowl_to_who_paid_it_and_reconciles",
    "tests/integration/test_workers_chaos.py",
    # The TypeScript contract check decodes messages; it says nothing about Redis.
    "--ignore=tests/integration/tables/test_ts_contract.py",
]
"""The Redis suites (tables, matchmaking, workers), run again on a Redis Cluster the
fixtures start; their Celery broker stays on the single node (docs/DEVELOPING.md)."""

LOGS = Path("var")


def verdict(name: str, code: int) -> bool:
    """Whether a run passed; pytest's exit code 5 (it collected nothing) is said as such."""
    if code == 5:
        print(f"{name}: pytest collected no tests (exit 5): an error, not a pass")
    elif code != 0:
        print(f"{name}: failed (pytest exit code {code})")
    return code == 0


def all_at_once(options: list[str]) -> bool:
    """The integration tests, and beside them on servers of their own the rest and the
    Redis Cluster run; True when all three pass."""
    LOGS.mkdir(exist_ok=True)
    beside = {
        "the unit and whole-stack tests": ("whole-stack", OWN_SERVERS),
        "the Redis Cluster run": ("cluster", ["--redis-cluster", *CLUSTER_SUITES]),
    }
    running = {}
    for name, (short, args) in beside.items():
        log = LOGS / f"test-{short}.log"
        with log.open("w") as out:
            running[name] = (
                log,
                subprocess.Popen(
                    [*PYTEST, *options, "-p", "no:cacheprovider", *args],
                    env={**os.environ, "KISHPA_TEST_PRIVATE_SERVERS": "1"},
                    stdout=out,
                    stderr=subprocess.STDOUT,
                ),
            )
    started = time.monotonic()
    ignored = [f"--ignore={path}" for path in OWN_SERVERS]
    codes = {
        "the integration tests": subprocess.run(
            [*PYTEST, *options, "tests", *ignored], check=False
        ).returncode
    }
    print(f"== the integration tests ended after {time.monotonic() - started:.0f} s", flush=True)
    for name, (log, process) in running.items():
        codes[name] = process.wait()
        print(f"== {name} (on servers of their own, {log}):", flush=True)
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
