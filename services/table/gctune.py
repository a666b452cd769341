"""Garbage collection of a table-service process: measured, and kept out of the way.

A full collection of a process holding hundreds of live tables takes 150-370 ms, and left
alone such pauses set the action p99. So:

* :func:`freeze_startup` moves everything allocated while starting (modules, protobuf
  descriptors, the engines' tables) into the permanent generation: collections never walk it
  again (``gc.freeze()``).
* :func:`tune` raises the young-generation threshold: a request allocates thousands of short
  lived objects (JSON state, protobuf messages) that die young anyway, so collecting every
  700 allocations bought nothing; the older generations are collected 10x less often than
  the default, which bounds how often a long collection can run at all.
* :func:`measure` records every pause in ``kishpa_table_gc_pause_seconds`` (and the longest
  in ``kishpa_table_gc_pause_max_seconds``) and the CPU the collections took in
  ``kishpa_table_gc_cpu_seconds_total``, which ``benchmarks/bench_capacity.py`` reads.
"""

from __future__ import annotations

import gc
import time
from typing import Any

from services.table.metrics import GC_CPU, GC_PAUSE_MAX, GC_PAUSES

THRESHOLDS = (50_000, 20, 100)
"""gen0 allocations, gen0 collections per gen1, gen1 collections per gen2 (default 700/10/10)."""

_started: dict[int, tuple[float, float]] = {}
_longest = [0.0]


def _callback(phase: str, info: dict[str, Any]) -> None:
    generation = int(info.get("generation", 0))
    if phase == "start":
        _started[generation] = (time.perf_counter(), time.thread_time())
        return
    began = _started.pop(generation, None)
    if began is None:
        return
    pause = time.perf_counter() - began[0]
    GC_CPU.inc(max(0.0, time.thread_time() - began[1]))
    GC_PAUSES.labels(str(generation)).observe(pause)
    if pause > _longest[0]:
        _longest[0] = pause
        GC_PAUSE_MAX.set(pause)


def measure() -> None:
    """Record every collection's pause (idempotent)."""
    if _callback not in gc.callbacks:
        gc.callbacks.append(_callback)


def tune(thresholds: tuple[int, int, int] = THRESHOLDS) -> None:
    """Collect less often (see the module docstring)."""
    gc.set_threshold(*thresholds)


def freeze_startup() -> None:
    """Collect once, then exempt everything alive now from future collections."""
    gc.collect()
    gc.freeze()
