"""Where a table-service action's CPU goes: a py-spy profile sorted into the parts of an action.

``bench_capacity.py --profile PREFIX`` records the service's stacks during the load window
(py-spy, native frames included, ``PREFIX.<n>.txt``: collapsed stacks, one per line with its
sample count) and prints the CPU per action of each thread. This script sorts the event
loop's samples into the parts of an action, each sample to the innermost frame that names a
part (a JSON decode inside the rules counts as state (de)serialisation, not as rules), and
turns the shares into milliseconds with the event loop's CPU per action:

    .venv/bin/python benchmarks/bench_capacity.py --steps 1000 --seconds 30 --json cap.json \\
        --profile /tmp/prof
    .venv/bin/python benchmarks/profile_parts.py /tmp/prof.0.txt --json cap.json

py-spy samples the wall clock: a thread counts while it runs *or waits for a core* (it is
not idle), so on a loaded machine the shares are right only if being preempted is as likely
in every part. grpc's Cython module has no symbols: its frames are told apart only by the
system call or library they end in (``sendmsg``: sending; protobuf's upb decoder: receiving).
"""

from __future__ import annotations

import argparse
import collections
import json
import re
from collections.abc import Iterable
from pathlib import Path

GC = "GC"
PARTS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (name, re.compile(pattern))
    for name, pattern in (
        (GC, r"^(gc_collect|collect|collect_with_callback|gc_collect_main) \("),
        (
            "gRPC send (sendmsg, protobuf encode)",
            r"^(sendmsg|writev) \(|SerializeInternal|upb_Encode",
        ),
        ("gRPC wake-ups (eventfd)", r"^eventfd_(write|read) \("),
        ("gRPC receive (protobuf decode)", r"upb_Decode|_upb_Decoder|MergeFromString"),
        (
            "state (de)serialisation (JSON, from_dict/to_dict)",
            r"\.(from_dict|to_dict)\b|^(loads|dumps) \(json|orjson|^JSON(De|En)coder"
            r"|^_snapshot \(|^(decode|encode|stored_event) \(shared/stream",
        ),
        (
            "fan-out conversion (events to messages)",
            r"Converter\.(shared_event|event)|^event_message|WatchTable\.<locals>",
        ),
        ("fan-out (hub, watch filter, stream generator)", r"services/table/(fanout|watching)\.py"),
        (
            "caller's view (engine view + conversion)",
            r"Converter\.|services/table/wire_events|_view_of|\.view \(|TableServicer\._view",
        ),
        (
            "rules (engine step)",
            r"\.act \(services/table/(kishpa|hand)_engine|\.<locals>\.compute |games/|_transition",
        ),
        (
            "the commit script (store, redis-py)",
            r"services/table/(store|state_cache)\.py|^Script\.|redis/|services/common/redis_client",
        ),
        ("authentication and access", r"services/common/(auth/|access)"),
        ("validation", r"services/common/validation"),
        (
            "other interceptors (metrics, limits, errors, handlers)",
            r"services/common/(metrics|limits|shared_rates|errors|handlers|tracing)|prometheus_client",
        ),
        ("timers", r"services/table/(timers|deadlines)"),
        ("servicer and core (other)", r"services/table/(?!server\.py)"),
        ("gRPC call handling (cygrpc, grpc.aio)", r"cygrpc|grpc/"),
    )
)
OTHER = "event loop and other (uvloop, asyncio)"


REDIS = "the commit script (store, redis-py)"
GET_TABLE = "GetTable (the load generator's reads, not an action)"
CONTEXTS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"^TableServicer\.GetTable "), GET_TABLE),
    (re.compile(r"^(StreamHub|Watching)\."), "fan-out (hub, watch filter, stream generator)"),
    (re.compile(r"^SharedRates\."), "other interceptors (metrics, limits, errors, handlers)"),
    (re.compile(r"services/table/timers"), "timers"),
)
"""Redis round trips are the commit's unless a frame further out says whose they are."""


def part_of(frames: list[str]) -> str:
    """The part a sampled stack belongs to: the innermost frame that names one (a Redis
    command of the fan-out, the rate limits' flush or the timers counts as theirs; all of a
    GetTable call as a read)."""
    if any(CONTEXTS[0][0].search(f) for f in frames):
        return GET_TABLE
    for frame in reversed(frames):
        for name, pattern in PARTS:
            if pattern.search(frame):
                if name == REDIS:
                    for context, owner in CONTEXTS[1:]:
                        if any(context.search(f) for f in frames):
                            return owner
                return name
    return OTHER


def read(paths: Iterable[Path]) -> dict[str, collections.Counter[str]]:
    """Samples per part, by thread (``main``: the process's first thread)."""
    by_thread: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    threads: dict[str, str] = {}
    for path in paths:
        main = None
        for line in path.read_text().splitlines():
            stack, _, count = line.rpartition(" ")
            frames = stack.split(";")
            thread = frames[0]
            if main is None and "run_loop (services/table/server.py)" in stack:
                main = thread
            threads.setdefault(thread, str(path))
            by_thread[thread][part_of(frames[1:])] += int(count)
        if main is not None:
            by_thread[f"main {path}"] += by_thread.pop(main)
    return by_thread


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("profiles", nargs="+", type=Path)
    parser.add_argument(
        "--json",
        default="",
        help="bench_capacity's --json output: its last step's CPU per action by thread "
        "turns the shares into milliseconds",
    )
    args = parser.parse_args()
    by_thread = read(args.profiles)
    loop = collections.Counter[str]()
    for thread, parts in by_thread.items():
        if thread.startswith("main "):
            loop.update(parts)
    total = sum(loop.values())
    step: dict[str, object] = {}
    if args.json:
        step = json.loads(Path(args.json).read_text())[-1]
    threads = step.get("cpu_ms_per_action_by_thread", {})
    assert isinstance(threads, dict)
    loop_ms = float(threads.get("main", 0.0))
    gc_ms = float(str(step.get("gc_cpu_ms_per_action", 0.0)))
    print(
        f"event loop: {total} samples" + (f", {loop_ms:.2f} ms CPU per action" if loop_ms else "")
    )
    for name, n in loop.most_common():
        ms = f"{loop_ms * n / total:6.3f} ms" if loop_ms else ""
        print(f"  {100 * n / total:5.1f}%  {ms}  {name}")
    if threads:
        others = {k: float(v) for k, v in threads.items() if k != "main" and float(v) > 0}
        print(
            "other threads (CPU per action, /proc): "
            + ", ".join(f"{k} {v:.3f} ms" for k, v in sorted(others.items(), key=lambda kv: -kv[1]))
        )
        print(f"GC (the collections' own CPU, kishpa_table_gc_cpu_seconds): {gc_ms:.3f} ms")
        print(f"all: {float(str(step.get('cpu_ms_per_action', 0.0))):.2f} ms CPU per action")


if __name__ == "__main__":
    main()
