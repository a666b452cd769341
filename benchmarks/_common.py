"""What the benchmarks share: free ports, waiting for a started service, percentiles, CPU time.

A benchmark runs as a script (``.venv/bin/python benchmarks/bench_x.py``); it puts the
repository's root on ``sys.path`` before importing this module (``benchmarks/`` and
``devkit/`` are not installed packages). Benchmarks never import ``tests/``: what they share
with the tests is ``devkit/`` (an import-linter contract in ``make lint``).
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

import grpc

from services.common.health_client import SERVING, check_health

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    """A TCP port nobody listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def wait_serving(
    address: str,
    process: subprocess.Popen[bytes],
    what: str,
    deadline_s: float = 60.0,
    pause_s: float = 0.2,
) -> None:
    """Return once the gRPC server at ``address`` reports SERVING; ``SystemExit`` naming
    ``what`` if ``process`` exits first or the deadline passes."""
    deadline = time.monotonic() + deadline_s
    async with grpc.aio.insecure_channel(address) as channel:
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise SystemExit(f"{what} exited")
            try:
                if await check_health(channel) == SERVING:
                    return
            except grpc.aio.AioRpcError:
                pass  # not listening yet
            await asyncio.sleep(pause_s)
    raise SystemExit(f"{what} did not start")


def pct(samples: Sequence[float], q: float) -> float:
    """The ``q`` quantile (0-1) of ``samples`` (nearest rank; NaN when there are none)."""
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time a process has used (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def thread_cpu_seconds(pid: int) -> dict[str, float]:
    """User + system CPU time of each thread of a process, by kind: ``main`` (the thread
    the process started with: an asyncio service's event loop) and the others by their
    kernel name (grpc's C-core threads name themselves; Python threads are ``python``)."""
    out: dict[str, float] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
            name = "main" if task.name == str(pid) else (task / "comm").read_text().strip()
        except OSError:
            continue  # the thread ended meanwhile
        out[name] = out.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / os.sysconf(
            "SC_CLK_TCK"
        )
    return out
