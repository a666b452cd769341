"""Shared test configuration: the servers the integration tests use, chosen once per run.

:mod:`tests.backends` picks each server: an explicit URL (``TEST_DATABASE_URL``,
``TEST_REDIS_URL``, ``TEST_RABBITMQ_URL``, ``TEST_REDIS_CLUSTER_URL``), else a testcontainers
container when a Docker engine answers, else the machine's local servers. The choice is
printed in pytest's header.

``pytest --redis-cluster`` re-runs the Redis suites (tables, matchmaking, workers) against a
3-master Redis Cluster: every Redis URL the tests read points at the cluster
(``redis+cluster://``), while Celery's broker stays on the single node (Celery's Redis
broker does not support Cluster).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import io
import os
import signal
import sys
from collections.abc import AsyncIterator, Callable
from functools import partial
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest
from hypothesis import settings

from devkit import redis_servers as servers
from devkit.postgres import temporary_postgres_database
from tests import backends, containers
from tests.child_env import use_generous_player_limits

use_generous_player_limits()

# A shell that runs `make test` in the background starts it with SIGINT ignored, and every
# child would inherit that: the tests that stop `kishpa run` or `kishpa play` with Ctrl-C
# need it delivered (a handled signal is reset to the default in an exec'd child).
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

settings.register_profile("ci", deadline=None, print_blob=True)
settings.load_profile("ci")

_STOPS: list[Callable[[], None]] = []
_CHOICES: list[backends.Choice] = []


def _local_cluster() -> str:
    cluster = servers.start_cluster()
    _STOPS.append(partial(servers.stop_cluster, cluster))
    return cluster.url


def _choose(kind: str) -> str:
    docker_answer: list[bool] = []

    def docker() -> bool:
        if not docker_answer:
            docker_answer.append(backends.docker_reachable())
        return docker_answer[0]

    starters = backends.Starters(
        container={
            "redis": partial(containers.redis, _STOPS),
            "postgres": partial(containers.postgres, _STOPS),
            "rabbitmq": partial(containers.rabbitmq, _STOPS),
        },
        local={"redis-cluster": _local_cluster},
    )
    choice = backends.choose(kind, os.environ, docker=docker, starters=starters)
    _CHOICES.append(choice)
    return choice.url


def _with_db(url: str, db: int) -> str:
    return urlunsplit(urlsplit(url)._replace(path=f"/{db}"))


def _private_servers() -> None:
    """``KISHPA_TEST_PRIVATE_SERVERS=1``: this run gets a Redis server and a PostgreSQL
    database of its own, so that it can run beside another on the same machine
    (``make test`` runs several: devkit/run_tests.py)."""
    if os.environ.get("KISHPA_TEST_PRIVATE_SERVERS") != "1":
        return
    server = servers.start_redis()
    _STOPS.append(partial(servers.stop_redis, server))
    os.environ["TEST_REDIS_URL"] = server.url
    admin = os.environ.get("TEST_DATABASE_URL") or backends.LOCAL_URLS["postgres"]
    database = contextlib.ExitStack()
    os.environ["TEST_DATABASE_URL"] = database.enter_context(
        temporary_postgres_database(admin, prefix="kishpa_run")
    )
    _STOPS.append(database.close)


_private_servers()
TEST_DATABASE_URL = _choose("postgres")
TEST_REDIS_URL = _choose("redis")
TEST_RABBITMQ_URL = _choose("rabbitmq")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--redis-cluster",
        action="store_true",
        help="run the Redis suites against a 3-master Redis Cluster (see tests/conftest.py)",
    )


def pytest_configure(config: pytest.Config) -> None:
    if not config.getoption("--redis-cluster"):
        return
    cluster_url = _choose("redis-cluster")
    # The suites' own database choices all become the cluster (it has only database 0) ...
    for variable in (
        "TEST_TABLE_REDIS_URL",
        "TEST_MATCHMAKING_REDIS_URL",
        "TEST_TABLE_E2E_REDIS_URL",
        "TEST_WORKERS_REDIS_URL",
    ):
        os.environ[variable] = cluster_url
    # ... and the Celery broker a database of the single node.
    os.environ.setdefault("TEST_BROKER_URL", _with_db(TEST_REDIS_URL, 13))


def pytest_unconfigure(config: pytest.Config) -> None:
    while _STOPS:
        _STOPS.pop()()


def pytest_report_header(config: pytest.Config) -> str:
    return "test servers: " + ", ".join(c.describe() for c in _CHOICES)


@pytest.fixture(scope="session")
def database_url() -> str:
    return TEST_DATABASE_URL


@pytest.fixture(scope="session")
def redis_url() -> str:
    return TEST_REDIS_URL


@pytest.fixture(scope="session", autouse=True)
def _session_file(tmp_path_factory: pytest.TempPathFactory) -> None:
    """`kishpa play` saves its token for `kishpa verify`: in tests, never in the real home."""
    if not os.environ.get("KISHPA_SESSION_FILE"):
        path = tmp_path_factory.mktemp("session") / "session.json"
        os.environ["KISHPA_SESSION_FILE"] = str(path)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if inspect.iscoroutinefunction(getattr(item, "obj", None)):
            item.fixturenames.append("_dump_tasks_before_timeout")  # type: ignore[attr-defined]


@pytest.fixture
async def _dump_tasks_before_timeout(request: pytest.FixtureRequest) -> AsyncIterator[None]:
    """An async test still running shortly before pytest-timeout stops it prints where each
    of its asyncio tasks waits (pytest-timeout shows only the loop's ``select``)."""
    timeout = float(request.config.getoption("timeout", None) or request.config.getini("timeout"))
    marker = request.node.get_closest_marker("timeout")
    if marker and marker.args:
        timeout = float(marker.args[0])
    if timeout <= 20:
        yield
        return
    loop = asyncio.get_running_loop()

    def dump() -> None:
        out = io.StringIO()
        print(f"\n--- {request.node.nodeid}: asyncio tasks after {timeout - 10:.0f} s", file=out)
        for task in asyncio.all_tasks(loop):
            print(f"{task.get_name()}:", file=out)
            awaited: Any = task.get_coro()
            while awaited is not None:  # the whole await chain, not just the outer frame
                frame = getattr(awaited, "cr_frame", None) or getattr(awaited, "ag_frame", None)
                if frame is not None:
                    code = frame.f_code
                    print(f"  {code.co_filename}:{frame.f_lineno} {code.co_name}", file=out)
                awaited = getattr(awaited, "cr_await", None) or getattr(awaited, "ag_await", None)
            print(f"  waiting on {task}", file=out)
        sys.stderr.write(out.getvalue())

    timer = loop.call_later(timeout - 10, dump)
    try:
        yield
    finally:
        timer.cancel()
