"""Wallet throughput: 4-posting ApplyBatch calls through the real gRPC server.

For PostgreSQL (a scratch database created and dropped here) and SQLite (a temp file), it
starts ``kishpa serve wallet`` as a separate process, drives it with concurrent clients, and
reports batches/s with p50/p99 latency. The baseline, measured in the same run on the same
database, is a plain single-row INSERT per transaction from as many threads: the cost of one
durable commit, which every batch also pays.

Usage: .venv/bin/python benchmarks/bench_wallet.py [--batches N] [--concurrency C]
[--through-bank] [--only postgres|sqlite]

``--through-bank`` adds a fifth posting to every batch, 1 token from the bank to the winner,
so every batch updates the single ``bank`` row (the worst case of automatic bank loads).

``--compare-engines`` instead measures the ledger in-process on PostgreSQL, driven from an
event loop two ways: the sync engine on a 16-thread pool (what the server does) and
SQLAlchemy's asyncio engine (psycopg async, the same transaction code through ``run_sync``).
The asyncio engine needs ``greenlet``, which is not a project dependency: install it
somewhere and put it on PYTHONPATH for that run.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # benchmarks/ and devkit/ run from the tree

import grpc  # noqa: E402
from sqlalchemy import text  # noqa: E402

from benchmarks._common import cpu_seconds, free_port, pct, wait_serving  # noqa: E402
from devkit.postgres import temporary_postgres_database  # noqa: E402
from kishpa.wallet.v1 import wallet_pb2, wallet_pb2_grpc  # noqa: E402
from services.common.auth import TokenAuthority, bearer_metadata  # noqa: E402
from services.wallet.batch import Posting, body_hash, touched_accounts, validate_batch  # noqa: E402
from services.wallet.database import create_wallet_engine  # noqa: E402
from services.wallet.ledger import BatchResult, Ledger  # noqa: E402
from services.wallet.migrate import upgrade  # noqa: E402
from services.wallet.reconcile import reconcile_url  # noqa: E402

ADMIN_URL = os.environ.get("TEST_DATABASE_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
TOKEN_SECRET = "bench-token-secret-" + "x" * 32
SERVICE_SECRET = "bench-service-secret-" + "y" * 32
KISHPA = str(Path(sys.executable).parent / "kishpa")
TABLES = 50


class Result:
    """Throughput and latency of one measurement."""

    def __init__(self, count: int, seconds: float, latencies: list[float]) -> None:
        self.count = count
        self.server_cpu_ms = 0.0
        self.rate = count / seconds
        self.p50_ms = pct(latencies, 0.50) * 1000
        self.p99_ms = pct(latencies, 0.99) * 1000

    def __str__(self) -> str:
        cpu = f"  server CPU {self.server_cpu_ms:.2f} ms each" if self.server_cpu_ms else ""
        return f"{self.rate:8.0f}/s  p50 {self.p50_ms:6.1f} ms  p99 {self.p99_ms:6.1f} ms{cpu}"


def insert_baseline(url: str, count: int, threads: int) -> Result:
    """One-row INSERT, one transaction each, from ``threads`` threads."""
    engine = create_wallet_engine(url, pool_size=threads)
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE IF NOT EXISTS bench_baseline (id INTEGER, v BIGINT)"))
    latencies: list[float] = []
    lock = threading.Lock()
    per_thread = count // threads

    def work(n: int) -> None:
        mine = []
        for i in range(per_thread):
            start = time.perf_counter()
            with engine.begin() as conn:
                conn.execute(
                    text("INSERT INTO bench_baseline (id, v) VALUES (:i, :v)"), {"i": n, "v": i}
                )
            mine.append(time.perf_counter() - start)
        with lock:
            latencies.extend(mine)

    workers = [threading.Thread(target=work, args=(n,)) for n in range(threads)]
    began = time.perf_counter()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    elapsed = time.perf_counter() - began
    engine.dispose()
    return Result(len(latencies), elapsed, latencies)


async def grpc_batches(
    port: int, count: int, concurrency: int, bank: bool = False, per_call: int = 1
) -> Result:
    """``count`` 4-posting batches (3 losers pay the winner, 1 bowl contribution), plus one
    from the bank to the winner with ``bank``; ``per_call`` > 1 sends them that many a call
    through ApplyBatches (latencies are then per call)."""
    md = bearer_metadata(
        TokenAuthority(TOKEN_SECRET, SERVICE_SECRET).issue_service_token("worker").token
    )
    channels = [grpc.aio.insecure_channel(f"127.0.0.1:{port}") for _ in range(4)]
    stubs = [wallet_pb2_grpc.WalletServiceStub(c) for c in channels]
    players = [[f"b{t}x{s}" for s in range(4)] for t in range(TABLES)]
    await asyncio.gather(
        *(
            stubs[0].OpenWallet(wallet_pb2.OpenWalletRequest(player_id=p), metadata=md)
            for t in players
            for p in t
        )
    )
    latencies: list[float] = []
    per_client = count // concurrency
    run = os.urandom(4).hex()

    applied: list[int] = []

    async def client(n: int) -> None:
        pending: list[wallet_pb2.ApplyBatchRequest] = []
        rng = random.Random(n)
        stub = stubs[n % len(stubs)]
        for i in range(per_client):
            table = rng.randrange(TABLES)
            seats = players[table]
            winner = rng.choice(seats)
            postings = [
                wallet_pb2.Posting(
                    from_account=f"player:{p}",
                    to_account=f"player:{winner}",
                    amount=2,
                    reason=wallet_pb2.TRANSFER_REASON_WIN,
                    table_id=f"bt{table}",
                    round=i + 1,
                    phase="end",
                )
                for p in seats
                if p != winner
            ]
            postings.append(
                wallet_pb2.Posting(
                    from_account=f"player:{winner}",
                    to_account=f"bowl:bt{table}",
                    amount=1,
                    reason=wallet_pb2.TRANSFER_REASON_BOWL_CONTRIBUTION,
                    table_id=f"bt{table}",
                    round=i + 1,
                    phase="end",
                )
            )
            if bank:
                postings.append(
                    wallet_pb2.Posting(
                        from_account="bank",
                        to_account=f"player:{winner}",
                        amount=1,
                        reason=wallet_pb2.TRANSFER_REASON_BANK_LOAD,
                        table_id=f"bt{table}",
                        round=i + 1,
                        phase="end",
                    )
                )
            request = wallet_pb2.ApplyBatchRequest(
                request_id=f"bench:{run}:{n}:{i}", postings=postings
            )
            if per_call > 1:
                pending.append(request)
                if len(pending) < per_call and i < per_client - 1:
                    continue
                start = time.perf_counter()
                reply = await stub.ApplyBatches(
                    wallet_pb2.ApplyBatchesRequest(batches=pending), metadata=md
                )
                latencies.append(time.perf_counter() - start)
                if any(o.HasField("refusal") for o in reply.outcomes):
                    raise RuntimeError("a benchmark batch was refused")
                applied.append(len(pending))
                pending.clear()
                continue
            start = time.perf_counter()
            await stub.ApplyBatch(request, metadata=md)
            latencies.append(time.perf_counter() - start)
            applied.append(1)

    began = time.perf_counter()
    await asyncio.gather(*(client(n) for n in range(concurrency)))
    elapsed = time.perf_counter() - began
    for c in channels:
        await c.close()
    return Result(sum(applied), elapsed, latencies)


def serve_and_measure(
    url: str,
    count: int,
    concurrency: int,
    bank: bool = False,
    group_commit: int = 64,
    per_call: int = 1,
) -> Result:
    """Start ``kishpa serve wallet`` on ``url`` and measure batches through it
    (``group_commit``: its KISHPA_WALLET_GROUP_COMMIT, 0 = one transaction a batch)."""
    port = free_port()
    env = {
        **os.environ,
        "KISHPA_WALLET_GROUP_COMMIT": str(group_commit),
        "DATABASE_URL": url,
        "KISHPA_GRPC_HOST": "127.0.0.1",
        "KISHPA_GRPC_PORT": str(port),
        "KISHPA_METRICS_PORT": str(free_port()),
        "KISHPA_TOKEN_SECRET": TOKEN_SECRET,
        "KISHPA_SERVICE_SECRET": SERVICE_SECRET,
        "KISHPA_LOG_FORMAT": "json",
        "KISHPA_LOG_LEVEL": "WARNING",
    }
    proc = subprocess.Popen([KISHPA, "serve", "wallet"], env=env, stdout=subprocess.DEVNULL)
    try:

        async def go() -> Result:
            await wait_serving(f"127.0.0.1:{port}", proc, "the wallet server")
            await grpc_batches(port, concurrency * 5, concurrency, bank)  # warm-up
            cpu = cpu_seconds(proc.pid)
            result = await grpc_batches(port, count, concurrency, bank, per_call)
            result.server_cpu_ms = (cpu_seconds(proc.pid) - cpu) * 1000 / result.count
            return result

        return asyncio.run(go())
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)


def measure(
    name: str,
    url: str,
    count: int,
    concurrency: int,
    say: Callable[[str], None],
    bank: bool = False,
    rounds: int = 1,
    per_call: int = 32,
) -> None:
    """Baseline, then batches one transaction each and with group commit, alternating for
    ``rounds`` rounds, then a reconciliation proving the runs left the ledger whole."""
    upgrade(url)
    postings = 5 if bank else 4
    for n in range(rounds):
        base = insert_baseline(url, count, threads=16)
        alone = serve_and_measure(url, count, concurrency, bank, group_commit=0)
        grouped = serve_and_measure(url, count, concurrency, bank, group_commit=64)
        many = serve_and_measure(url, count, concurrency // 4, bank, per_call=per_call)
        load = os.getloadavg()[0]
        say(f"{name:10s} round {n + 1} (load {load:.1f}) single-row INSERT baseline  {base}")
        say(
            f"{name:10s} ApplyBatch ({postings} postings), one transaction each  {alone}   "
            f"= {alone.rate / base.rate:.2f}x baseline"
        )
        say(
            f"{name:10s} ApplyBatch ({postings} postings), group commit          {grouped}   "
            f"= {grouped.rate / base.rate:.2f}x baseline, {grouped.rate / alone.rate:.2f}x alone"
        )
        say(
            f"{name:10s} ApplyBatches, {per_call} batches a call ({concurrency // 4} clients)  "
            f"{many}   = {many.rate / base.rate:.2f}x baseline, {many.rate / alone.rate:.2f}x alone"
        )
    report = reconcile_url(url)
    say(
        f"{name:10s} reconcile after the runs: {'OK' if report.ok else 'FAILED'} "
        f"({report.batches} batches)"
    )


def _ledger_postings(i: int) -> list[Posting]:
    table, winner = i % TABLES, i % 4
    seats = [f"player:e{table}x{s}" for s in range(4)]
    out = [
        Posting(p, seats[winner], 2, "win", f"et{table}", i + 1, "end")
        for p in seats
        if p != seats[winner]
    ]
    out.append(Posting(seats[winner], f"bowl:et{table}", 1, "bowl_contribution", f"et{table}"))
    return out


async def compare_engines(url: str, count: int, concurrency: int) -> None:
    """In-process ledger: sync engine on a thread pool vs the asyncio engine."""
    from sqlalchemy.ext.asyncio import create_async_engine

    engine = create_wallet_engine(url, pool_size=16)
    ledger = Ledger(engine)
    for t in range(TABLES):
        for s in range(4):
            ledger.open_wallet(f"e{t}x{s}")
    aengine = create_async_engine(url, pool_size=16, max_overflow=16)
    executor = ThreadPoolExecutor(16)
    loop = asyncio.get_running_loop()

    async def threaded(run: str, n: int) -> None:
        for i in range(n, count, concurrency):
            await loop.run_in_executor(
                executor, ledger.apply_batch, f"{run}:{i}", _ledger_postings(i)
            )

    async def asynchronous(run: str, n: int) -> None:
        for i in range(n, count, concurrency):
            postings, key = _ledger_postings(i), f"{run}:{i}"
            validate_batch(key, postings)
            async with aengine.begin() as conn:
                await conn.run_sync(
                    ledger._apply_locked,
                    key,
                    body_hash(postings),
                    postings,
                    touched_accounts(postings),
                    set(),  # the warm-up created every account
                )

    await asyncio.gather(*(threaded("warm", n) for n in range(concurrency)))
    for round_no in range(2):
        for name, worker in (("thread pool", threaded), ("asyncio", asynchronous)):
            cpu, began = time.process_time(), time.perf_counter()
            await asyncio.gather(*(worker(f"{name}{round_no}", n) for n in range(concurrency)))
            wall, cpu = time.perf_counter() - began, time.process_time() - cpu
            print(
                f"ledger on {name:11s} {count / wall:6.0f} batches/s  "
                f"CPU {cpu / count * 1000:.2f} ms/batch  (load {os.getloadavg()[0]:.1f})"
            )
    executor.shutdown()
    await aengine.dispose()
    engine.dispose()


def in_process(url: str, count: int, threads: int, group: int, rounds: int) -> None:
    """The ledger without gRPC: ``threads`` threads apply 4-posting batches one transaction
    each (``Ledger.apply_batch``) or ``group`` to a transaction (``Ledger.apply_group``),
    alternating, beside the single-row INSERT baseline; the database path's own ceiling."""
    upgrade(url)
    engine = create_wallet_engine(url, pool_size=threads)
    ledger = Ledger(engine)
    for t in range(TABLES):
        for s in range(4):
            ledger.open_wallet(f"e{t}x{s}")
        ledger.apply_batch(f"seed:{t}", _ledger_postings(t))  # creates the table's bowl
    run = os.urandom(4).hex()

    def alone(name: str, n: int) -> None:
        for i in range(n, count, threads):
            ledger.apply_batch(f"{run}:{name}:{i}", _ledger_postings(i))

    def grouped(name: str, n: int) -> None:
        mine = list(range(n, count, threads))
        for at in range(0, len(mine), group):
            batch = [(f"{run}:{name}:{i}", _ledger_postings(i)) for i in mine[at : at + group]]
            if not all(isinstance(o, BatchResult) for o in ledger.apply_group(batch)):
                raise RuntimeError("a benchmark batch was refused")

    def timed(name: str, work: Callable[[str, int], None]) -> float:
        began = time.perf_counter()
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(lambda n: work(name, n), range(threads)))
        return count / (time.perf_counter() - began)

    for r in range(rounds):
        base = insert_baseline(url, count, threads=threads).rate
        one = timed(f"alone{r}", alone)
        many = timed(f"group{r}", grouped)
        print(
            f"in-process round {r + 1} (load {os.getloadavg()[0]:.1f}): INSERT baseline "
            f"{base:.0f}/s; apply_batch {one:.0f}/s ({one / base:.2f}x); apply_group x{group} "
            f"{many:.0f}/s ({many / base:.2f}x baseline, {many / one:.2f}x apply_batch)"
        )
    report = reconcile_url(url)
    print(f"reconcile after the runs: {'OK' if report.ok else 'FAILED'} ({report.batches} batches)")
    engine.dispose()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=3000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--compare-engines", action="store_true")
    parser.add_argument("--through-bank", action="store_true")
    parser.add_argument("--only", choices=["postgres", "sqlite"])
    parser.add_argument("--rounds", type=int, default=1, help="alternations of the variants")
    parser.add_argument("--per-call", type=int, default=32, help="batches per ApplyBatches")
    parser.add_argument(
        "--in-process", action="store_true", help="the ledger without gRPC, on PostgreSQL"
    )
    args = parser.parse_args()
    if args.in_process:
        with temporary_postgres_database(ADMIN_URL, prefix="kishpa_bench") as url:
            in_process(url, args.batches, 16, args.per_call, args.rounds)
        return 0
    if args.compare_engines:
        with temporary_postgres_database(ADMIN_URL, prefix="kishpa_bench") as url:
            upgrade(url)
            asyncio.run(compare_engines(url, args.batches, args.concurrency))
        return 0
    print(
        f"wallet bench: {args.batches} batches, {args.concurrency} concurrent clients, "
        f"{os.cpu_count()} CPUs"
    )
    bank = args.through_bank
    if args.only != "sqlite":
        with temporary_postgres_database(ADMIN_URL, prefix="kishpa_bench") as url:
            measure(
                "postgres",
                url,
                args.batches,
                args.concurrency,
                print,
                bank,
                args.rounds,
                args.per_call,
            )
    if args.only != "postgres":
        with tempfile.TemporaryDirectory() as tmp:
            url = f"sqlite:///{tmp}/wallet.sqlite3"
            measure(
                "sqlite",
                url,
                args.batches,
                args.concurrency,
                print,
                bank,
                args.rounds,
                args.per_call,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
