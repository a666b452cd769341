"""Capacity of the table service at human pace: N tables x 4 watchers, 1 action per table per 3 s.

For each step of a ramp of N (``--steps``), on a fresh private ``redis-server`` (free port,
removed afterwards) and fresh ``kishpa serve table`` process(es) (``--processes``; a table's
four watchers are spread over them, so any process serves any table):

1. load generators (``--generators`` child processes of this script) open N tables, seat 4
   players each, deal, and open one ``WatchTable`` stream per player;
2. *idle* (``--idle-seconds``): nothing happens; the service's CPU over this window, divided
   by the watchers, is the cost of an idle watcher;
3. *load* (``--seconds``): every table makes one player action every 3 s (draw from the pile,
   discard the drawn tile, decline reveals: cheap decisions, so the generators measure the
   service). Like a client told by its stream that its turn began, the player the last
   action passed the turn to draws at once; only in a reveal window, or when such a draw is
   refused, does the generator read the table (``GetTable``) to find who may act. Action
   latency is the RPC's round trip; fan-out latency is the time from the event's stream id
   (Redis' clock at XADD) to its arrival at each watcher.

Per step it prints actions/s, action and fan-out p50/p99, the actions' time inside the service
(its handler histogram: the rest of the client's time waited before a handler ran), service
CPU per action and per idle watcher, Redis connections, Redis memory per table
(``used_memory`` growth / N: keys *and* connection buffers; tables just dealt, and again after
the load), GC pauses of the service and the collections' CPU (its ``kishpa_table_gc_*``
metrics), the actions computed on a state the service kept
(``kishpa_table_state_cache_total``), Redis commands (by command, a script's own included)
and Redis CPU per action, the generators' own CPU (reported apart: they share the 2 cores),
and a baseline measured in the same run: Redis PING round trips (p50/p99) before the step.

Costs are per action the service *committed* in the load window
(``kishpa_table_commits_total``): a service that cannot keep up finishes the generators'
actions after the window, and its window's CPU spread over the actions made would read low.
Its CPU is also given per thread (the event loop, grpc's threads; ``/proc``), and
``--profile PREFIX`` records its stacks with py-spy for ``benchmarks/profile_parts.py``.

    .venv/bin/python benchmarks/bench_capacity.py --steps 250,500,1000,2000 --seconds 45

``BENCH_CAPACITY_SERVER_ROOT=<dir>`` serves from another source tree (e.g. the commit before
the shared fan-out, with its generated ``kishpa/``) to measure it in the same session.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import os
import random
import resource
import secrets
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import grpc  # noqa: E402
from redis.asyncio import Redis  # noqa: E402

from benchmarks._common import (  # noqa: E402
    cpu_seconds,
    free_port,
    pct,
    thread_cpu_seconds,
    wait_serving,
)
from kishpa.common.v1 import common_pb2  # noqa: E402
from kishpa.table.v1 import table_pb2, table_pb2_grpc  # noqa: E402
from sdk import table_settings  # noqa: E402
from services.common.auth import TokenAuthority, bearer_metadata  # noqa: E402

PERIOD_S = 3.0
TABLES_PER_CHANNEL = 100
"""Watch streams of this many tables share one HTTP/2 connection of a generator."""
SAMPLE_CAP = 60_000
"""Latency samples a generator reports per kind (uniformly subsampled beyond)."""


def _capped(samples: list[float], rng: random.Random) -> list[float]:
    return samples if len(samples) <= SAMPLE_CAP else rng.sample(samples, SAMPLE_CAP)


KEPT_METRICS = (
    "kishpa_table_gc_pause",
    "kishpa_table_gc_cpu",
    "kishpa_table_fanout",
    "kishpa_table_watchers",
    "kishpa_table_state_cache_total",
    "kishpa_grpc_server_handling_seconds_bucket",
    "kishpa_table_commits_total",
)
ACTION_METHODS = ('grpc_method="Draw"', 'grpc_method="Discard"', 'grpc_method="DeclineReveal"')


def _metrics(port: int) -> dict[str, float]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith(KEPT_METRICS):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


def _kept_summary(before: list[dict[str, float]], after: list[dict[str, float]]) -> str:
    """Actions computed on a kept state during the load window, by outcome."""
    outcomes: collections.Counter[str] = collections.Counter()
    for b, a in zip(before, after, strict=True):
        for name, value in a.items():
            if name.startswith("kishpa_table_state_cache_total"):
                outcome = name.partition('outcome="')[2].partition('"')[0]
                outcomes[outcome] += int(value - b.get(name, 0.0))
    return ", ".join(f"{k} {v}" for k, v in sorted(outcomes.items())) or "none (not kept)"


def _gc_summary(before: list[dict[str, float]], after: list[dict[str, float]]) -> str:
    """Pauses during the load window: how many, their total, how many over 50 ms."""
    count = total = under_50ms = 0.0
    for b, a in zip(before, after, strict=True):
        for name, value in a.items():
            delta = value - b.get(name, 0.0)
            if name.startswith("kishpa_table_gc_pause_seconds_count"):
                count += delta
            elif name.startswith("kishpa_table_gc_pause_seconds_sum"):
                total += delta
            elif name.startswith("kishpa_table_gc_pause_seconds_bucket") and 'le="0.05"' in name:
                under_50ms += delta
    longest = max((a.get("kishpa_table_gc_pause_max_seconds", 0.0) for a in after), default=0.0)
    return (
        f"{count:.0f} pauses, {1000 * total:.0f} ms in all, {count - under_50ms:.0f} over 50 ms; "
        f"longest since start {1000 * longest:.1f} ms"
    )


def _handling_p99(before: list[dict[str, float]], after: list[dict[str, float]]) -> str:
    """The 50th and 99th percentiles of the actions' time inside the service (from the
    handler's start, its interceptors included, to its end; bucket bounds of
    ``kishpa_grpc_server_handling_seconds``) during the load window: what the client sees
    beyond it waited before a handler ran (grpc's queue of calls not yet picked up, the
    event loop) or on the way."""
    buckets: dict[float, float] = collections.defaultdict(float)
    for b, a in zip(before, after, strict=True):
        for name, value in a.items():
            if name.startswith("kishpa_grpc_server_handling_seconds_bucket") and any(
                m in name for m in ACTION_METHODS
            ):
                le = name.partition('le="')[2].partition('"')[0]
                buckets[float(le)] += value - b.get(name, 0.0)
    total = buckets.get(float("inf"), 0.0)
    if not total:
        return "not reported"
    out = []
    for q in (0.5, 0.99):
        bound = min(k for k, n in buckets.items() if n >= q * total)
        out.append("over 60 s" if bound == float("inf") else f"<= {1000 * bound:g} ms")
    return f"p50 {out[0]}, p99 {out[1]}"


# ---- the load generator (a child process) ---------------------------------------------


def _events(response: Any) -> list[Any]:
    """The events of one WatchTable message, batched or not."""
    return list(response.events) if response.events else [response.event]


class Table:
    """One table: 4 players, their watch streams, and a paced action loop."""

    def __init__(
        self, stubs: list[Any], watch_stubs: list[Any], md: list[Any], batched: bool
    ) -> None:
        self.stubs = stubs  # the player's stub per seat (any process)
        self.watch_stubs = watch_stubs
        self.md = md
        self.batched = batched  # events in batches (WatchTableRequest.batched), as clients ask
        self.table_id = ""
        self.view: Any = None
        self.seat = 0
        self.draw_next = False
        self.reads = 0
        self.messages = 0  # stream messages received
        self.watch_errors: list[str] = []
        self.seen: dict[int, list[str]] = {}
        """Per seat: the id its watch started after, then every event id it received."""

    async def missed(self, seat: int, until_ms: float) -> int:
        """Events before ``until_ms`` that a fresh watch from the same start replays and the
        live watch did not get: 0 unless the fan-out lost or held back some."""
        seen = self.seen.get(seat, [])
        if not seen:
            return 0
        replay: list[str] = []
        call = self.watch_stubs[seat].WatchTable(
            table_pb2.WatchTableRequest(table_id=self.table_id, after_event_id=seen[0]),
            metadata=self.md[seat],
            timeout=3,
        )
        with contextlib.suppress(grpc.aio.AioRpcError):
            async for item in call:
                replay.extend(e.event_id for e in _events(item))
        received = set(seen[1:])
        return sum(1 for i in replay if i not in received and int(i.split("-")[0]) < until_ms)

    async def open(self) -> None:
        created = await self.stubs[0].CreateTable(
            table_pb2.CreateTableRequest(
                settings=table_settings(
                    common_pb2.GAME_KISHPA,
                    4,
                    turn_seconds=600,
                    reveal_window_seconds=600,
                    next_round_pause_ms=1,
                ),
                request_id=uuid.uuid4().hex,
            ),
            metadata=self.md[0],
        )
        self.table_id = created.table.table_id
        for seat in (1, 2, 3):
            await self.stubs[seat].JoinTable(
                table_pb2.JoinTableRequest(table_id=self.table_id, request_id=uuid.uuid4().hex),
                metadata=self.md[seat],
            )
        started = await self.stubs[0].StartGame(
            table_pb2.StartGameRequest(table_id=self.table_id, request_id=uuid.uuid4().hex),
            metadata=self.md[0],
        )
        self.view = started.table

    async def watch(self, seat: int, after: str, arrivals: list[float], ready: Any) -> None:
        call = self.watch_stubs[seat].WatchTable(
            table_pb2.WatchTableRequest(
                table_id=self.table_id, after_event_id=after, batched=self.batched
            ),
            metadata=self.md[seat],
        )
        ready()
        seen = self.seen[seat] = [after]
        while True:
            try:
                async for item in call:
                    self.messages += 1
                    now_ms = time.time() * 1000
                    for event in _events(item):
                        arrivals.append(now_ms - int(event.event_id.split("-", 1)[0]))
                        seen.append(event.event_id)
                return
            except grpc.aio.AioRpcError as exc:
                # As a client does: watch again from the last event received (see
                # docs/BENCHMARKS.md: grpc's client cancels some of the thousands of streams
                # a generator holds, "locally").
                self.watch_errors.append(f"{exc.code().name}: {exc.details()}")
            await asyncio.sleep(0.2)
            call = self.watch_stubs[seat].WatchTable(
                table_pb2.WatchTableRequest(
                    table_id=self.table_id, after_event_id=seen[-1], batched=self.batched
                ),
                metadata=self.md[seat],
            )

    def _choice(self, view: Any) -> tuple[str, Any] | None:
        tid, rid = self.table_id, uuid.uuid4().hex
        actions = view.available_actions
        if table_pb2.PLAYER_ACTION_DECLINE_REVEAL in actions:
            return "DeclineReveal", table_pb2.DeclineRevealRequest(table_id=tid, request_id=rid)
        if table_pb2.PLAYER_ACTION_DRAW_PILE in actions:
            return "Draw", table_pb2.DrawRequest(
                table_id=tid, source=table_pb2.DRAW_SOURCE_PILE, request_id=rid
            )
        if table_pb2.PLAYER_ACTION_DISCARD in actions:
            tile = view.round.my_rack.tiles[-1].id  # the drawn tile is appended last
            return "Discard", table_pb2.DiscardRequest(table_id=tid, tile_id=tile, request_id=rid)
        return None

    async def act(self, latencies: list[float], errors: list[str]) -> None:
        """One player action (finding the seat that may act, with reads if needed)."""
        if self.draw_next:
            self.draw_next = False
            request = table_pb2.DrawRequest(
                table_id=self.table_id,
                source=table_pb2.DRAW_SOURCE_PILE,
                request_id=uuid.uuid4().hex,
            )
            if await self._send("Draw", request, latencies, errors, optimistic=True):
                return
        for _ in range(5):
            if self.view is None:
                self.reads += 1
                response = await self.stubs[self.seat].GetTable(
                    table_pb2.GetTableRequest(table_id=self.table_id), metadata=self.md[self.seat]
                )
                self.view = response.table
            view, self.view = self.view, None
            mine = view.HasField("my_seat") and view.my_seat == self.seat
            chosen = self._choice(view) if mine else None
            if chosen is None:
                r = view.round
                playing = r.phase in (
                    table_pb2.ROUND_PHASE_TURNS,
                    table_pb2.ROUND_PHASE_FIRST_DISCARD,
                )
                if playing and r.HasField("turn_seat") and r.turn_seat != self.seat:
                    self.seat = r.turn_seat
                else:
                    self.seat = (self.seat + 1) % 4  # a window: ask the next seat
                continue
            name, request = chosen
            await self._send(name, request, latencies, errors)
            return

    async def _send(
        self,
        name: str,
        request: Any,
        latencies: list[float],
        errors: list[str],
        *,
        optimistic: bool = False,
    ) -> bool:
        """Make one action; False when an optimistic draw was refused (a window is open)."""
        start = time.perf_counter()
        try:
            response = await getattr(self.stubs[self.seat], name)(
                request, metadata=self.md[self.seat]
            )
        except grpc.aio.AioRpcError as exc:
            if optimistic and exc.code() == grpc.StatusCode.FAILED_PRECONDITION:
                return False
            errors.append(exc.code().name)
            return True
        latencies.append((time.perf_counter() - start) * 1000)
        r = response.table.round
        if r.HasField("turn_seat") and r.turn_seat == self.seat:
            self.view = response.table  # the same player goes on (discard after draw)
        elif r.phase == table_pb2.ROUND_PHASE_TURNS and r.HasField("turn_seat"):
            self.seat, self.draw_next = r.turn_seat, True
        return True


async def generate(args: argparse.Namespace) -> None:
    addresses = args.addresses.split(",")
    authority = TokenAuthority(args.secret)
    channels: list[grpc.aio.Channel] = []

    def channel(address: str) -> grpc.aio.Channel:
        ch = grpc.aio.insecure_channel(address, options=[("grpc.use_local_subchannel_pool", 1)])
        channels.append(ch)
        return ch

    tables: list[Table] = []
    stub_groups: list[list[Any]] = []
    for n in range(args.tables):
        if n % TABLES_PER_CHANNEL == 0:
            stub_groups.append([table_pb2_grpc.TableServiceStub(channel(a)) for a in addresses])
        stubs = stub_groups[-1]
        global_n = args.offset + n
        # Any process serves any table: each seat (and its watch) goes to the next process,
        # or, with --affinity (a balancer routing by table), every seat to the table's one.
        spread = 0 if args.affinity else 1
        by_seat = [stubs[(global_n + spread * seat) % len(stubs)] for seat in range(4)]
        md = [
            bearer_metadata(authority.issue_player_token(f"cap-{global_n}-{s}", "c").token)
            for s in range(4)
        ]
        tables.append(Table(by_seat, by_seat, md, batched=not args.unbatched))
    sem = asyncio.Semaphore(32)

    async def opened(table: Table) -> None:
        async with sem:
            await table.open()

    await asyncio.gather(*(opened(t) for t in tables))
    arrivals: list[float] = []
    latencies: list[float] = []
    errors: list[str] = []
    opened_streams = 0
    all_open = asyncio.Event()
    total_streams = 4 * len(tables)

    def one_open() -> None:
        nonlocal opened_streams
        opened_streams += 1
        if opened_streams == total_streams:
            all_open.set()

    watchers = [
        asyncio.create_task(t.watch(seat, t.view.last_event_id, arrivals, one_open))
        for t in tables
        for seat in range(4)
    ]
    await asyncio.wait_for(all_open.wait(), 300)
    await asyncio.sleep(2.0)  # the streams' first reads are done
    print("READY", flush=True)
    plan = json.loads(await asyncio.to_thread(sys.stdin.readline))
    await asyncio.sleep(max(0.0, plan["load_at"] - time.time()))
    arrivals.clear()
    messages0 = sum(t.messages for t in tables)
    cpu0 = resource.getrusage(resource.RUSAGE_SELF)
    until = plan["load_at"] + plan["seconds"]

    async def paced(table: Table) -> None:
        await asyncio.sleep(random.uniform(0, PERIOD_S))
        tick = time.time()
        while tick < until:
            await table.act(latencies, errors)
            tick += PERIOD_S
            await asyncio.sleep(max(0.0, tick - time.time()))

    await asyncio.gather(*(paced(t) for t in tables))
    await asyncio.sleep(1.0)  # the last fan-outs arrive
    cpu1 = resource.getrusage(resource.RUSAGE_SELF)
    fanout = list(arrivals)
    # Exactly-once check on a sample: a fresh watch from each sampled watcher's start.
    sample = [(t, seat) for t in tables[:: max(1, len(tables) // 25)] for seat in range(4)]
    cutoff_ms = (until + 0.5) * 1000  # events the live watches had 0.5 s or more to deliver
    missed = await asyncio.gather(*(t.missed(seat, cutoff_ms) for t, seat in sample))
    for task in watchers:
        task.cancel()
    await asyncio.gather(*watchers, return_exceptions=True)
    for ch in channels:
        await ch.close()
    rng = random.Random(7)
    report = {
        "tables": [t.table_id for t in tables],
        "actions": len(latencies),
        "latencies": _capped(latencies, rng),
        "fanout": _capped(fanout, rng),
        "fanout_count": len(fanout),
        "messages": sum(t.messages for t in tables) - messages0,
        "errors": errors,
        "reads": sum(t.reads for t in tables),
        "watch_errors": [e for t in tables for e in t.watch_errors],
        "checked": len(sample),
        "missed": [m for m in missed if m],
        "cpu_s": (cpu1.ru_utime + cpu1.ru_stime) - (cpu0.ru_utime + cpu0.ru_stime),
    }
    print("REPORT " + json.dumps(report), flush=True)


# ---- the driver ------------------------------------------------------------------------


async def _ping_baseline(redis: Redis, seconds: float = 3.0) -> list[float]:
    samples: list[float] = []
    until = time.perf_counter() + seconds

    async def worker() -> None:
        while time.perf_counter() < until:
            start = time.perf_counter()
            await redis.ping()
            samples.append((time.perf_counter() - start) * 1000)

    await asyncio.gather(*(worker() for _ in range(20)))
    return samples


DRIVER = "bench-capacity-driver"


async def _service_clients(redis: Redis) -> list[dict[str, Any]]:
    """The Redis connections of the services (every client but this driver's)."""
    return [c for c in await redis.client_list() if c.get("name") != DRIVER]


async def step(args: argparse.Namespace, tables: int) -> None:
    from devkit.redis_servers import start_redis, stop_redis

    redis_server = start_redis()
    # Named, so that counting the services' connections leaves the driver's own out.
    redis = Redis.from_url(redis_server.url, client_name=DRIVER)
    secret = secrets.token_urlsafe(48)
    services: list[tuple[subprocess.Popen[bytes], int]] = []
    generators: list[subprocess.Popen[str]] = []
    try:
        root = Path(os.environ.get("BENCH_CAPACITY_SERVER_ROOT", ROOT))
        addresses = []
        for _ in range(args.processes):
            port, metrics_port = free_port(), free_port()
            env = {
                **os.environ,
                "REDIS_URL": redis_server.url,
                "KISHPA_TOKEN_SECRET": secret,
                "KISHPA_SERVICE_SECRET": secrets.token_urlsafe(48),
                "KISHPA_GRPC_HOST": "127.0.0.1",
                "KISHPA_GRPC_PORT": str(port),
                "KISHPA_METRICS_PORT": str(metrics_port),
                "KISHPA_TABLE_ENQUEUE": "0",
                "KISHPA_LOG_FORMAT": "json",
                "KISHPA_LOG_LEVEL": "WARNING",
            }
            process = subprocess.Popen(  # noqa: ASYNC220 - started before the measurement
                [sys.executable, "-m", "cli.main", "serve", "table"],
                cwd=root,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            services.append((process, metrics_port))
            addresses.append(f"127.0.0.1:{port}")
        for (process, _), address in zip(services, addresses, strict=True):
            await wait_serving(address, process, "the table service")
        memory_before = int((await redis.info("memory"))["used_memory"])
        # The process's own idle cost (timers, no watcher): what watchers add is on top.
        pids = [p.pid for p, _ in services]
        await asyncio.sleep(2.0)
        cpu_base0 = sum(cpu_seconds(p) for p in pids)
        await asyncio.sleep(args.idle_seconds)
        base_cpu = sum(cpu_seconds(p) for p in pids) - cpu_base0
        per = -(-tables // args.generators)
        for g in range(args.generators):
            count = min(per, tables - g * per)
            if count <= 0:
                break
            generators.append(
                subprocess.Popen(  # noqa: ASYNC220 - started before the measurement
                    [
                        sys.executable,
                        __file__,
                        "--generator",
                        f"--tables={count}",
                        f"--offset={g * per}",
                        f"--addresses={','.join(addresses)}",
                        f"--secret={secret}",
                        *(["--affinity"] if args.affinity else []),
                        *(["--unbatched"] if args.unbatched else []),
                    ],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    text=True,
                )
            )
        for gen in generators:
            assert gen.stdout is not None
            line = await asyncio.to_thread(gen.stdout.readline)
            if not line.startswith("READY"):
                raise SystemExit(f"a generator failed while opening tables: {line!r}")
        # A stream counts as open in the generator when its call starts; wait until the
        # services hold every watcher (their catch-up reads done), so the idle window is idle.
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            held = sum(_metrics(m).get("kishpa_table_watchers", 0.0) for _, m in services)
            if held >= 4 * tables:
                break
            await asyncio.sleep(0.5)
        await asyncio.sleep(2.0)
        pings = await _ping_baseline(redis)
        # Idle: every watcher open, nothing happens.
        cpu0 = sum(cpu_seconds(p) for p in pids)
        await asyncio.sleep(args.idle_seconds)
        idle_cpu = sum(cpu_seconds(p) for p in pids) - cpu0
        info = await redis.info()
        connections = len(await _service_clients(redis))
        memory_per_table = (int(info["used_memory"]) - memory_before) / tables
        gc_before = [_metrics(m) for _, m in services]
        plan = {"load_at": time.time() + 1.0, "seconds": args.seconds}
        for gen in generators:
            assert gen.stdin is not None
            gen.stdin.write(json.dumps(plan) + "\n")
            gen.stdin.flush()
        await asyncio.sleep(max(0.0, plan["load_at"] - time.time()))
        window0 = [_metrics(m) for _, m in services]
        cpu1 = sum(cpu_seconds(p) for p in pids)
        threads0 = [thread_cpu_seconds(p) for p in pids]
        commands0 = int((await redis.info("stats"))["total_commands_processed"])
        by_command0 = await _command_calls(redis)
        redis_cpu0 = await _redis_cpu(redis)
        profilers = _profile(args, pids)
        await asyncio.sleep(args.seconds)
        load_cpu = sum(cpu_seconds(p) for p in pids) - cpu1
        committed = _committed(window0, [_metrics(m) for _, m in services])
        by_thread = _thread_deltas(threads0, [thread_cpu_seconds(p) for p in pids])
        for profiler in profilers:
            await asyncio.to_thread(profiler.wait)
        commands = int((await redis.info("stats"))["total_commands_processed"]) - commands0
        redis_cpu = await _redis_cpu(redis) - redis_cpu0
        by_command = collections.Counter(await _command_calls(redis))
        memory_after_load = (
            int((await redis.info("memory"))["used_memory"]) - memory_before
        ) / tables
        by_command.subtract(by_command0)
        service_clients = await _service_clients(redis)
        connections_load = len(service_clients)
        clients = collections.Counter(
            (c.get("cmd"), int(c.get("sub", 0)) > 0) for c in service_clients
        )
        reports = []
        for gen in generators:
            assert gen.stdout is not None
            while True:
                line = await asyncio.to_thread(gen.stdout.readline)
                if not line:
                    raise SystemExit("a generator ended without a report")
                if line.startswith("REPORT "):
                    reports.append(json.loads(line[7:]))
                    break
        gc_after = [_metrics(m) for _, m in services]
        sample_ids = [t for r in reports for t in r["tables"]][:20]
        key_bytes = []
        parts = ("state", "events", "requests", "outbox", "balances")
        by_part = dict.fromkeys(parts, 0)
        for table_id in sample_ids:
            total = 0
            for part in parts:
                used = int(await redis.memory_usage(f"kishpa:table:{{{table_id}}}:{part}") or 0)
                by_part[part] += used
                total += used
            key_bytes.append(total)
        latencies = [x for r in reports for x in r["latencies"]]
        fanout = [x for r in reports for x in r["fanout"]]
        actions = sum(r["actions"] for r in reports)
        errors = [e for r in reports for e in r["errors"]]
        gen_cpu = sum(r["cpu_s"] for r in reports)
        watchers = 4 * tables
        print(
            f"\n== {tables} tables x 4 watchers = {watchers}, {args.processes} service "
            f"process(es){' (table affinity)' if args.affinity else ''}"
            f"{', one event per message' if args.unbatched else ', batched events'}, "
            f"{args.generators} generator(s), load {args.seconds:.0f} s, "
            f"idle {args.idle_seconds:.0f} s; load average {os.getloadavg()[0]:.1f}"
        )
        print(f"baseline redis PING p50/p99: {pct(pings, 0.5):.2f} / {pct(pings, 0.99):.2f} ms")
        reads = sum(r["reads"] for r in reports)
        reopened = [e for r in reports for e in r["watch_errors"]]
        missed = [m for r in reports for m in r["missed"]]
        print(
            f"actions/s {actions / args.seconds:.0f} (target {tables / PERIOD_S:.0f}); "
            f"errors {len(errors)} {sorted(set(errors))}; GetTable reads per action "
            f"{reads / max(1, actions):.2f}; watch streams re-opened {len(reopened)} "
            f"{collections.Counter(reopened).most_common(3)}"
        )
        print(
            f"exactly once: {sum(r['checked'] for r in reports)} watchers replayed from their "
            f"start, {len(missed)} missed events ({sum(missed)} in all)"
        )
        a50, a99 = pct(latencies, 0.5), pct(latencies, 0.99)
        f50, f99 = pct(fanout, 0.5), pct(fanout, 0.99)
        print(
            f"action p50/p99 {a50:.1f} / {a99:.1f} ms (x{a99 / pct(pings, 0.99):.0f} PING p99); "
            f"fan-out p50/p99 {f50:.1f} / {f99:.1f} ms over "
            f"{sum(r['fanout_count'] for r in reports)} deliveries in "
            f"{sum(r['messages'] for r in reports)} stream messages "
            f"({sum(r['messages'] for r in reports) / max(1, actions):.1f} per action)"
        )
        # Per action the service committed in the window: one that cannot keep up finishes
        # the generators' actions after it, and its CPU then would be spread over actions
        # it has not done yet.
        per_action = load_cpu / max(1, committed)
        print(
            f"actions committed by the service in the load window: {committed} "
            f"({committed / max(1, actions):.2f} of the actions made)"
        )
        print(
            f"service CPU: load {100 * load_cpu / args.seconds:.0f}% of a core, "
            f"{1000 * per_action:.2f} ms per action committed; idle "
            f"{100 * idle_cpu / args.idle_seconds:.2f}% of a core with the watchers, "
            f"{100 * base_cpu / args.idle_seconds:.2f}% without = "
            f"{100 * max(0.0, idle_cpu - base_cpu) / args.idle_seconds / watchers:.5f}% "
            "per idle watcher"
        )
        print(
            "service CPU per action by thread: "
            + ", ".join(
                f"{name} {1000 * cpu / max(1, committed):.2f} ms"
                for name, cpu in sorted(by_thread.items(), key=lambda kv: -kv[1])
                if cpu > 0
            )
        )
        gc_cpu = _gc_cpu(gc_before, gc_after)
        print(
            f"GC CPU during the load: {1000 * gc_cpu / max(1, committed):.3f} ms per action "
            f"({100 * gc_cpu / max(1e-9, load_cpu):.1f}% of the service's CPU)"
        )
        print(f"generators' CPU (apart): {100 * gen_cpu / args.seconds:.0f}% of a core")
        print(
            f"redis connections: idle {connections}, load {connections_load} "
            f"({connections_load / args.processes:.0f} per process); by last command: "
            + ", ".join(
                f"{cmd}{' (pub/sub)' if sub else ''} x{n}"
                for (cmd, sub), n in clients.most_common(6)
            )
        )
        print(
            f"redis memory per table: {memory_per_table / 1024:.1f} KiB (used_memory growth / N, "
            f"dealt, before the load), {memory_after_load / 1024:.1f} KiB after the load; "
            f"the table's own keys after the load "
            f"{sum(key_bytes) / max(1, len(key_bytes)) / 1024:.1f} KiB"
        )
        print(
            "  of which "
            + ", ".join(
                f"{part} {n / max(1, len(key_bytes)) / 1024:.1f} KiB" for part, n in by_part.items()
            )
        )
        print(f"GC of the service during the load: {_gc_summary(gc_before, gc_after)}")
        print(
            "actions inside the service (handler start to end): "
            + _handling_p99(gc_before, gc_after)
        )
        print(f"actions on a kept state (no read first): {_kept_summary(gc_before, gc_after)}")
        print(
            f"redis commands per action: {commands / max(1, committed):.2f} (those run inside "
            "scripts included); by command: "
            + ", ".join(
                f"{name} {n / max(1, committed):.2f}"
                for name, n in by_command.most_common(8)
                if n > 0
            )
        )
        print(f"redis CPU per action: {1000 * redis_cpu / max(1, committed):.3f} ms")
        if args.json:
            # The per-unit costs benchmarks/capacity_model.py turns into fleet sizes.
            _append_json(
                Path(args.json),
                {
                    "bench": "capacity",
                    "tables": tables,
                    "watchers": watchers,
                    "processes": args.processes,
                    "batched": not args.unbatched,
                    "seconds": args.seconds,
                    "load_average": os.getloadavg()[0],
                    "actions_per_s": actions / args.seconds,
                    "action_p50_ms": a50,
                    "action_p99_ms": a99,
                    "fanout_p99_ms": f99,
                    "cpu_ms_per_action": 1000 * per_action,
                    "actions_committed_in_window": committed,
                    "cpu_ms_per_action_by_thread": {
                        name: 1000 * cpu / max(1, committed) for name, cpu in by_thread.items()
                    },
                    "gc_cpu_ms_per_action": 1000 * gc_cpu / max(1, committed),
                    "service_cpu_cores": load_cpu / args.seconds,
                    "idle_cpu_cores_per_watcher": max(0.0, idle_cpu - base_cpu)
                    / args.idle_seconds
                    / watchers,
                    "redis_bytes_per_table": memory_per_table,
                    "redis_bytes_per_table_after_load": memory_after_load,
                    "redis_key_bytes_per_table": sum(key_bytes) / max(1, len(key_bytes)),
                    "redis_commands_per_action": commands / max(1, committed),
                    "redis_cpu_ms_per_action": 1000 * redis_cpu / max(1, committed),
                    "redis_connections_per_process": connections_load / args.processes,
                    "errors": len(errors),
                },
            )
    finally:
        for gen in generators:
            gen.kill()
            gen.wait()
        for process, _ in services:
            process.terminate()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
        await redis.aclose()
        stop_redis(redis_server)


def _committed(before: list[dict[str, float]], after: list[dict[str, float]]) -> int:
    """Commits the service processes made between two scrapes."""
    name = 'kishpa_table_commits_total{outcome="committed"}'
    return int(sum(a.get(name, 0.0) - b.get(name, 0.0) for b, a in zip(before, after, strict=True)))


async def _redis_cpu(redis: Redis) -> float:
    """CPU seconds the Redis server has used (INFO cpu: its main thread and the others)."""
    cpu = await redis.info("cpu")
    return float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"])


async def _command_calls(redis: Redis) -> dict[str, int]:
    """Calls of each Redis command so far (INFO commandstats; a script's own calls count)."""
    stats = await redis.info("commandstats")
    return {
        name.removeprefix("cmdstat_"): int(value["calls"])
        for name, value in stats.items()
        if isinstance(value, dict)
    }


def _profile(args: argparse.Namespace, pids: list[int]) -> list[subprocess.Popen[bytes]]:
    """py-spy on each service process for the load window (``--profile``): its collapsed
    stacks, native frames included, go to ``<profile>.<n>.txt`` for
    ``benchmarks/profile_parts.py``."""
    if not args.profile:
        return []
    spy = Path(sys.executable).with_name("py-spy")
    return [
        subprocess.Popen(
            [
                str(spy),
                "record",
                "--pid",
                str(pid),
                "--duration",
                str(int(args.seconds)),
                "--rate",
                str(args.profile_rate),
                "--format",
                "raw",
                "--native",
                "--threads",
                "--nolineno",
                "--output",
                f"{args.profile}.{n}.txt",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for n, pid in enumerate(pids)
    ]


def _thread_deltas(
    before: list[dict[str, float]], after: list[dict[str, float]]
) -> dict[str, float]:
    """CPU of the load window by kind of thread, summed over the service processes."""
    out: dict[str, float] = collections.defaultdict(float)
    for b, a in zip(before, after, strict=True):
        for name, value in a.items():
            out[name] += value - b.get(name, 0.0)
    return dict(out)


def _gc_cpu(before: list[dict[str, float]], after: list[dict[str, float]]) -> float:
    """CPU the service's collections took during the load window (0 from a service that
    does not report it)."""
    name = "kishpa_table_gc_cpu_seconds_total"
    return sum(a.get(name, 0.0) - b.get(name, 0.0) for b, a in zip(before, after, strict=True))


def _append_json(path: Path, record: dict[str, Any]) -> None:
    """Add one step's figures to the JSON list in ``path`` (created if missing)."""
    records = json.loads(path.read_text()) if path.exists() else []
    records.append(record)
    path.write_text(json.dumps(records, indent=1) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    # Modest defaults (make bench); the issue's ramp: --steps 250,500,1000,2000 --seconds 45.
    parser.add_argument("--steps", default="100,250")
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--idle-seconds", type=float, default=10.0)
    parser.add_argument("--processes", type=int, default=1)
    parser.add_argument("--generators", type=int, default=2)
    parser.add_argument(
        "--affinity",
        action="store_true",
        help="route all of a table's players to one process (default: spread over them)",
    )
    parser.add_argument(
        "--unbatched",
        action="store_true",
        help="watch one event per message (clients that do not ask for batched events)",
    )
    parser.add_argument(
        "--json", default="", help="append each step's per-unit costs to this JSON file"
    )
    parser.add_argument(
        "--profile",
        default="",
        help="profile each service process during the load with py-spy (installed apart): "
        "collapsed stacks to <PROFILE>.<n>.txt, for benchmarks/profile_parts.py",
    )
    parser.add_argument("--profile-rate", type=int, default=100, help="py-spy samples/s")
    parser.add_argument("--generator", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--tables", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--offset", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--addresses", default="", help=argparse.SUPPRESS)
    parser.add_argument("--secret", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.generator:
        asyncio.run(generate(args))
        return
    for n in (int(x) for x in args.steps.split(",")):
        asyncio.run(step(args, n))


if __name__ == "__main__":
    main()
