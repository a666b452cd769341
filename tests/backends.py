"""Where the tests get their servers: explicit URLs, then testcontainers, then local servers.

For each kind of server (Redis, a Redis Cluster, PostgreSQL, RabbitMQ) the first that
applies wins:

1. an explicit URL in the environment (``TEST_REDIS_URL``, ``TEST_REDIS_CLUSTER_URL``,
   ``TEST_DATABASE_URL``, ``TEST_RABBITMQ_URL``): CI or a developer's own servers;
2. a container started with ``testcontainers`` when a Docker engine answers (``DOCKER_HOST``
   or ``/var/run/docker.sock``): how a laptop with nothing but Docker runs ``make test``
   (:mod:`tests.containers`);
3. the local servers: the machine's PostgreSQL/Redis/RabbitMQ on their default ports, and
   for a Redis Cluster three ``redis-server`` processes the fixtures start
   (:mod:`devkit.redis_servers`).

The choice is made once per run (``pytest_configure``) and printed in the report header.
Containers and processes started here are stopped at the end of the run.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

KINDS = ("redis", "redis-cluster", "postgres", "rabbitmq")
URL_VARIABLES = {
    "redis": "TEST_REDIS_URL",
    "redis-cluster": "TEST_REDIS_CLUSTER_URL",
    "postgres": "TEST_DATABASE_URL",
    "rabbitmq": "TEST_RABBITMQ_URL",
}
LOCAL_URLS = {
    "redis": "redis://127.0.0.1:6379/0",
    "postgres": "postgresql+psycopg://postgres@127.0.0.1:5432/test",
    "rabbitmq": "amqp://guest:guest@127.0.0.1:5672//",
}
DOCKER_SOCKET = "/var/run/docker.sock"


@dataclass(frozen=True, slots=True)
class Choice:
    """Which server of a kind the run uses, and where it came from."""

    kind: str
    source: str  # "url", "testcontainers" or "local"
    url: str

    def describe(self) -> str:
        parts = urlsplit(self.url)
        where = parts.netloc.rpartition("@")[2] or self.url  # never print a password
        return f"{self.kind}={self.source}({parts.scheme}://{where}{parts.path})"


@dataclass
class Starters:
    """How to start a server of a kind: in a container, or as a local process.

    Each returns the server's URL and registers its own cleanup with ``stops``.
    """

    container: Mapping[str, Callable[[], str]] = field(default_factory=dict)
    local: Mapping[str, Callable[[], str]] = field(default_factory=dict)


def docker_reachable(env: Mapping[str, str] | None = None, *, timeout_s: float = 1.0) -> bool:
    """Whether a Docker engine answers ``GET /_ping`` (on ``DOCKER_HOST`` or the socket)."""
    env = os.environ if env is None else env
    host = env.get("DOCKER_HOST", "")
    try:
        if host.startswith("tcp://"):
            netloc = urlsplit(host).netloc
            name, _, port = netloc.partition(":")
            sock = socket.create_connection((name, int(port or 2375)), timeout=timeout_s)
        else:
            path = host.removeprefix("unix://") if host else DOCKER_SOCKET
            if not os.path.exists(path):
                return False
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(timeout_s)
            sock.connect(path)
        with sock:
            sock.sendall(b"GET /_ping HTTP/1.0\r\nHost: docker\r\n\r\n")
            reply = sock.recv(64)
        return reply.startswith(b"HTTP/1.") and b" 200" in reply
    except (OSError, ValueError):
        return False


def choose(
    kind: str,
    env: Mapping[str, str],
    *,
    docker: Callable[[], bool],
    starters: Starters,
) -> Choice:
    """The server of ``kind`` the run uses (see the module docstring for the order)."""
    if kind not in KINDS:
        raise ValueError(f"unknown server kind {kind!r}")
    explicit = env.get(URL_VARIABLES[kind], "")
    if explicit:
        return Choice(kind, "url", explicit)
    container = starters.container.get(kind)
    if container is not None and docker():
        return Choice(kind, "testcontainers", container())
    local = starters.local.get(kind)
    if local is not None:
        return Choice(kind, "local", local())
    return Choice(kind, "local", LOCAL_URLS[kind])
