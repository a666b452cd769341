"""Real processes for the settlement tests: a private redis-server, ``kishpa serve wallet``,
``kishpa worker``, and the other ``kishpa`` commands, each with its output in a log file.

Tests that kill Redis, or run a sweeper, start their own redis-server on a free port (its
append-only file in a temp dir): nothing else on the machine shares it, so a sweeper never
settles somebody else's tables and killing it harms nobody.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import redis
from celery import Celery

from cli.embedded_redis import redis_server_binary, start_embedded_redis
from services.common.auth import ServiceCredentials, TokenAuthority
from services.common.settings import Settings
from tests.child_env import TEST_LIMITS_PREFIX
from workers.celery_app import create_app
from workers.config import WorkerConfig
from workers.wallet_client import WalletClient

KISHPA = str(Path(sys.executable).with_name("kishpa"))
SYSTEM_REDIS = "/usr/bin/redis-server"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def wait_for(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")


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


@dataclass
class Wallet:
    """A ``kishpa serve wallet`` process on its own SQLite file."""

    port: int
    database: Path
    redis_url: str
    secret: str
    process: Process | None = None

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"sqlite:///{self.database}"

    def start(self, log: Path) -> Wallet:
        env = base_env(
            self.redis_url,
            self.secret,
            DATABASE_URL=self.url,
            KISHPA_GRPC_PORT=str(self.port),
            KISHPA_GRPC_HOST="127.0.0.1",
            KISHPA_METRICS_PORT=str(free_port()),
        )
        self.process = Process("wallet", [KISHPA, "serve", "wallet"], env, log).start()
        wait_for(lambda: port_open(self.port), 30, "the wallet to listen")
        return self

    def client(self) -> WalletClient:
        authority = TokenAuthority(None, self.secret)
        return WalletClient(self.addr, ServiceCredentials(authority, "test"))


@dataclass
class Worker:
    """A ``kishpa worker`` process consuming its own queue."""

    wallet_addr: str
    log: Path
    redis_url: str
    secret: str
    queue: str = field(default_factory=lambda: f"gtest-{uuid.uuid4().hex[:10]}")
    metrics_port: int = field(default_factory=free_port)
    extra_env: dict[str, str] = field(default_factory=dict)
    extra_args: list[str] = field(default_factory=list)
    broker_url: str = ""
    process: Process | None = None
    ready_ms: int = 0

    def start(self, concurrency: int = 4) -> Worker:
        env = base_env(
            self.redis_url,
            self.secret,
            KISHPA_WALLET_ADDR=self.wallet_addr,
            KISHPA_WORKER_QUEUE=self.queue,
            KISHPA_METRICS_PORT=str(self.metrics_port),
            KISHPA_BROKER_URL=self.broker_url or self.redis_url,
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
        """Stop the worker and remove its queue from Redis (beat may have sent a last task)."""
        if self.process is not None:
            self.process.stop()
        if not self.broker_url or self.broker_url == self.redis_url:
            client = redis.Redis.from_url(self.redis_url)
            client.delete(
                self.queue, f"_kombu.binding.{self.queue}", f"_kombu.binding_permanent.{self.queue}"
            )
            client.close()

    def sender(self) -> Celery:
        """A Celery client publishing to this worker's queue (what enqueue_settlement does)."""
        settings = Settings(
            service="worker", redis_url=self.redis_url, broker_url=self.broker_url or self.redis_url
        )
        return create_app(WorkerConfig(settings=settings, queue=self.queue))

    def metrics(self) -> str:
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as response:
            text: str = response.read().decode()
            return text
