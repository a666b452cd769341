"""Settlement throughput and latency: round end -> balances updated, through real processes.

Starts a wallet (``kishpa serve wallet`` on a temporary SQLite file, or on a fresh PostgreSQL
database with ``--postgres``) and one ``kishpa worker``, on a Redis database of its own and a
unique queue. Then, in one run:

1. baseline: the same start-phase batch applied directly with ``ApplyBatch`` (sequential);
2. paced: ``--rate`` round phases per second for ``--seconds``: each writes its outbox
   record and enqueues ``kishpa.settle_phase`` exactly as the table service does; latency is
   ``settled_ms - created_ms`` (round end to balances written and ``settled`` published);
3. burst: ``--burst`` phases enqueued at once; settlements per second until the last lands.

``--chaos`` measures settlement lag under worker kills instead, on a redis-server of its own
(free port; a sweeper must run, and must not sweep anybody else's tables) with ``kishpa
beat`` and the shipped worker defaults: rounds (a start, then its end 0.4 s later) at
``--rate`` phases per second for ``--seconds``, first with the worker left alone (the
baseline of the same run), then with the worker SIGKILLed every ``--kill-every`` seconds and
started again 0.5 s later. Lag is ``settled_ms - created_ms`` of every phase; "worker-up
lag" counts only the time a ready worker existed.

Usage: ``.venv/bin/python benchmarks/bench_settlement.py [--rate 50] [--seconds 10]``
       ``.venv/bin/python benchmarks/bench_settlement.py --chaos [--rate 20] [--seconds 40]``
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # benchmarks/ and devkit/ run from the tree

import redis  # noqa: E402
from celery import Celery  # noqa: E402

from benchmarks._common import free_port  # noqa: E402
from devkit.phase_samples import phase_entry, round_record  # noqa: E402
from services.common.auth import ServiceCredentials, TokenAuthority  # noqa: E402
from services.common.settings import Settings  # noqa: E402
from shared import keys  # noqa: E402
from shared.phase_record import PhaseRef, parse_phase_record  # noqa: E402
from workers.celery_app import create_app  # noqa: E402
from workers.config import WorkerConfig  # noqa: E402
from workers.outbox import index_unsettled  # noqa: E402
from workers.settlement import compute_postings  # noqa: E402
from workers.wallet_client import WalletClient  # noqa: E402

KISHPA = str(Path(sys.executable).with_name("kishpa"))
SECRET = secrets.token_urlsafe(48)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _wait(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.02)
    raise RuntimeError(f"timed out waiting for {what}")


@contextmanager
def _postgres_database(base_url: str) -> Iterator[str]:
    """A fresh PostgreSQL database for the run, dropped afterwards."""
    import psycopg

    name = f"kishpa_bench_{uuid.uuid4().hex[:10]}"
    admin = base_url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield base_url.rsplit("/", 1)[0] + "/" + name
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextmanager
def _process(argv: list[str], env: dict[str, str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    with log.open("ab") as out:
        child = subprocess.Popen(
            argv, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=log.parent
        )
    try:
        yield child
    finally:
        if child.poll() is None:
            child.send_signal(signal.SIGTERM)
            try:
                child.wait(timeout=15)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=50.0, help="round phases per second")
    parser.add_argument("--seconds", type=float, default=10.0, help="length of the paced run")
    parser.add_argument("--burst", type=int, default=400, help="phases enqueued at once")
    parser.add_argument("--baseline", type=int, default=300, help="direct ApplyBatch calls")
    parser.add_argument("--concurrency", type=int, default=8, help="worker threads")
    parser.add_argument(
        "--redis-url",
        default=os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/13"),
        help="Redis for broker and tables (a database of its own)",
    )
    parser.add_argument(
        "--postgres",
        nargs="?",
        const=os.environ.get(
            "TEST_DATABASE_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
        ),
        default=None,
        help="run the wallet on a fresh PostgreSQL database (default: SQLite)",
    )
    parser.add_argument(
        "--chaos", action="store_true", help="lag under worker kills (see the docstring)"
    )
    parser.add_argument("--kill-every", type=float, default=5.0, help="chaos: seconds per kill")
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="bench-settlement-"))
    try:
        if args.chaos:
            return _chaos(args, tmp, f"sqlite:///{tmp / 'wallet.sqlite3'}")
        if args.postgres:
            with _postgres_database(args.postgres) as url:
                return _run(args, tmp, url)
        return _run(args, tmp, f"sqlite:///{tmp / 'wallet.sqlite3'}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _run(args: argparse.Namespace, tmp: Path, database_url: str) -> int:
    queue = f"bench-{uuid.uuid4().hex[:10]}"
    wallet_port = free_port()
    base = {k: v for k, v in os.environ.items() if not k.startswith(("KISHPA_", "REDIS_"))}
    base.update(
        REDIS_URL=args.redis_url,
        KISHPA_BROKER_URL=args.redis_url,
        KISHPA_SERVICE_SECRET=SECRET,
        KISHPA_TOKEN_SECRET=secrets.token_urlsafe(48),
        KISHPA_LOG_FORMAT="json",
        KISHPA_LOG_LEVEL="WARNING",
        DATABASE_URL=database_url,
        KISHPA_RECONCILE_INTERVAL="0",
    )
    if not database_url.startswith("sqlite"):
        subprocess.run([KISHPA, "migrate"], env=base, check=True, capture_output=True)
    wallet_env = dict(
        base,
        KISHPA_GRPC_PORT=str(wallet_port),
        KISHPA_GRPC_HOST="127.0.0.1",
        KISHPA_METRICS_PORT=str(free_port()),
    )
    worker_env = dict(
        base,
        KISHPA_WALLET_ADDR=f"127.0.0.1:{wallet_port}",
        KISHPA_WORKER_QUEUE=queue,
        KISHPA_METRICS_PORT=str(free_port()),
    )
    client = redis.Redis.from_url(args.redis_url)
    tables: list[str] = []
    with (
        _process([KISHPA, "serve", "wallet"], wallet_env, tmp / "wallet.log"),
        _process(
            [KISHPA, "worker", f"--concurrency={args.concurrency}"], worker_env, tmp / "worker.log"
        ),
    ):
        wallet = WalletClient(
            f"127.0.0.1:{wallet_port}", ServiceCredentials(TokenAuthority(None, SECRET), "worker")
        )
        _wait(_wallet_ready(wallet), 30, "the wallet")
        sender = create_app(
            WorkerConfig(settings=Settings(service="worker", redis_url=args.redis_url), queue=queue)
        )
        players = [f"bench-{uuid.uuid4().hex[:8]}-{i}" for i in range(200)]
        wallet.open_wallets(players)

        def new_round() -> PhaseRef:
            table = f"bench-{uuid.uuid4().hex[:12]}"
            tables.append(table)
            start = (len(tables) * 4) % len(players)
            seated = [players[(start + i) % len(players)] for i in range(4)]
            created = _now_ms()
            entry = phase_entry(table, 1, "start", round_record(seated), created)
            client.hset(keys.outbox(table), "1:start", entry)
            index_unsettled(client, table, created)  # as the table service's commit does
            sender.send_task(
                "kishpa.settle_phase",
                kwargs={"table_id": table, "round_no": 1, "phase": "start"},
                ignore_result=True,
            )
            return PhaseRef(table, 1, "start")

        try:
            # Warm the worker (imports, channels) before measuring.
            warm = [new_round() for _ in range(20)]
            _wait(lambda: _all_settled(client, warm), 60, "the warm-up")

            baseline = _baseline(wallet, players, args.baseline)

            paced: list[PhaseRef] = []
            interval = 1.0 / args.rate
            began = time.monotonic()
            for i in range(int(args.rate * args.seconds)):
                delay = began + i * interval - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                paced.append(new_round())
            _wait(lambda: _all_settled(client, paced), 120, "the paced run")
            paced_latency = _latencies(client, paced)

            burst_began = time.monotonic()
            burst = [new_round() for _ in range(args.burst)]
            _wait(lambda: _all_settled(client, burst), 300, "the burst")
            burst_seconds = time.monotonic() - burst_began
        finally:
            for table in tables:
                for key in (keys.outbox, keys.settled, keys.balances, keys.events):
                    client.delete(key(table))
                client.zrem(keys.unsettled(table), table)
            client.delete(queue, f"_kombu.binding.{queue}", f"_kombu.binding_permanent.{queue}")
            wallet.close()

    report = {
        "wallet": "postgresql" if not database_url.startswith("sqlite") else "sqlite",
        "worker_threads": args.concurrency,
        "baseline_apply_batch": {
            "calls": args.baseline,
            "per_second": round(baseline["per_second"], 1),
            "p50_ms": round(baseline["p50"], 2),
            "p99_ms": round(baseline["p99"], 2),
        },
        "paced": {
            "rate": args.rate,
            "settlements": len(paced),
            "p50_ms": _percentile(paced_latency, 0.50),
            "p99_ms": _percentile(paced_latency, 0.99),
            "max_ms": max(paced_latency),
            "p50_vs_baseline_p50": round(_percentile(paced_latency, 0.5) / baseline["p50"], 1),
        },
        "burst": {
            "settlements": args.burst,
            "per_second": round(args.burst / burst_seconds, 1),
            "vs_baseline_per_second": round(args.burst / burst_seconds / baseline["per_second"], 2),
        },
    }
    print(json.dumps(report, indent=2))
    return 0


def _wallet_ready(wallet: WalletClient) -> Callable[[], bool]:
    def ready() -> bool:
        try:
            wallet.balance("bank")
        except Exception:
            return False
        return True

    return ready


def _all_settled(client: redis.Redis, refs: list[PhaseRef]) -> bool:
    pipe = client.pipeline(transaction=False)
    for ref in refs:
        pipe.hexists(keys.settled(ref.table_id), keys.phase_field(ref.round_no, ref.phase))
    return all(pipe.execute())


def _latencies(client: redis.Redis, refs: list[PhaseRef]) -> list[float]:
    latencies = []
    for ref in refs:
        field = keys.phase_field(ref.round_no, ref.phase)
        settled = json.loads(client.hget(keys.settled(ref.table_id), field) or b"{}")
        record = parse_phase_record(client.hget(keys.outbox(ref.table_id), field) or b"{}")
        latencies.append(float(settled["settled_ms"] - record.created_ms))
    return latencies


def _baseline(wallet: WalletClient, players: list[str], calls: int) -> dict[str, float]:
    """Direct ApplyBatch of the same kind of batch (a 4-player start phase), sequentially."""
    timings = []
    for i in range(calls):
        table = f"bench-direct-{uuid.uuid4().hex[:12]}"
        seated = [players[(i * 4 + k) % len(players)] for k in range(4)]
        entry = parse_phase_record(phase_entry(table, 1, "start", round_record(seated), 0))
        postings = compute_postings(entry)
        t0 = time.perf_counter()
        wallet.apply_batch(f"kishpa:{table}:1:start", postings)
        timings.append((time.perf_counter() - t0) * 1000)
    return {
        "per_second": calls / (sum(timings) / 1000),
        "p50": statistics.median(timings),
        "p99": _percentile(timings, 0.99),
    }


# -- chaos mode -----------------------------------------------------------------------------

SHIPPED_DEFAULTS = {
    "KISHPA_VISIBILITY_TIMEOUT": "10",
    "KISHPA_SETTLE_DEADLINE": "5",
    "KISHPA_SWEEP_INTERVAL": "2",
}
END_AFTER_S = 0.4


class _Worker:
    """The one ``kishpa worker``, which the chaos run kills and starts again."""

    def __init__(self, args: argparse.Namespace, env: dict[str, str], log: Path) -> None:
        self.argv = [KISHPA, "worker", f"--concurrency={args.concurrency}"]
        self.env = env
        self.log = log
        self.process: subprocess.Popen[bytes] | None = None
        self.ready_ms = 0

    def start(self) -> None:
        before = self.log.read_text().count(" ready.") if self.log.exists() else 0
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                self.argv, env=self.env, stdout=out, stderr=subprocess.STDOUT, cwd=self.log.parent
            )
        _wait(lambda: self.log.read_text().count(" ready.") > before, 60, "a ready worker")
        self.ready_ms = _now_ms()

    def kill9(self) -> int:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()
        return _now_ms()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=30)


def _lags(values: list[float]) -> dict[str, float]:
    return {
        "p50_ms": round(_percentile(values, 0.50), 1),
        "p99_ms": round(_percentile(values, 0.99), 1),
        "max_ms": round(max(values), 1),
    }


def _chaos(args: argparse.Namespace, tmp: Path, database_url: str) -> int:
    from cli.embedded_redis import redis_server_binary, start_embedded_redis

    binary = "/usr/bin/redis-server" if Path("/usr/bin/redis-server").exists() else None
    redis_port = free_port()
    server = start_embedded_redis(
        tmp / "redis", redis_port, appendfsync="everysec", binary=binary or redis_server_binary()
    )
    url = f"redis://127.0.0.1:{redis_port}/0"
    queue = f"bench-{uuid.uuid4().hex[:10]}"
    wallet_port = free_port()
    base = {k: v for k, v in os.environ.items() if not k.startswith(("KISHPA_", "REDIS_"))}
    base.update(
        REDIS_URL=url,
        KISHPA_BROKER_URL=url,
        KISHPA_SERVICE_SECRET=SECRET,
        KISHPA_TOKEN_SECRET=secrets.token_urlsafe(48),
        KISHPA_LOG_FORMAT="json",
        KISHPA_LOG_LEVEL="INFO",
        DATABASE_URL=database_url,
        KISHPA_RECONCILE_INTERVAL="0",
        KISHPA_WORKER_QUEUE=queue,
        KISHPA_WALLET_ADDR=f"127.0.0.1:{wallet_port}",
        **SHIPPED_DEFAULTS,
    )
    wallet_env = dict(base, KISHPA_GRPC_PORT=str(wallet_port), KISHPA_GRPC_HOST="127.0.0.1")
    wallet_env["KISHPA_METRICS_PORT"] = str(free_port())
    worker = _Worker(args, dict(base, KISHPA_METRICS_PORT=str(free_port())), tmp / "worker.log")
    client = redis.Redis.from_url(url)
    try:
        with (
            _process([KISHPA, "serve", "wallet"], wallet_env, tmp / "wallet.log"),
            _process([KISHPA, "beat"], base, tmp / "beat.log"),
        ):
            wallet = WalletClient(
                f"127.0.0.1:{wallet_port}",
                ServiceCredentials(TokenAuthority(None, SECRET), "worker"),
            )
            _wait(_wallet_ready(wallet), 30, "the wallet")
            worker.start()
            sender = create_app(
                WorkerConfig(settings=Settings(service="worker", redis_url=url), queue=queue)
            )
            players = [f"bench-{uuid.uuid4().hex[:8]}-{i}" for i in range(200)]
            wallet.open_wallets(players)
            runs: dict[str, dict[str, Any]] = {}
            for name, kill in (("no_kills", False), ("kills", True)):
                runs[name] = _chaos_run(args, client, sender, worker, players, kill)
            wallet.close()
    finally:
        worker.stop()
        client.close()
        server.terminate()
        server.wait()
    base_p99 = runs["no_kills"]["lag"]["p99_ms"]
    report = {
        "mode": "chaos",
        "rate_phases_per_s": args.rate,
        "seconds": args.seconds,
        "kill_every_s": args.kill_every,
        "worker_threads": args.concurrency,
        **runs,
        "p99_kills_vs_no_kills": round(runs["kills"]["lag"]["p99_ms"] / max(base_p99, 1.0), 1),
    }
    print(json.dumps(report, indent=2))
    return 0


def _chaos_run(
    args: argparse.Namespace,
    client: redis.Redis,
    sender: Celery,
    worker: _Worker,
    players: list[str],
    kill: bool,
) -> dict[str, Any]:
    rounds = int(args.rate * args.seconds / 2)
    interval = 2.0 / args.rate
    schedule: list[tuple[float, str, str]] = []
    seats: dict[str, list[str]] = {}
    for i in range(rounds):
        table = f"bench-{uuid.uuid4().hex[:12]}"
        seats[table] = [players[(i * 4 + k) % len(players)] for k in range(4)]
        schedule += [(i * interval, table, "start"), (i * interval + END_AFTER_S, table, "end")]
    schedule.sort()
    up: list[tuple[int, int]] = []
    done = threading.Event()
    kills = 0

    def killer() -> None:
        nonlocal kills
        while not done.wait(args.kill_every):
            up.append((worker.ready_ms, worker.kill9()))
            kills += 1
            time.sleep(0.5)
            worker.start()

    thread = threading.Thread(target=killer, daemon=True)
    if kill:
        thread.start()
    refs: list[PhaseRef] = []
    began = time.monotonic()
    for at, table, phase in schedule:
        delay = began + at - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        record, written = round_record(seats[table]), _now_ms()
        client.hset(keys.outbox(table), f"1:{phase}", phase_entry(table, 1, phase, record, written))
        index_unsettled(client, table, written)  # as the table service's commit does
        sender.send_task(
            "kishpa.settle_phase",
            kwargs={"table_id": table, "round_no": 1, "phase": phase},
            ignore_result=True,
        )
        refs.append(PhaseRef(table, 1, phase))
    done.set()
    if kill:
        thread.join()
    _wait(lambda: _all_settled(client, refs), 180, "every phase to be settled")
    up.append((worker.ready_ms, _now_ms()))
    lags = _latencies(client, refs)
    created = {
        (r.table_id, r.phase): parse_phase_record(
            client.hget(keys.outbox(r.table_id), f"1:{r.phase}") or b"{}"
        ).created_ms
        for r in refs
    }
    up_lags = []
    for ref, lag in zip(refs, lags, strict=True):
        start = created[(ref.table_id, ref.phase)]
        end = start + int(lag)
        up_lags.append(float(sum(max(0, min(end, b) - max(start, a)) for a, b in up)))
    events = sum(client.xlen(keys.events(r.table_id)) for r in refs if r.phase == "end")
    for table in seats:
        for key in (keys.outbox, keys.settled, keys.balances, keys.events):
            client.delete(key(table))
        client.zrem(keys.unsettled(table), table)
    return {
        "phases": len(refs),
        "worker_kills": kills,
        "settled_events_per_phase": round(events / len(refs), 2),
        "lag": _lags(lags),
        "worker_up_lag": _lags(up_lags),
    }


if __name__ == "__main__":
    sys.exit(main())
