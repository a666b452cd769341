"""Prometheus metrics of the table service (served on KISHPA_METRICS_PORT by the server)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

COMMITS = Counter(
    "kishpa_table_commits",
    "Table commits by outcome: committed, replayed (a request id answered again), conflict "
    "(the version moved; reloaded and retried).",
    ["outcome"],
)
DEADLINES = Counter(
    "kishpa_table_deadlines_applied",
    "Deadlines applied by this replica's timer loop, by kind (turn, window, next_round).",
    ["kind"],
)
PHASES = Counter(
    "kishpa_table_phases_recorded",
    "Settlement phase records written to the outbox, by phase.",
    ["phase"],
)
ENQUEUE_FAILURES = Counter(
    "kishpa_table_settlement_enqueue_failures",
    "Settlement tasks that could not be enqueued (the sweeper re-enqueues them).",
)
WATCHERS = Gauge(
    "kishpa_table_watchers",
    "WatchTable streams open in this process (each an in-process subscription of the hub).",
)
WATCHED_TABLES = Gauge(
    "kishpa_table_watched_tables",
    "Tables with at least one local watcher (each one pub/sub subscription of the hub).",
)
WATCH_CUTOFFS = Counter(
    "kishpa_table_watch_cutoffs",
    "Watchers cut off for falling too far behind (they resume by event id).",
)
FANOUT_OFFERS = Counter(
    "kishpa_table_fanout_offers",
    "Commits of this process handed to its watchers without a stream read.",
)
FANOUT_READS = Counter(
    "kishpa_table_fanout_reads",
    "Pipelined stream reads of the shared fan-out (each covers every table woken meanwhile).",
)
GC_PAUSES = Histogram(
    "kishpa_table_gc_pause_seconds",
    "Garbage-collection pauses of this process, by generation collected.",
    ["generation"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0),
)
GC_PAUSE_MAX = Gauge(
    "kishpa_table_gc_pause_max_seconds",
    "The longest garbage-collection pause of this process so far.",
)
GC_CPU = Counter(
    "kishpa_table_gc_cpu_seconds",
    "CPU time of this process's garbage collections (the thread's, not the wall clock: "
    "a pause on a busy machine also waits for the core).",
)
STATE_CACHE = Counter(
    "kishpa_table_state_cache",
    "Actions computed on the state this process last committed for the table (no read "
    "first), by outcome: hit (committed), stale (another writer moved the table on; computed "
    "again on the state the refusal returned), refused (the computation refused; decided "
    "again on a fresh read). Actions that found no kept state are not counted.",
    ["outcome"],
)

PHASE_DURABLE = Gauge(
    "kishpa_table_phase_durable",
    "1 when Redis, as last probed (at start and on every new connection), can make a "
    "phase-ending commit durable before it is answered; 0 when it cannot",
)
DURABILITY_REFUSALS = Counter(
    "kishpa_table_durability_refusals_total",
    "Round starts and ends refused NOT_DURABLE because Redis cannot make them durable now "
    "(KISHPA_PHASE_DURABILITY=required)",
)
