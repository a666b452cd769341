"""Real processes for the settlement tests: ``kishpa serve wallet``, ``kishpa worker``,
``kishpa serve table`` and the other ``kishpa`` commands, each with its output in a log file,
and the Redis servers they run on.

A :class:`Backend` names where the children keep their state (``REDIS_URL``: one node, or a
cluster under ``pytest --redis-cluster``), where their tasks travel (a standalone Redis or
RabbitMQ: Celery's Redis transport does not speak Cluster) and the service secret they share.
:data:`SHARED` is the settlement suites' own Redis database (db 13 of the test Redis, or the
run's cluster). Tests that kill Redis start their own servers (:class:`RedisServer`,
:class:`ClusterServer`) on free ports: nothing else on the machine shares them, so a sweeper
never settles somebody else's tables and killing them harms nobody.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import redis
from celery import Celery

from cli.embedded_redis import redis_server_binary, start_embedded_redis
from devkit.redis_servers import RedisClusterProcesses, RedisProcess, start_cluster, stop_cluster
from services.common.auth import ServiceCredentials, TokenAuthority
from services.common.redis_client import sync_client
from services.common.settings import Settings
from shared import keys, stream
from tests.child_env import TEST_LIMITS_PREFIX
from tests.conftest import TEST_REDIS_URL
from tests.support.waiting import wait_until_sync
from workers.celery_app import create_app
from workers.config import WorkerConfig
from workers.wallet_client import WalletClient

KISHPA = str(Path(sys.executable).with_name("kishpa"))
SYSTEM_REDIS = "/usr/bin/redis-server"
STARTING_TOKENS = 2000
"""What the wallet opens a player's account with (``services.wallet.accounts``)."""
REDIS_BROKER_SCHEMES = ("redis://", "rediss://", "unix://")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def wait_for(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    wait_until_sync(predicate, timeout=timeout, message=what)


def port_open(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


@dataclass
class RedisServer:
    """A redis-server of the test's own (AOF in ``data_dir``), which it may kill and restart."""

    data_dir: Path
    appendfsync: str = "always"
    appendonly: bool = True
    port: int = field(default_factory=free_port)
    binary: str = field(default_factory=lambda: SYSTEM_REDIS if Path(SYSTEM_REDIS).exists() else "")
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        """Start (or restart, from the files in ``data_dir``) and wait until it answers."""
        self.process = start_embedded_redis(
            self.data_dir,
            self.port,
            appendfsync=self.appendfsync,
            appendonly=self.appendonly,
            binary=self.binary or redis_server_binary(),
        )
        return self

    def kill9(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)

    def kill_holder(self, key: str) -> None:
        """SIGKILL the server holding ``key``: this one holds every key."""
        self.kill9()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.data_dir, ignore_errors=True)

    def client(self) -> redis.Redis:
        return redis.Redis.from_url(self.url)


@dataclass
class ClusterServer:
    """A 3-master Redis Cluster of the test's own (:mod:`devkit.redis_servers`: AOF, appendfsync
    always), whose masters it may kill and restart. The methods of :class:`RedisServer`, so
    a test runs on either."""

    cluster: RedisClusterProcesses | None = None
    killed: list[RedisProcess] = field(default_factory=list)

    @property
    def url(self) -> str:
        assert self.cluster is not None
        return self.cluster.url

    def start(self) -> ClusterServer:
        """Start the cluster, or restart the masters killed since (from their own files);
        wait until it is healthy."""
        if self.cluster is None:
            self.cluster = start_cluster()
        while self.killed:
            self.cluster.restart(self.killed.pop())
        return self

    def kill_holder(self, key: str) -> None:
        """SIGKILL the master serving ``key``'s slot; the other masters go on."""
        assert self.cluster is not None
        tag = key[key.index("{") + 1 : key.index("}")] if "{" in key else key
        node = self.cluster.node_of_slot(keys.key_slot(tag))
        node.kill()
        self.killed.append(node)

    def stop(self) -> None:
        if self.cluster is not None:
            stop_cluster(self.cluster)

    def client(self) -> Any:
        return sync_client(self.url)


@dataclass
class Process:
    """A real child process whose output goes to a log file (shown when a test fails)."""

    name: str
    argv: list[str]
    env: dict[str, str]
    log: Path
    popen: subprocess.Popen[bytes] | None = None

    def start(self) -> Process:
        with self.log.open("ab") as out:
            # Run in the log's directory: a child's relative default paths stay in the temp dir.
            self.popen = subprocess.Popen(
                self.argv, env=self.env, stdout=out, stderr=subprocess.STDOUT, cwd=self.log.parent
            )
        return self

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def kill9(self) -> None:
        assert self.popen is not None
        self.popen.send_signal(signal.SIGKILL)
        self.popen.wait(timeout=10)

    def stop(self) -> None:
        # Shown by pytest only when the test fails: the child's last words.
        print(f"---- {self.name} ({self.log.name}) ----\n{self.output()[-4000:]}")
        if self.popen is None or self.popen.poll() is not None:
            return
        self.popen.send_signal(signal.SIGTERM)
        try:
            self.popen.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait(timeout=10)


def base_env(redis_url: str, secret: str, **extra: str) -> dict[str, str]:
    """The environment of a test's ``kishpa`` child: our Redis, our secret, JSON logs."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("KISHPA_", "REDIS_")) or k.startswith(TEST_LIMITS_PREFIX)
    }
    env.pop("DATABASE_URL", None)
    env.update(
        REDIS_URL=redis_url,
        KISHPA_BROKER_URL=redis_url,
        KISHPA_SERVICE_SECRET=secret,
        KISHPA_TOKEN_SECRET=secrets.token_urlsafe(48),
        KISHPA_LOG_FORMAT="json",
        KISHPA_VISIBILITY_TIMEOUT="3",
        KISHPA_RECONCILE_INTERVAL="0",
    )
    env.update(extra)
    return env


def with_db(url: str, db: int) -> str:
    """``url`` with its database number replaced by ``db``."""
    return urlunsplit(urlsplit(url)._replace(path=f"/{db}"))


@dataclass(frozen=True, slots=True)
class Backend:
    """What a test's ``kishpa`` children share: their Redis (``redis_url``, a node or a
    ``redis+cluster://`` URL), the Celery broker (a standalone Redis or RabbitMQ) and the
    service secret."""

    redis_url: str
    broker_url: str
    secret: str = field(default_factory=lambda: secrets.token_urlsafe(48))

    def env(self, **extra: str) -> dict[str, str]:
        """A child's environment (:func:`base_env`) on this backend, plus ``extra``."""
        return base_env(
            self.redis_url, self.secret, **{"KISHPA_BROKER_URL": self.broker_url, **extra}
        )

    def with_broker(self, broker_url: str) -> Backend:
        """The same Redis and secret, tasks travelling through ``broker_url``."""
        return replace(self, broker_url=broker_url)

    def client(self) -> Any:
        """A client of the backend's Redis (a cluster client for a cluster URL)."""
        return sync_client(self.redis_url)


WORKERS_REDIS_URL = os.environ.get("TEST_WORKERS_REDIS_URL") or with_db(TEST_REDIS_URL, 13)
"""The settlement suites' Redis: db 13 of the test Redis, or the cluster under
``--redis-cluster`` (tests/conftest.py), where the broker stays on db 13 of the node."""
SHARED = Backend(WORKERS_REDIS_URL, os.environ.get("TEST_BROKER_URL") or WORKERS_REDIS_URL)


@dataclass
class Wallet:
    """A ``kishpa serve wallet`` process on its own SQLite file."""

    port: int
    database: Path
    backend: Backend
    process: Process | None = None

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"sqlite:///{self.database}"

    def start(self, log: Path) -> Wallet:
        env = self.backend.env(
            DATABASE_URL=self.url,
            KISHPA_GRPC_PORT=str(self.port),
            KISHPA_GRPC_HOST="127.0.0.1",
            KISHPA_METRICS_PORT=str(free_port()),
        )
        self.process = Process("wallet", [KISHPA, "serve", "wallet"], env, log).start()
        wait_for(lambda: port_open(self.port), 30, "the wallet to listen")
        return self

    def client(self) -> WalletClient:
        authority = TokenAuthority(None, self.backend.secret)
        return WalletClient(self.addr, ServiceCredentials(authority, "worker"))


@dataclass
class Worker:
    """A ``kishpa worker`` process consuming its own queue."""

    wallet_addr: str
    log: Path
    backend: Backend
    queue: str = field(default_factory=lambda: f"gtest-{uuid.uuid4().hex[:10]}")
    metrics_port: int = field(default_factory=free_port)
    extra_env: dict[str, str] = field(default_factory=dict)
    extra_args: list[str] = field(default_factory=list)
    process: Process | None = None
    ready_ms: int = 0

    def start(self, concurrency: int = 4) -> Worker:
        env = self.backend.env(
            KISHPA_WALLET_ADDR=self.wallet_addr,
            KISHPA_WORKER_QUEUE=self.queue,
            KISHPA_METRICS_PORT=str(self.metrics_port),
            **self.extra_env,
        )
        argv = [KISHPA, "worker", f"--concurrency={concurrency}", *self.extra_args]
        process = Process("worker", argv, env, self.log)
        ready_before = process.output().count(" ready.")  # the log may hold an earlier run
        self.process = process.start()
        wait_for(lambda: process.output().count(" ready.") > ready_before, 60, "a ready worker")
        self.ready_ms = now_ms()
        return self

    def stop(self) -> None:
        """Stop the worker and remove its queue from a Redis broker (beat may have sent a
        last task); a RabbitMQ queue is the test's to delete."""
        if self.process is not None:
            self.process.stop()
        if self.backend.broker_url.startswith(REDIS_BROKER_SCHEMES):
            client = redis.Redis.from_url(self.backend.broker_url)
            client.delete(
                self.queue, f"_kombu.binding.{self.queue}", f"_kombu.binding_permanent.{self.queue}"
            )
            client.close()

    def sender(self) -> Celery:
        """A Celery client publishing to this worker's queue (what enqueue_settlement does)."""
        settings = Settings(
            service="worker",
            redis_url=self.backend.redis_url,
            broker_url=self.backend.broker_url,
        )
        return create_app(WorkerConfig(settings=settings, queue=self.queue))

    def metrics(self) -> str:
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as response:
            text: str = response.read().decode()
            return text


def start_table_service(
    tmp: Path,
    worker: Worker,
    wallet: Wallet,
    token_secret: str,
    name: str = "table",
    port: int | None = None,
    **extra: str,
) -> tuple[Process, int]:
    """A real ``kishpa serve table`` on ``worker``'s backend that enqueues to its queue, on
    ``port`` (a free one if None; ``extra``: more environment, e.g. ``ARCHIVE_DATABASE_URL``);
    returns the process and its port."""
    port = port or free_port()
    env = worker.backend.env(
        KISHPA_TOKEN_SECRET=token_secret,
        KISHPA_GRPC_PORT=str(port),
        KISHPA_GRPC_HOST="127.0.0.1",
        KISHPA_METRICS_PORT=str(free_port()),
        KISHPA_WORKER_QUEUE=worker.queue,
        KISHPA_WALLET_ADDR=wallet.addr,
        **extra,
    )
    process = Process("table", [KISHPA, "serve", "table"], env, tmp / f"{name}.log").start()
    wait_for(lambda: port_open(port), 60, "the table service to listen")
    return process, port


class TableHistory:
    """Every phase record and ``settled`` event of the tables in a Redis, kept as they appear.

    Redis holds only live play: once a round's ending phase is settled, settle.lua drops the
    records, settled marks and events of the rounds before it (docs/workers.md). A test that
    checks a whole game (every phase settled exactly once, balances from every record) reads
    it here: a thread looks every ``poll_s`` (a round takes seconds; a record leaves Redis
    only a round after the next one ends) and reads each stream from where it stopped.
    """

    def __init__(self, client: Any, poll_s: float = 0.05) -> None:
        self.client = client
        self.poll_s = poll_s
        self._records: dict[tuple[str, str], bytes] = {}
        self._settled: list[tuple[str, str, int]] = []
        self._settled_data: dict[tuple[str, str], dict[str, Any]] = {}
        self._cursor: dict[str, str] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="table-history", daemon=True)

    def start(self) -> TableHistory:
        self.look()
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        self.look()

    def _run(self) -> None:
        while not self._stop.is_set():
            # Redis away for a moment (some tests kill it): look again.
            with contextlib.suppress(redis.RedisError):
                self.look()
            self._stop.wait(self.poll_s)

    def look(self) -> None:
        """Take in what the tables wrote since the last look."""
        for key in self.client.scan_iter(match=keys.outbox_pattern()):
            name = key.decode() if isinstance(key, bytes) else str(key)
            table = name.split("{", 1)[1].rsplit("}", 1)[0]
            records = self.client.hgetall(keys.outbox(table))
            cursor = self._cursor.get(table)
            start = f"({cursor}" if cursor else "-"
            entries = self.client.xrange(keys.events(table), min=start)
            with self._lock:
                for field_name, raw in records.items():
                    self._records[(table, field_name.decode())] = raw
                for entry_id, fields in entries:
                    self._cursor[table] = entry_id.decode()
                    if fields.get(b"type") == b"settled":
                        event = stream.decode(fields)
                        phase = f"{event.round}:{event.data['phase']}"
                        self._settled.append((table, phase, int(event.data["settled_ms"])))
                        self._settled_data[(table, phase)] = dict(event.data)

    def records(self, tables: list[str] | None = None) -> dict[tuple[str, str], bytes]:
        """(table, "<round>:<phase>") -> the phase record, of every phase ever written."""
        with self._lock:
            return {k: v for k, v in self._records.items() if tables is None or k[0] in tables}

    def settled(self, tables: list[str] | None = None) -> list[tuple[str, str]]:
        """(table, "<round>:<phase>") of every ``settled`` event, in order (once per phase
        when settlement is exactly once)."""
        with self._lock:
            return [(t, f) for t, f, _ in self._settled if tables is None or t in tables]

    def settled_data(self, table: str) -> dict[str, dict[str, Any]]:
        """The table's "<round>:<phase>" -> its ``settled`` event data (``batch_id``,
        ``balances``, ``settled_ms``, ``postings``), the last one seen per phase."""
        with self._lock:
            return {f: d for (t, f), d in self._settled_data.items() if t == table}

    def settled_ms(self) -> dict[tuple[str, str], int]:
        """(table, "<round>:<phase>") -> when it was settled (its ``settled`` event says)."""
        with self._lock:
            return {(t, f): ms for t, f, ms in self._settled}
