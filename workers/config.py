"""What the workers need to know about their surroundings, read once from the environment.

The variables shared with the services (REDIS_URL, KISHPA_BROKER_URL, DATABASE_URL,
KISHPA_WALLET_ADDR, KISHPA_SERVICE_SECRET, KISHPA_METRICS_PORT) come from
``services.common.settings``; the knobs only the workers have are read here:

- ``KISHPA_WORKER_QUEUE`` (``kishpa``): the queue settlement tasks travel on;
- ``KISHPA_DRIFT_LAG`` (``30``): seconds behind now the drift check's window of new rounds
  ends: a batch older than this has been archived, unless settlement is stuck;
- ``KISHPA_DRIFT_QUEUE`` (the settlement queue's name plus ``.drift``): the queue the drift
  check travels on, consumed by ``kishpa worker --drift`` alone, so a slow check never holds
  a thread settlement needs;
- ``KISHPA_VISIBILITY_TIMEOUT`` (``10``): seconds before Redis redelivers an unacked task;
  a task gives its message back well within it (see ``task_budget_s``);
- ``KISHPA_SETTLE_DEADLINE`` (``5``): seconds a phase may stay unsettled before the sweeper
  enqueues it again;
- ``KISHPA_SWEEP_INTERVAL`` (``2``): seconds between two sweeps of the unsettled tables;
- ``KISHPA_REINDEX_INTERVAL`` (``60``): seconds between two rebuilds of the sweeper's
  unsettled index from the outboxes (a SCAN), which bounds how long a lost index entry
  hides its table from the sweeper;
- ``KISHPA_STALL_AFTER`` (``60``): seconds after which an unsettled phase counts its table
  as stalled (metric, alert, one warning per table);
- ``KISHPA_RECONCILE_INTERVAL`` (``60``): seconds between two wallet reconciliations (0: off).
- ``KISHPA_DRIFT_INTERVAL`` (``300``): seconds between two drift checks of the live tables
  against the ledger (0: off).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cache

from services.common.settings import Settings
from shared.tasks import DEFAULT_QUEUE, QUEUE_ENV


@dataclass(frozen=True, slots=True)
class WorkerConfig:
    """Everything a worker, the beat scheduler or an enqueueing service reads from the env."""

    settings: Settings
    queue: str = DEFAULT_QUEUE
    visibility_timeout_s: int = 10
    settle_deadline_s: float = 5.0
    sweep_interval_s: float = 2.0
    reindex_interval_s: float = 60.0
    reconcile_interval_s: float = 60.0
    stall_after_s: float = 60.0
    drift_interval_s: float = 300.0
    drift_queue_name: str = ""
    drift_lag_s: float = 30.0

    @property
    def drift_queue(self) -> str:
        """The drift check's own queue (``KISHPA_DRIFT_QUEUE``, else ``<queue>.drift``)."""
        return self.drift_queue_name or f"{self.queue}.drift"

    @property
    def task_budget_s(self) -> float:
        """How long one settlement task may keep its message unacknowledged (waiting for an
        earlier phase, retrying a transient failure) before it hands the phase back to the
        sweeper: half the visibility timeout, so Redis never redelivers a task still running."""
        return max(1.0, self.visibility_timeout_s / 2)

    @property
    def redis_url(self) -> str:
        return self.settings.redis_url

    @property
    def broker_url(self) -> str:
        return self.settings.broker_url


def _float(name: str, default: float) -> float:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return float(raw)
    except ValueError as exc:
        raise ValueError(f"{name} must be a number of seconds, got {raw!r}") from exc


def config_from_settings(settings: Settings) -> WorkerConfig:
    """The workers' configuration: ``settings`` plus the worker-only variables above."""
    return WorkerConfig(
        settings=settings,
        queue=os.environ.get(QUEUE_ENV) or DEFAULT_QUEUE,
        visibility_timeout_s=max(2, int(_float("KISHPA_VISIBILITY_TIMEOUT", 10))),
        settle_deadline_s=_float("KISHPA_SETTLE_DEADLINE", 5.0),
        sweep_interval_s=_float("KISHPA_SWEEP_INTERVAL", 2.0),
        reindex_interval_s=max(1.0, _float("KISHPA_REINDEX_INTERVAL", 60.0)),
        reconcile_interval_s=_float("KISHPA_RECONCILE_INTERVAL", 60.0),
        stall_after_s=_float("KISHPA_STALL_AFTER", 60.0),
        drift_interval_s=_float("KISHPA_DRIFT_INTERVAL", 300.0),
        drift_queue_name=os.environ.get("KISHPA_DRIFT_QUEUE", ""),
        drift_lag_s=max(0.0, _float("KISHPA_DRIFT_LAG", 30.0)),
    )


@cache
def worker_config() -> WorkerConfig:
    """The process's configuration, read on first use.

    Secrets are not checked here (an enqueueing service or an operator listing dead letters
    needs none); ``kishpa worker`` checks them with ``load_settings`` before it starts.
    """
    return config_from_settings(Settings(service="worker"))
