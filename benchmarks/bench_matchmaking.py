"""Quick-match throughput: players queued and seated per second through the matchmaking
service, against the table service's own cost of creating those tables.

Starts ``kishpa serve table`` and ``kishpa serve matchmaking`` processes on the machine's
Redis (``BENCH_MM_REDIS_URL``, default ``redis://127.0.0.1:6379/15``, a database of its
own) and, from this process, has N players call ``JoinQueue`` for 4-seat tables with C
calls in flight. Every 4th call pops a group in one Lua script and creates and seats its
table through the table service before answering.

Baseline in the same run: the same number of tables created directly with ``CreateTable``
(a service credential naming the 4 players, auto-start), i.e. what seating would cost with
a free matchmaker. The ratio is the price of the queue itself. Everything created is deleted.

    .venv/bin/python benchmarks/bench_matchmaking.py [players] [concurrency]
"""

from __future__ import annotations

import asyncio
import os
import secrets
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # benchmarks/ and devkit/ run from the tree

import grpc  # noqa: E402
from redis.asyncio import Redis  # noqa: E402

from benchmarks._common import free_port, pct, wait_serving  # noqa: E402
from kishpa.common.v1 import common_pb2  # noqa: E402
from kishpa.matchmaking.v1 import matchmaking_pb2 as mm_pb2  # noqa: E402
from kishpa.matchmaking.v1 import matchmaking_pb2_grpc as mm_grpc  # noqa: E402
from kishpa.table.v1 import table_pb2, table_pb2_grpc  # noqa: E402
from sdk import table_settings  # noqa: E402
from services.common.auth import TokenAuthority, bearer_metadata  # noqa: E402
from shared import keys as table_keys  # noqa: E402

REDIS_URL = os.environ.get("BENCH_MM_REDIS_URL", "redis://127.0.0.1:6379/15")
KISHPA = str(Path(sys.executable).with_name("kishpa"))


def _start(service: str, env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [KISHPA, "serve", service], env=env, cwd=ROOT, stderr=subprocess.DEVNULL
    )


async def _bounded(concurrency: int, jobs: list[Any]) -> None:
    gate = asyncio.Semaphore(concurrency)

    async def one(job: Any) -> None:
        async with gate:
            await job

    await asyncio.gather(*(one(j) for j in jobs))


async def queue_players(
    stub: Any, authority: TokenAuthority, players: list[str], concurrency: int
) -> tuple[float, list[float], set[str]]:
    """Wall seconds for every player to JoinQueue, per-call latencies (ms), tables formed."""
    mds = {p: bearer_metadata(authority.issue_player_token(p, p).token) for p in players}
    latencies: list[float] = []
    tables: set[str] = set()

    async def join(player: str) -> None:
        start = time.perf_counter()
        response = await stub.JoinQueue(
            mm_pb2.JoinQueueRequest(
                game=common_pb2.GAME_KISHPA, seats=4, stake=1, request_id=uuid.uuid4().hex
            ),
            metadata=mds[player],
        )
        latencies.append((time.perf_counter() - start) * 1000)
        if response.ticket.table_id:
            tables.add(response.ticket.table_id)

    start = time.perf_counter()
    await _bounded(concurrency, [join(p) for p in players])
    return time.perf_counter() - start, latencies, tables


async def create_directly(
    stub: Any, authority: TokenAuthority, players: list[str], concurrency: int
) -> tuple[float, set[str]]:
    """Wall seconds to create the same tables with CreateTable (service credential)."""
    md = bearer_metadata(authority.issue_service_token("matchmaking").token)
    tables: set[str] = set()
    settings = table_settings(common_pb2.GAME_KISHPA, 4, turn_seconds=600)

    async def create(group: list[str]) -> None:
        response = await stub.CreateTable(
            table_pb2.CreateTableRequest(
                settings=settings,
                request_id=uuid.uuid4().hex,
                players=[table_pb2.SeatedPlayer(player_id=p) for p in group],
                auto_start=True,
            ),
            metadata=md,
        )
        tables.add(response.table.table_id)

    groups = [players[i : i + 4] for i in range(0, len(players), 4)]
    start = time.perf_counter()
    # A quarter of the calls: one CreateTable per group of four.
    await _bounded(max(1, concurrency // 4), [create(g) for g in groups])
    return time.perf_counter() - start, tables


async def _cleanup(redis: Redis, tables: set[str]) -> None:
    for table_id in tables:
        await redis.delete(
            table_keys.state(table_id),
            table_keys.events(table_id),
            table_keys.requests(table_id),
            table_keys.outbox(table_id),
            table_keys.balances(table_id),
        )
        await redis.zrem(table_keys.deadlines(table_id), table_id)
    async for key in redis.scan_iter(match="kishpa:[{]mm[}]:*"):
        await redis.delete(key)
    async for key in redis.scan_iter(match="kishpa:create:*"):
        await redis.delete(key)


async def main(players_n: int, concurrency: int) -> None:
    token_secret, service_secret = secrets.token_urlsafe(48), secrets.token_urlsafe(48)
    authority = TokenAuthority(token_secret, service_secret)
    table_port, mm_port = free_port(), free_port()
    env = dict(
        os.environ,
        REDIS_URL=REDIS_URL,
        KISHPA_TOKEN_SECRET=token_secret,
        KISHPA_SERVICE_SECRET=service_secret,
        KISHPA_TABLE_ENQUEUE="0",
        KISHPA_LOG_FORMAT="json",
        KISHPA_LOG_LEVEL="WARNING",
        KISHPA_TABLE_ADDR=f"127.0.0.1:{table_port}",
    )
    processes = []
    for name, port in (("table", table_port), ("matchmaking", mm_port)):
        child_env = dict(env, KISHPA_GRPC_PORT=str(port), KISHPA_METRICS_PORT=str(free_port()))
        processes.append(_start(name, child_env))
        await wait_serving(f"127.0.0.1:{port}", processes[-1], "a service")
    redis = Redis.from_url(REDIS_URL)
    made: set[str] = set()
    try:
        async with (
            grpc.aio.insecure_channel(f"127.0.0.1:{mm_port}") as mm_channel,
            grpc.aio.insecure_channel(f"127.0.0.1:{table_port}") as table_channel,
        ):
            mm: Any = mm_grpc.MatchmakingServiceStub(mm_channel)
            tables: Any = table_pb2_grpc.TableServiceStub(table_channel)
            run = uuid.uuid4().hex[:6]
            # Warm up both paths (connections, script loading) outside the measurement.
            warm = [f"w{run}{i}" for i in range(8)]
            _, _, formed = await queue_players(mm, authority, warm, 8)
            made |= formed
            _, formed = await create_directly(tables, authority, warm, 8)
            made |= formed

            direct_players = [f"d{run}{i}" for i in range(players_n)]
            direct_s, formed = await create_directly(tables, authority, direct_players, concurrency)
            made |= formed
            queued = [f"q{run}{i}" for i in range(players_n)]
            queue_s, latencies, formed = await queue_players(mm, authority, queued, concurrency)
            made |= formed
            assert len(formed) == players_n // 4, f"{len(formed)} tables for {players_n} players"

        direct_rate = players_n / direct_s
        queue_rate = players_n / queue_s
        print(f"players {players_n}, JoinQueue calls in flight {concurrency}, 4-seat tables")
        print(f"baseline: CreateTable directly  {direct_rate:8.0f} players seated/s")
        print(f"matchmaking: JoinQueue         {queue_rate:8.0f} players seated/s")
        print(f"ratio (matchmaking / baseline)  {queue_rate / direct_rate:8.2f}")
        print(
            f"JoinQueue latency ms: p50 {pct(latencies, 0.5):.1f}  "
            f"p99 {pct(latencies, 0.99):.1f}  (the call that completes a table creates it)"
        )
    finally:
        await _cleanup(redis, made)
        await redis.aclose()
        for process in processes:
            process.terminate()
        for process in processes:
            process.wait(timeout=20)


if __name__ == "__main__":
    args = [int(a) for a in sys.argv[1:3]]
    asyncio.run(main(args[0] if args else 400, args[1] if len(args) > 1 else 32))
