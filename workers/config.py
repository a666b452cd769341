"""What the workers need to know about their surroundings, read once from the environment.

The variables shared with the services (REDIS_URL, KISHPA_BROKER_URL, DATABASE_URL,
KISHPA_WALLET_ADDR, KISHPA_SERVICE_SECRET, KISHPA_METRICS_PORT, KISHPA_WORKER_QUEUE) are
:class:`services.common.settings.Settings`; the knobs only the workers have are
:class:`WorkerSettings` (both described in docs/configuration.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from pydantic import Field

from services.common.settings import SectionSettings, Settings, load_section
from shared.tasks import DEFAULT_QUEUE


class WorkerSettings(SectionSettings):
    """Read by the settlement workers and the beat scheduler (docs/workers.md)."""

    visibility_timeout_s: int = Field(
        default=10, ge=2, validation_alias="KISHPA_VISIBILITY_TIMEOUT"
    )
    """Seconds before a Redis broker redelivers an unacknowledged task; a task gives its
    message back well within it (half of it: its retry budget)."""
    settle_deadline_s: float = Field(default=5.0, gt=0, validation_alias="KISHPA_SETTLE_DEADLINE")
    """Seconds a phase may stay unsettled before the sweeper enqueues it again."""
    sweep_interval_s: float = Field(default=2.0, gt=0, validation_alias="KISHPA_SWEEP_INTERVAL")
    """Seconds between two sweeps of the unsettled tables (beat)."""
    reindex_interval_s: float = Field(
        default=60.0, ge=1, validation_alias="KISHPA_REINDEX_INTERVAL"
    )
    """Seconds between two rebuilds of the sweeper's unsettled index from the outboxes (a
    SCAN), which bounds how long a lost index entry hides its table from the sweeper."""
    reconcile_interval_s: float = Field(
        default=60.0, ge=0, validation_alias="KISHPA_RECONCILE_INTERVAL"
    )
    """Seconds between two wallet reconciliations (beat); ``0``: off (the deployment's
    reconcile CronJob does it)."""
    stall_after_s: float = Field(default=60.0, gt=0, validation_alias="KISHPA_STALL_AFTER")
    """Seconds after which an unsettled phase counts its table as stalled (metric, alert,
    one warning per table)."""
    drift_interval_s: float = Field(default=300.0, ge=0, validation_alias="KISHPA_DRIFT_INTERVAL")
    """Seconds between two drift checks of the live tables against the ledger (beat);
    ``0``: off."""
    drift_queue_name: str = Field(default="", validation_alias="KISHPA_DRIFT_QUEUE")
    """The queue the drift check travels on, consumed by ``kishpa worker --drift`` alone so
    a slow check never holds a thread settlement needs; empty: the settlement queue's name
    plus ``.drift``."""
    drift_lag_s: float = Field(default=30.0, ge=0, validation_alias="KISHPA_DRIFT_LAG")
    """Seconds behind now the drift check's window of new rounds ends: a batch older than
    this has been archived, unless settlement is stuck."""


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


def config_from_settings(settings: Settings) -> WorkerConfig:
    """The workers' configuration: ``settings`` plus :class:`WorkerSettings` from the
    environment (raises ``SettingsError`` naming a bad variable)."""
    own = load_section(WorkerSettings)
    return WorkerConfig(
        settings=settings,
        queue=settings.worker_queue,
        **own.model_dump(),
    )


@cache
def worker_config() -> WorkerConfig:
    """The process's configuration, read on first use.

    Secrets are not checked here (an enqueueing service or an operator listing dead letters
    needs none); ``kishpa worker`` checks them with ``load_settings`` before it starts.
    """
    return config_from_settings(Settings(service="worker"))
