"""Throughput and latency of the table service under many concurrent tables.

Starts ONE ``kishpa serve table`` process on the machine's Redis (``BENCH_TABLE_REDIS_URL``,
default ``redis://127.0.0.1:6379/10``) and drives N tables of 4 simple players concurrently
from this process (draw from the pile, discard the drawn tile, decline every reveal: cheap
decisions, so the client measures the service and not the solver). Every player action is one
versioned commit (load, rules, compare-version script, stream event, view back).

Baseline in the same run: a raw Redis round trip (PING) with the same concurrency.
Reports actions/s, p50/p99 latency of player actions, and Redis memory per table
(MEMORY USAGE of a table's keys). Tables created here are deleted at the end.

    .venv/bin/python benchmarks/bench_table.py [tables] [seconds]
"""

from __future__ import annotations

import asyncio
import os
import secrets
import statistics
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # benchmarks/ and devkit/ run from the tree

import grpc  # noqa: E402
from redis.asyncio import Redis  # noqa: E402

from benchmarks._common import cpu_seconds, free_port, pct, wait_serving  # noqa: E402
from kishpa.common.v1 import common_pb2  # noqa: E402
from kishpa.table.v1 import table_pb2, table_pb2_grpc  # noqa: E402
from sdk import table_settings  # noqa: E402
from services.common.auth import TokenAuthority, bearer_metadata  # noqa: E402
from services.table.store import TableStore  # noqa: E402
from shared import keys  # noqa: E402

# A database of its own: other table services on the machine must not serve its timers.
REDIS_URL = os.environ.get("BENCH_TABLE_REDIS_URL", "redis://127.0.0.1:6379/10")
PLAYING = (table_pb2.ROUND_PHASE_FIRST_DISCARD, table_pb2.ROUND_PHASE_TURNS)


def _server_root() -> Path:
    """``BENCH_TABLE_SERVER_ROOT=<dir>`` serves from another source tree (e.g. ``git archive``
    of the previous commit plus ``kishpa/``), to compare two versions in one session."""
    return Path(os.environ.get("BENCH_TABLE_SERVER_ROOT", ROOT))


def _profiler() -> list[str]:
    """``BENCH_TABLE_PROFILE=<file>`` runs the service under cProfile (to find its hot spots)."""
    out = os.environ.get("BENCH_TABLE_PROFILE")
    return ["-m", "cProfile", "-o", out] if out else []


def _server_means(metrics_port: int) -> dict[str, float]:
    """Mean handling time per RPC method (ms) from the service's Prometheus histogram."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5).read()
    sums: dict[str, float] = {}
    counts: dict[str, float] = {}
    for line in text.decode().splitlines():
        if not line.startswith("kishpa_grpc_server_handling_seconds_"):
            continue
        name, value = line.rsplit(" ", 1)
        method = name.split('grpc_method="', 1)[1].split('"', 1)[0] if "grpc_method" in name else ""
        if name.startswith("kishpa_grpc_server_handling_seconds_sum"):
            sums[method] = float(value)
        elif name.startswith("kishpa_grpc_server_handling_seconds_count"):
            counts[method] = float(value)
    return {m: 1000 * sums[m] / counts[m] for m in sums if counts.get(m)}


async def redis_baseline(redis: Redis, concurrency: int, seconds: float) -> list[float]:
    """Latencies (ms) of PING round trips from ``concurrency`` tasks for ``seconds``."""
    samples: list[float] = []
    until = time.perf_counter() + seconds

    async def worker() -> None:
        while time.perf_counter() < until:
            start = time.perf_counter()
            await redis.ping()
            samples.append((time.perf_counter() - start) * 1000)

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return samples


class BenchTable:
    """One table of 4 simple players driven by one task."""

    def __init__(self, stub: Any, metadata: list[Any]) -> None:
        self.stub = stub
        self.md = metadata
        self.table_id = ""

    async def open(self) -> None:
        created = await self.stub.CreateTable(
            table_pb2.CreateTableRequest(
                settings=table_settings(
                    common_pb2.GAME_KISHPA,
                    4,
                    turn_seconds=120,
                    reveal_window_seconds=60,
                    next_round_pause_ms=1,
                ),
                request_id=uuid.uuid4().hex,
            ),
            metadata=self.md[0],
        )
        self.table_id = created.table.table_id
        for md in self.md[1:]:
            await self.stub.JoinTable(
                table_pb2.JoinTableRequest(table_id=self.table_id, request_id=uuid.uuid4().hex),
                metadata=md,
            )
        await self.stub.StartGame(
            table_pb2.StartGameRequest(table_id=self.table_id, request_id=uuid.uuid4().hex),
            metadata=self.md[0],
        )

    async def _action(self, view: table_pb2.TableView) -> tuple[Any, Any] | None:
        tid = self.table_id
        rid = uuid.uuid4().hex
        actions = view.available_actions
        if table_pb2.PLAYER_ACTION_DECLINE_REVEAL in actions:
            return self.stub.DeclineReveal, table_pb2.DeclineRevealRequest(
                table_id=tid, request_id=rid
            )
        if table_pb2.PLAYER_ACTION_DRAW_PILE in actions:
            return self.stub.Draw, table_pb2.DrawRequest(
                table_id=tid, source=table_pb2.DRAW_SOURCE_PILE, request_id=rid
            )
        if table_pb2.PLAYER_ACTION_DISCARD in actions:
            tile = view.round.my_rack.tiles[-1].id  # the drawn tile is appended last
            return self.stub.Discard, table_pb2.DiscardRequest(
                table_id=tid, tile_id=tile, request_id=rid
            )
        return None

    async def run(self, until: float, latencies: list[float], reads: list[float]) -> None:
        """Play until the deadline: whoever may act acts; wait while the next round deals."""
        seat = 0
        view: table_pb2.TableView | None = None
        while time.perf_counter() < until:
            if view is None:
                start = time.perf_counter()
                view = (
                    await self.stub.GetTable(
                        table_pb2.GetTableRequest(table_id=self.table_id), metadata=self.md[seat]
                    )
                ).table
                reads.append((time.perf_counter() - start) * 1000)
            chosen = await self._action(view)
            current, view = view, None
            if chosen is None:
                r = current.round
                if r.phase in PLAYING and r.turn_seat >= 0:
                    seat = r.turn_seat
                elif r.phase == table_pb2.ROUND_PHASE_ENDED:
                    await asyncio.sleep(0.05)  # the deadline loop deals the next round
                else:
                    seat = (seat + 1) % 4  # a window: ask the next seat
                continue
            call, request = chosen
            start = time.perf_counter()
            response = await call(request, metadata=self.md[seat])
            latencies.append((time.perf_counter() - start) * 1000)
            if response.HasField("table") and response.table.round.turn_seat == seat:
                view = response.table  # the same player goes on (discard after his draw)


async def main(tables: int, seconds: float) -> None:
    token_secret = secrets.token_urlsafe(48)
    port = free_port()
    env = {
        **os.environ,
        "REDIS_URL": REDIS_URL,
        "KISHPA_TOKEN_SECRET": token_secret,
        "KISHPA_SERVICE_SECRET": secrets.token_urlsafe(48),
        "KISHPA_GRPC_HOST": "127.0.0.1",
        "KISHPA_GRPC_PORT": str(port),
        "KISHPA_METRICS_PORT": str(free_port()),
        "KISHPA_TABLE_ENQUEUE": "0",
        "KISHPA_LOG_FORMAT": "json",
        "KISHPA_LOG_LEVEL": "WARNING",
    }
    log = Path(os.environ.get("BENCH_TABLE_LOG", os.devnull)).open("wb")  # noqa: ASYNC230, SIM115
    process = subprocess.Popen(  # noqa: ASYNC220 - started once, before the measurement
        [sys.executable, *_profiler(), "-m", "cli.main", "serve", "table"],
        cwd=_server_root(),
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=log,
    )
    redis = Redis.from_url(REDIS_URL)
    address = f"127.0.0.1:{port}"
    runners: list[BenchTable] = []
    try:
        await wait_serving(address, process, "the table service")
        base = await redis_baseline(redis, tables, min(5.0, seconds))
        authority = TokenAuthority(token_secret)
        async with grpc.aio.insecure_channel(address) as channel:
            stub = table_pb2_grpc.TableServiceStub(channel)
            for n in range(tables):
                md = [
                    bearer_metadata(authority.issue_player_token(f"bench-{n}-{s}", "b").token)
                    for s in range(4)
                ]
                runners.append(BenchTable(stub, md))
            await asyncio.gather(*(r.open() for r in runners))
            latencies: list[float] = []
            reads: list[float] = []
            until = time.perf_counter() + seconds
            started = time.perf_counter()
            cpu_before = cpu_seconds(process.pid)
            await asyncio.gather(*(r.run(until, latencies, reads) for r in runners))
            elapsed = time.perf_counter() - started
            server_cpu = cpu_seconds(process.pid) - cpu_before
        store = TableStore(redis)
        memory = [await store.memory_usage(r.table_id) for r in runners[:20]]
        ping_rate = len(base) / min(5.0, seconds)
        rate = len(latencies) / elapsed
        print(f"tables={tables} seconds={seconds:.0f} (one table-service process, 2 shared cores)")
        print(f"{'what':<34}{'ops/s':>10}{'p50 ms':>10}{'p99 ms':>10}")
        print(
            f"{'redis PING (baseline)':<34}{ping_rate:>10.0f}"
            f"{pct(base, 0.5):>10.2f}{pct(base, 0.99):>10.2f}"
        )
        print(
            f"{'player action (Draw/Discard/...)':<34}{rate:>10.0f}"
            f"{pct(latencies, 0.5):>10.2f}{pct(latencies, 0.99):>10.2f}"
        )
        print(
            f"{'GetTable (read)':<34}{len(reads) / elapsed:>10.0f}"
            f"{pct(reads, 0.5):>10.2f}{pct(reads, 0.99):>10.2f}"
        )
        print(
            f"action p50 / PING p50 = x{pct(latencies, 0.5) / pct(base, 0.5):.1f}; "
            f"action p99 / PING p99 = x{pct(latencies, 0.99) / pct(base, 0.99):.1f}"
        )
        rpcs = len(latencies) + len(reads)
        print(
            f"service CPU: {server_cpu:.1f} s over {elapsed:.1f} s "
            f"({100 * server_cpu / elapsed:.0f}% of one core), "
            f"{1000 * server_cpu / max(1, rpcs):.2f} ms per RPC"
        )
        print(f"redis memory per table: mean {statistics.mean(memory) / 1024:.1f} KiB")
        for method, mean_ms in _server_means(int(env["KISHPA_METRICS_PORT"])).items():
            print(f"server-side mean handling time {method}: {mean_ms:.2f} ms")
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
        for r in runners:
            if r.table_id:
                await redis.delete(
                    keys.state(r.table_id),
                    keys.events(r.table_id),
                    keys.requests(r.table_id),
                    keys.outbox(r.table_id),
                )
                await redis.zrem(keys.deadlines(r.table_id), r.table_id)
                await redis.zrem(keys.unsettled(r.table_id), r.table_id)
        await redis.aclose()
        log.close()


if __name__ == "__main__":
    n_tables = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    n_seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 20.0
    asyncio.run(main(n_tables, n_seconds))
