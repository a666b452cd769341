"""Redis bytes per open table, and their growth per round, as bot tables play on.

Starts the soak's stack (``bench_soak.Stack``: redis-server with AOF, wallet, table,
matchmaking, a settlement worker) and keeps ``--tables`` bot tables playing round after
round for ``--minutes`` (one wave, never closed: the tables a long-lived private game
makes). Every ``--sample-s`` seconds, for every open table: the bytes of its own keys
(``MEMORY USAGE ... SAMPLES 0`` of its state, events, requests, outbox, settled and
balances) and the round it plays (its last event's). After the warm-up (the first
``--warmup`` share of the run):

- **bytes per open table**: the mean over the tables, first and last quarter of the samples
  (flat: within ±5 %);
- **growth per round**: the slope of a table's bytes against its round (least squares over
  every table's samples), what an hour of play adds to a table.

``--compare-with DIR`` runs the same measurement first with the code in DIR (a checkout of
another commit: ``git archive <commit> | tar -x -C DIR`` plus the generated ``kishpa/``),
then with this one, so both figures come from the same run on the same box.

    python benchmarks/bench_redis_per_table.py --tables 30 --minutes 4 --compare-with DIR
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import redis  # noqa: E402

from benchmarks.bench_soak import Stack  # noqa: E402

TABLE_KEYS = ("state", "events", "requests", "outbox", "settled", "balances")


@dataclass
class Sample:
    t: float
    table_id: str
    round_no: int
    bytes: int
    parts: dict[str, int]


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def sample(client: redis.Redis, t: float) -> list[Sample]:
    """Every open table's own bytes and round now."""
    found: list[Sample] = []
    for raw in client.scan_iter(match="kishpa:table:*:state", count=1000):
        name = _text(raw)
        table_id = name[name.index("{") + 1 : name.rindex("}")]
        if client.ttl(raw) != -1:
            continue  # closing or waiting for players: not an open table at play
        parts: dict[str, int] = {}
        for part in TABLE_KEYS:
            used: Any = client.execute_command(  # type: ignore[no-untyped-call]
                "MEMORY", "USAGE", f"kishpa:table:{{{table_id}}}:{part}", "SAMPLES", "0"
            )
            parts[part] = int(used or 0)
        total = sum(parts.values())
        last: Any = client.xrevrange(f"kishpa:table:{{{table_id}}}:events", count=1)
        round_no = int(last[0][1].get(b"round", b"0")) if last else 0
        found.append(Sample(t, table_id, round_no, total, parts))
    return found


def slope(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of y over x."""
    mean_x = statistics.fmean(x for x, _ in points)
    mean_y = statistics.fmean(y for _, y in points)
    den = sum((x - mean_x) ** 2 for x, _ in points)
    return sum((x - mean_x) * (y - mean_y) for x, y in points) / den if den else 0.0


def measure(args: argparse.Namespace, code_dir: str | None) -> dict[str, float]:
    saved = os.environ.get("PYTHONPATH")
    if code_dir:
        os.environ["PYTHONPATH"] = code_dir  # the stack's processes run that code
    tmp = Path(tempfile.mkdtemp(prefix="kishpa-redis-table-"))
    try:
        stack = Stack(tmp).start()
    finally:
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved
    client = redis.Redis(port=stack.redis_port)
    samples: list[Sample] = []
    try:
        bots = stack.bots(args.tables, 100_000, timeout=args.minutes * 60 + 900)
        start = time.monotonic()
        end = start + args.minutes * 60
        while time.monotonic() < end:
            if bots.poll() is not None:
                raise SystemExit(f"the bots stopped (exit {bots.returncode}): {tmp}/bots.log")
            samples += sample(client, time.monotonic() - start)
            time.sleep(args.sample_s)
        bots.terminate()
        bots.wait(timeout=60)
    finally:
        stack.stop()
    shutil.rmtree(tmp, ignore_errors=True)
    kept = [s for s in samples if s.t >= args.warmup * args.minutes * 60]
    times = sorted({s.t for s in kept})
    quarter = max(1, len(times) // 4)
    first = [s.bytes for s in kept if s.t in times[:quarter]]
    last = [s.bytes for s in kept if s.t in times[-quarter:]]
    rounds = [s.round_no for s in kept if s.t in times[-quarter:]]
    end = [s for s in kept if s.t in times[-quarter:]]
    return {
        **{f"part_{p}": statistics.fmean(s.parts[p] for s in end) for p in TABLE_KEYS},
        "tables": len({s.table_id for s in kept if s.t == times[-1]}),
        "first_bytes": statistics.fmean(first),
        "last_bytes": statistics.fmean(last),
        "growth": statistics.fmean(last) / statistics.fmean(first) - 1,
        "per_round": slope([(s.round_no, s.bytes) for s in kept]),
        "rounds_at_end": statistics.fmean(rounds),
    }


def report(label: str, m: dict[str, float]) -> None:
    print(
        f"{label}: {m['tables']:g} open tables, round {m['rounds_at_end']:.1f} on average at "
        f"the end; bytes per table after warm-up {m['first_bytes'] / 1024:.1f} KiB -> "
        f"{m['last_bytes'] / 1024:.1f} KiB ({m['growth']:+.1%}); growth per round "
        f"{m['per_round'] / 1024:.2f} KiB"
    )
    print(
        "  by key at the end (KiB): "
        + ", ".join(f"{p} {m[f'part_{p}'] / 1024:.1f}" for p in TABLE_KEYS)
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tables", type=int, default=20, help="bot tables (20)")
    parser.add_argument("--minutes", type=float, default=3.0, help="per code version (3)")
    parser.add_argument("--sample-s", type=float, default=10.0, help="seconds per sample (10)")
    parser.add_argument("--warmup", type=float, default=0.25, help="share ignored (0.25)")
    parser.add_argument("--compare-with", default="", help="a checkout to measure first")
    args = parser.parse_args(argv)
    results: dict[str, dict[str, float]] = {}
    if args.compare_with:
        results["before"] = measure(args, args.compare_with)
        report(f"before ({args.compare_with})", results["before"])
    results["after"] = measure(args, None)
    report("after (this code)", results["after"])
    if "before" in results:
        before, after = results["before"], results["after"]
        print(
            f"ratio after/before: bytes per table at the end "
            f"{after['last_bytes'] / before['last_bytes']:.2f}, growth per round "
            f"{after['per_round'] / before['per_round']:.3f}"
            if before["per_round"]
            else "ratio: n/a"
        )
    flat = abs(results["after"]["growth"]) <= 0.05
    print("flat" if flat else "NOT FLAT (more than ±5 % after warm-up)")
    return 0 if flat else 1


if __name__ == "__main__":
    raise SystemExit(main())
