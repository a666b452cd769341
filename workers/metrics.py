"""Prometheus metrics of settlement, served by each worker process on KISHPA_METRICS_PORT.

The worker runs its tasks in threads of one process (``kishpa worker`` uses Celery's
thread pool), so one registry sees every task and one HTTP endpoint serves it.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram, start_http_server

SETTLEMENTS = Counter(
    "kishpa_settlements_total",
    "Settlement task runs by outcome: settled, already_settled, dead_letter, waiting "
    "(handed back: an earlier phase is unsettled), retry (a transient failure, tried again), "
    "retry_later (handed to the sweeper), failed.",
    ["phase", "outcome"],
)
SETTLEMENT_LATENCY = Histogram(
    "kishpa_settlement_latency_seconds",
    "From the phase record's creation (round start or end) to the settled event.",
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300),
)
DEAD_LETTERS = Counter(
    "kishpa_settlement_dead_letters_total",
    "Phases put in the dead-letter list, by reason code.",
    ["reason"],
)
SWEPT = Counter(
    "kishpa_sweeper_reenqueued_total",
    "Phases the sweeper found unsettled past the deadline and enqueued again.",
)
OLDEST_UNSETTLED = Gauge(
    "kishpa_settlement_oldest_unsettled_seconds",
    "Settlement lag: age of the oldest unsettled, not dead-lettered phase (latest sweep).",
)
UNSETTLED = Gauge(
    "kishpa_settlement_unsettled_phases",
    "Unsettled, not dead-lettered phases in the outboxes (latest sweep).",
)
STALLED_TABLES = Gauge(
    "kishpa_settlement_stalled_tables",
    "Tables with a phase unsettled for longer than KISHPA_STALL_AFTER (latest sweep).",
)
LAST_SWEEP = Gauge(
    "kishpa_settlement_last_sweep_timestamp_seconds",
    "When this worker last swept (Unix time): its sweep gauges are only as fresh as this.",
)
RECONCILIATION_DISCREPANCIES = Gauge(
    "kishpa_wallet_reconciliation_discrepancies",
    "Discrepancies found by the latest wallet reconciliation (0 when the ledger is sound).",
)
RECONCILIATION_RUNS = Counter(
    "kishpa_wallet_reconciliations_total",
    "Wallet reconciliations by result: clean, discrepancies, error.",
    ["result"],
)

DRIFT_DIFFERENCES = Gauge(
    "kishpa_wallet_drift_differences",
    "Differences between live tables and the ledger found by the latest drift check, by check.",
    ["check"],
)
DRIFT_RUNS = Counter(
    "kishpa_wallet_drift_checks_total",
    "Drift checks (live tables against the ledger) by result: clean, differences, error.",
    ["result"],
)
DRIFT_LAST_RUN = Gauge(
    "kishpa_wallet_drift_last_run_timestamp_seconds",
    "When this process last finished a drift check (Unix time).",
)


def serve_metrics(port: int) -> None:
    """Serve ``/metrics`` on ``port`` in a background thread (0: do not serve)."""
    if port:
        start_http_server(port)
