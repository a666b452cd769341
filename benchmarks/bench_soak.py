"""Soak: bot tables played for a long time through the real stack; do resources stay flat?

Starts a stack of its own (a redis-server with AOF, ``kishpa serve wallet`` on SQLite,
``kishpa serve table``, ``kishpa serve matchmaking``, ``kishpa worker --beat`` and the drift
check's own ``kishpa worker --drift``, every ``--drift-interval`` seconds) and keeps
``--tables`` bot tables playing for ``--minutes``: ``kishpa bots`` runs in waves, each wave
playing its tables for ``--rounds`` rounds to their close, the next wave starting at once, so
tables are created and closed all the time (what leaks per table shows). With
``--long-tables`` there is one wave instead: every table plays round after round for the
whole run and the bots are stopped at the end (what leaks per round shows, with no new
players arriving: the run whose Redis keys and memory can be flat). Every
``--sample-s`` seconds it records:

- RSS and open file descriptors of every service process (``/proc``);
- Redis keys (DBSIZE) and memory (``used_memory``);
- open WatchTable streams (the table service's ``kishpa_table_watchers``);
- mean RPC latency of the table service over the interval (its
  ``kishpa_grpc_server_handling_seconds`` sum and count).

After a warm-up (the first ``--warmup`` share of the samples) the **flatness check** compares
the mean of the first and the last quarter of the remaining samples: no series may grow by
more than ``--max-growth`` (5 %). Latency is reported, not checked (it follows the machine's
load). The curves go to an SVG (``--svg``, written by this script: matplotlib is not a
dependency) and the samples to JSON (``--json``).

    python benchmarks/bench_soak.py                       # short: 8 tables, 2 minutes
    python benchmarks/bench_soak.py --tables 200 --minutes 30 --svg docs/soak.svg
    python benchmarks/bench_soak.py --tables 200 --minutes 32 --long-tables --svg docs/soak-long.svg

Exit code 0 when flat, 1 when a series grew too much, 2 when bots failed (their log is kept).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis

KISHPA = str(Path(sys.executable).with_name("kishpa"))
SERIES_CHECKED = (
    "table_rss_mb",
    "matchmaking_rss_mb",
    "wallet_rss_mb",
    "worker_rss_mb",
    "drift_rss_mb",
    "table_fds",
    "matchmaking_fds",
    "wallet_fds",
    "worker_fds",
    "drift_fds",
    "redis_keys",
    "redis_memory_mb",
    "open_streams",
)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_port(port: int, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise RuntimeError(f"nothing listens on {port} after {timeout:.0f}s")


@dataclass
class Stack:
    """The processes of the soak, each with its output in ``tmp``."""

    tmp: Path
    redis_port: int = field(default_factory=free_port)
    ports: dict[str, int] = field(default_factory=dict)
    metrics: dict[str, int] = field(default_factory=dict)
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    finished_ttl_s: int = 60
    drift_interval_s: float = 300

    def start(self) -> Stack:
        redis_bin = shutil.which("redis-server") or "/usr/bin/redis-server"
        (self.tmp / "redis").mkdir()
        self._spawn(
            "redis",
            [
                redis_bin, "--bind", "127.0.0.1", "--port", str(self.redis_port),
                "--dir", str(self.tmp / "redis"), "--appendonly", "yes",
                "--appendfsync", "always", "--save", "",
            ],
            dict(os.environ),
        )  # fmt: skip
        wait_port(self.redis_port)
        url = f"redis://127.0.0.1:{self.redis_port}/0"
        self.ports = {n: free_port() for n in ("wallet", "table", "matchmaking")}
        self.env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("KISHPA_", "REDIS_"))},
            "REDIS_URL": url,
            "KISHPA_BROKER_URL": url,
            "KISHPA_SERVICE_SECRET": secrets.token_urlsafe(48),
            "KISHPA_TOKEN_SECRET": secrets.token_urlsafe(48),
            "DATABASE_URL": f"sqlite:///{self.tmp / 'wallet.sqlite3'}",
            "KISHPA_WALLET_ADDR": f"127.0.0.1:{self.ports['wallet']}",
            "KISHPA_TABLE_ADDR": f"127.0.0.1:{self.ports['table']}",
            "KISHPA_MATCHMAKING_ADDR": f"127.0.0.1:{self.ports['matchmaking']}",
            "KISHPA_LOG_LEVEL": "WARNING",
            "KISHPA_LOG_FORMAT": "json",
            "KISHPA_RECONCILE_INTERVAL": "0",
            # Closed tables are kept a day by default: the soak would only see them pile
            # up. Kept for a minute here, the keys reach their steady state in the warm-up.
            "KISHPA_FINISHED_TABLE_TTL_S": str(self.finished_ttl_s),
            "KISHPA_DRIFT_INTERVAL": str(self.drift_interval_s),
        }
        for name in ("wallet", "table", "matchmaking"):
            self.metrics[name] = free_port()
            env = dict(
                self.env,
                KISHPA_GRPC_PORT=str(self.ports[name]),
                KISHPA_GRPC_HOST="127.0.0.1",
                KISHPA_METRICS_PORT=str(self.metrics[name]),
            )
            self._spawn(name, [KISHPA, "serve", name], env)
            wait_port(self.ports[name])
        self.metrics["worker"] = free_port()
        worker_env = dict(self.env, KISHPA_METRICS_PORT=str(self.metrics["worker"]))
        self._spawn("worker", [KISHPA, "worker", "--beat", "--concurrency", "8"], worker_env)
        wait_port(self.metrics["worker"])
        self.metrics["drift"] = free_port()
        drift_env = dict(self.env, KISHPA_METRICS_PORT=str(self.metrics["drift"]))
        self._spawn("drift", [KISHPA, "worker", "--drift", "--concurrency", "1"], drift_env)
        wait_port(self.metrics["drift"])
        return self

    def _spawn(self, name: str, argv: list[str], env: dict[str, str]) -> None:
        with (self.tmp / f"{name}.log").open("ab") as out:
            self.processes[name] = subprocess.Popen(
                argv, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=self.tmp
            )

    def stop(self) -> None:
        for process in reversed(list(self.processes.values())):
            if process.poll() is None:
                process.terminate()
        for process in self.processes.values():
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()

    def bots(self, tables: int, rounds: int, timeout: float = 900) -> subprocess.Popen[bytes]:
        argv = [
            KISHPA, "bots", "--tables", str(tables), "--rounds", str(rounds),
            "--turn-seconds", "10", "--reveal-seconds", "1", "--pause-ms", "300",
            "--timeout", str(timeout),
        ]  # fmt: skip
        with (self.tmp / "bots.log").open("ab") as out:
            return subprocess.Popen(argv, env=self.env, stdout=out, stderr=subprocess.STDOUT)


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def _metrics(port: int) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    values: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("#") or " " not in line:
            continue
        name, _, value = line.rpartition(" ")
        base = name.split("{", 1)[0]
        try:
            values[base] = values.get(base, 0.0) + float(value)
        except ValueError:
            continue
    return values


def sample(stack: Stack, client: redis.Redis, previous: dict[str, float]) -> dict[str, float]:
    """One row of the soak's series (and the latency counters for the next interval)."""
    row: dict[str, float] = {"t": time.time()}
    for name in ("table", "matchmaking", "wallet", "worker", "drift"):
        pid = stack.processes[name].pid
        row[f"{name}_rss_mb"] = round(_rss_mb(pid), 1)
        row[f"{name}_fds"] = _fds(pid)
    info: Any = client.info("memory")
    row["redis_keys"] = int(client.dbsize())
    row["redis_memory_mb"] = round(int(info["used_memory"]) / 2**20, 2)
    table = _metrics(stack.metrics["table"])
    row["open_streams"] = table.get("kishpa_table_watchers", 0.0)
    # Work done (not checked): settlement phases recorded so far (three per round at most).
    row["phases_recorded"] = table.get("kishpa_table_phases_recorded_total", 0.0)
    total = table.get("kishpa_grpc_server_handling_seconds_sum", 0.0)
    count = table.get("kishpa_grpc_server_handling_seconds_count", 0.0)
    calls = count - previous.get("count", 0.0)
    row["rpc_mean_ms"] = round(1000 * (total - previous.get("sum", 0.0)) / calls, 2) if calls else 0
    previous.update(sum=total, count=count)
    # Work done (not checked): drift checks finished by the drift worker.
    drift = _metrics(stack.metrics["drift"])
    row["drift_checks"] = drift.get("kishpa_wallet_drift_checks_total", 0.0)
    return row


def flatness(rows: list[dict[str, float]], warmup: float) -> dict[str, float]:
    """Growth of each checked series: mean of the last quarter of the samples after the
    warm-up over the mean of the first quarter, minus 1."""
    kept = rows[int(len(rows) * warmup) :]
    quarter = max(1, len(kept) // 4)
    growth = {}
    for name in SERIES_CHECKED:
        first = statistics.fmean(r[name] for r in kept[:quarter])
        last = statistics.fmean(r[name] for r in kept[-quarter:])
        growth[name] = (last - first) / first if first else (0.0 if last == first else 1.0)
    return growth


def write_svg(rows: list[dict[str, float]], path: Path, title: str) -> None:
    """Each series in a panel of its own, scaled to its range (min..max printed)."""
    names = [*SERIES_CHECKED, "rpc_mean_ms", "phases_recorded", "drift_checks"]
    width, panel_h, left = 720, 70, 170
    height = 40 + panel_h * len(names)
    t0 = rows[0]["t"]
    span = max(1.0, rows[-1]["t"] - t0)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        'font-family="sans-serif" font-size="11">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="10" y="20" font-size="13">{title}</text>',
    ]
    for i, name in enumerate(names):
        y0 = 30 + i * panel_h
        values = [r[name] for r in rows]
        low, high = min(values), max(values)
        scale = (high - low) or 1.0
        points = " ".join(
            f"{left + (r['t'] - t0) / span * (width - left - 20):.1f},"
            f"{y0 + panel_h - 12 - (r[name] - low) / scale * (panel_h - 24):.1f}"
            for r in rows
        )
        parts += [
            f'<text x="10" y="{y0 + panel_h / 2}">{name}</text>',
            f'<text x="10" y="{y0 + panel_h / 2 + 13}" fill="#666">{low:g} .. {high:g}</text>',
            f'<line x1="{left}" y1="{y0 + panel_h - 12}" x2="{width - 20}" '
            f'y2="{y0 + panel_h - 12}" stroke="#ccc"/>',
            f'<polyline fill="none" stroke="#1f5fa8" stroke-width="1.5" points="{points}"/>',
        ]
    parts.append(
        f'<text x="{left}" y="{height - 4}" fill="#666">0 .. {span / 60:.1f} min</text></svg>'
    )
    path.write_text("\n".join(parts) + "\n")


_ID_PART = re.compile(r"[pt]?[0-9a-f]{16,}(-[0-9a-f]{4,})*|[0-9]+|[A-Z0-9]{6}|[A-Za-z0-9_-]{20,}")


def key_pattern(key: str) -> str:
    """A key with its ids replaced by ``*`` (``kishpa:mm:{mm:player:p3f…}:table`` becomes
    ``kishpa:mm:{mm:player:*}:table``)."""
    parts = re.split(r"([:{}/])", key)
    return "".join("*" if _ID_PART.fullmatch(part) else part for part in parts)


def key_census(client: redis.Redis) -> dict[str, list[int]]:
    """Keys by pattern: [how many, how many never expire (TTL -1), the longest TTL in s]."""
    census: dict[str, list[int]] = {}
    for raw in client.scan_iter(count=1000):
        entry = census.setdefault(key_pattern(raw.decode(errors="replace")), [0, 0, 0])
        ttl = int(client.ttl(raw))
        entry[0] += 1
        entry[1] += ttl == -1
        entry[2] = max(entry[2], ttl)
    return census


def run(args: argparse.Namespace) -> int:
    tmp = Path(tempfile.mkdtemp(prefix="kishpa-soak-"))
    stack = Stack(
        tmp, finished_ttl_s=args.finished_ttl_s, drift_interval_s=args.drift_interval
    ).start()
    client = redis.Redis(port=stack.redis_port)
    rows: list[dict[str, float]] = []
    previous: dict[str, float] = {}
    waves = failed_waves = 0
    try:
        end = time.monotonic() + args.minutes * 60
        if args.long_tables:  # enough rounds for the whole run; stopped at the end
            bots = stack.bots(args.tables, 100_000, timeout=args.minutes * 60 + 900)
        else:
            bots = stack.bots(args.tables, args.rounds)
        next_sample = time.monotonic()
        while time.monotonic() < end:
            if args.long_tables and bots.poll() is not None:
                failed_waves += bots.returncode != 0
                print(f"the bots stopped before the end (exit {bots.returncode}): {tmp}/bots.log")
                break
            if bots.poll() is not None:
                if bots.returncode != 0:
                    # A table given up (e.g. calls past their deadline on an overloaded
                    # machine): counted and reported, the soak goes on.
                    failed_waves += 1
                    print(f"a wave of bots had failures (exit {bots.returncode}): {tmp}/bots.log")
                waves += 1
                bots = stack.bots(args.tables, args.rounds)
            if time.monotonic() >= next_sample:
                rows.append(sample(stack, client, previous))
                next_sample += args.sample_s
            time.sleep(0.2)
        if args.long_tables:
            if bots.poll() is None:
                bots.terminate()
                bots.wait(timeout=60)
        else:
            bots.wait(timeout=900)
            failed_waves += bots.returncode != 0
        waves += 1
        census = key_census(client)
    finally:
        stack.stop()
    growth = flatness(rows, args.warmup)
    flat = all(g <= args.max_growth for g in growth.values())
    shape = "one wave of long tables" if args.long_tables else f"{waves} waves"
    shape += "" if args.long_tables else f" of {args.rounds} rounds"
    print(
        f"soak: {args.tables} tables at a time, {shape}, "
        f"{rows[-1]['phases_recorded']:g} settlement phases recorded, "
        f"{rows[-1]['drift_checks']:g} drift checks, "
        f"{args.minutes:g} min, {len(rows)} samples, {failed_waves} waves with failed tables "
        "(box shared: figures are noisy)"
    )
    for name, g in growth.items():
        print(f"  {name:20s} first {rows[0][name]:>10g}  last {rows[-1][name]:>10g}  "
              f"growth after warm-up {g:+.1%}")  # fmt: skip
    latencies = [r["rpc_mean_ms"] for r in rows if r["rpc_mean_ms"]]
    if latencies:
        print(f"  rpc mean latency ms   median {statistics.median(latencies):.1f}  "
              f"max {max(latencies):.1f}")  # fmt: skip
    print("flat" if flat else f"NOT FLAT: a series grew by more than {args.max_growth:.0%}")
    print("  redis keys at the end by pattern: count, without a TTL, longest TTL s")
    for pattern, (count, persistent, ttl) in sorted(census.items(), key=lambda kv: -kv[1][0]):
        print(f"    {pattern:64s} {count:>6d} {persistent:>6d} {ttl:>8d}")
    if args.json:
        Path(args.json).write_text(
            json.dumps({"args": vars(args), "rows": rows, "keys": census}, indent=1)
        )
    if args.svg:
        title = (
            f"kishpa soak: {args.tables} bot tables, {args.minutes:g} min, "
            f"sample every {args.sample_s:g} s"
        )
        write_svg(rows, Path(args.svg), title)
        print(f"curves: {args.svg}")
    if not failed_waves:
        shutil.rmtree(tmp, ignore_errors=True)
    return 2 if failed_waves else (0 if flat else 1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tables", type=int, default=8, help="bot tables at a time (8)")
    parser.add_argument("--minutes", type=float, default=2.0, help="how long (2)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per table (3)")
    parser.add_argument("--sample-s", type=float, default=5.0, help="seconds per sample (5)")
    parser.add_argument("--warmup", type=float, default=0.25, help="share ignored (0.25)")
    parser.add_argument("--max-growth", type=float, default=0.05, help="flatness bound (0.05)")
    parser.add_argument(
        "--finished-ttl-s", type=int, default=60, help="closed tables kept this long (60)"
    )
    parser.add_argument(
        "--long-tables",
        action="store_true",
        help="one wave: tables play rounds until the end, then the bots are stopped",
    )
    parser.add_argument(
        "--drift-interval", type=float, default=300, help="seconds between drift checks (300)"
    )
    parser.add_argument("--svg", default="", help="write the curves here")
    parser.add_argument("--json", default="", help="write the samples here")
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
