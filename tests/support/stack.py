"""The whole stack started as real processes (``kishpa run`` and its services) for the
end-to-end tests: the command, a Redis database of their own, and the environment."""

from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest
import redis

from shared import keys as table_keys
from tests.conftest import TEST_REDIS_URL
from tests.support.waiting import wait_until_sync


@pytest.fixture(scope="session")
def redis_url() -> str:
    """A Redis database of the matchmaking tests' own (db 14 of the test server unless
    ``TEST_MATCHMAKING_REDIS_URL`` says otherwise): the table services started here run the
    deadline timers of their database, and must neither serve nor be served by the tables
    of other tests on the shared machine."""
    own = os.environ.get("TEST_MATCHMAKING_REDIS_URL")
    return own or urlunsplit(urlsplit(TEST_REDIS_URL)._replace(path="/14"))


KISHPA = str(Path(sys.executable).with_name("kishpa"))


SERVICES = ("wallet", "table", "matchmaking")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_for_port(port: int, process: subprocess.Popen[bytes], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"service exited with {process.returncode}")
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise TimeoutError(f"nothing listens on {port}")


@pytest.fixture(scope="module")
def stack_env(tmp_path_factory: pytest.TempPathFactory, redis_url: str) -> Iterator[dict[str, str]]:
    """The environment a client needs to reach the three services started for the module."""
    tmp = tmp_path_factory.mktemp("stack")
    ports = {name: free_port() for name in SERVICES}
    # A matchmaking key space of this stack's own: its seatings name the tables it made.
    prefix = f"kishpa:{{mm-e2e-{uuid.uuid4().hex[:12]}}}"
    env = dict(
        os.environ,
        KISHPA_MATCHMAKING_KEY_PREFIX=prefix,
        REDIS_URL=redis_url,
        DATABASE_URL=f"sqlite:///{tmp / 'wallet.sqlite3'}",
        KISHPA_TOKEN_SECRET=secrets.token_urlsafe(48),
        KISHPA_SERVICE_SECRET=secrets.token_urlsafe(48),
        # No Celery workers here: settlement records stay in the outbox.
        KISHPA_TABLE_ENQUEUE="0",
        KISHPA_LOG_FORMAT="json",
        KISHPA_LOG_LEVEL="WARNING",
        KISHPA_WALLET_ADDR=f"127.0.0.1:{ports['wallet']}",
        KISHPA_TABLE_ADDR=f"127.0.0.1:{ports['table']}",
        KISHPA_MATCHMAKING_ADDR=f"127.0.0.1:{ports['matchmaking']}",
    )
    processes: list[subprocess.Popen[bytes]] = []
    try:
        for name in SERVICES:
            child_env = dict(
                env, KISHPA_GRPC_PORT=str(ports[name]), KISHPA_METRICS_PORT=str(free_port())
            )
            log = (tmp / f"{name}.log").open("wb")
            process = subprocess.Popen(
                [KISHPA, "serve", name], env=child_env, stdout=log, stderr=subprocess.STDOUT
            )
            processes.append(process)
            _wait_for_port(ports[name], process)
        yield env
    finally:
        for process in reversed(processes):
            process.terminate()
        for process in processes:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        # No workers settle these tables: their outbox records would stay forever.
        for table_id in _tables_seated_by(redis_url, prefix):
            delete_table(redis_url, table_id)


def _tables_seated_by(redis_url: str, prefix: str) -> set[str]:
    """The tables this stack's matchmaking seated anyone at (from its own key space), and
    that key space deleted."""
    client = redis.Redis.from_url(redis_url)
    try:
        pattern = prefix.replace("{", "[{]").replace("}", "[}]") + ":*"
        tables: set[str] = set()
        for key in client.scan_iter(match=pattern):
            if key.decode().endswith(":table"):
                raw = client.get(key)
                if raw is not None:
                    tables.add(str(json.loads(raw)["table_id"]))
            client.delete(key)
        return tables
    finally:
        client.close()


def delete_table(redis_url: str, table_id: str) -> None:
    client = redis.Redis.from_url(redis_url)
    client.delete(
        table_keys.state(table_id),
        table_keys.events(table_id),
        table_keys.requests(table_id),
        table_keys.outbox(table_id),
        table_keys.balances(table_id),
        table_keys.settled(table_id),
    )
    client.zrem(table_keys.deadlines(table_id), table_id)
    client.zrem(table_keys.unsettled(table_id), table_id)
    client.close()


PROMPT = "kishpa> "


def wait_for_log(
    process: subprocess.Popen[bytes], log: Path, text: str, *, timeout: float, what: str
) -> None:
    """Wait until ``text`` appears in ``log`` (the output of ``process``, which must keep
    running meanwhile: its exit fails the test with the log's tail)."""

    def logged() -> bool:
        assert process.poll() is None, log.read_text()[-3000:]
        return text in log.read_text()

    wait_until_sync(logged, timeout=timeout, interval=0.5, message=what)
