"""The Celery application of the Kishpa workers and the one decorator every task uses.

Delivery is at least once: a task is acknowledged only after it ran (late acks), a task whose
worker died is given back to the broker, and each worker holds one message at a time. The
wallet's idempotency keys turn that into exactly once in effect.

The broker is Redis (``KISHPA_BROKER_URL``, defaulting to ``REDIS_URL``); an ``amqp://`` URL
makes RabbitMQ the broker instead. Results, which nobody waits on, go to Redis.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar
from urllib.parse import urlsplit

import grpc
from celery import Celery, signals

from services.common.tracing import configure_tracing
from shared import retry as retry_policy
from workers.broker import AMQP as BROKER_AMQP
from workers.broker import TRANSPORT as BROKER_TRANSPORT
from workers.config import WorkerConfig, worker_config

P = ParamSpec("P")
R = TypeVar("R")


class TransientError(Exception):
    """A failure that is expected to go away (a server restarting, a dropped connection)."""


def is_transient(exc: BaseException) -> bool:
    """Whether retrying later may succeed where this attempt failed (the platform's one
    policy, :mod:`shared.retry`)."""
    return isinstance(exc, TransientError) or retry_policy.is_transient(exc)


def _result_backend(config: WorkerConfig) -> str:
    """Results (nobody waits on them) go to Redis; Celery's Redis backend does not speak
    Cluster, so with a cluster ``REDIS_URL`` they go to the Redis broker, or back over
    RabbitMQ (``rpc://``)."""
    if not urlsplit(config.redis_url).scheme.endswith("+cluster"):
        return config.redis_url
    if config.broker_url.startswith(("redis://", "rediss://", "unix://")):
        return config.broker_url
    return "rpc://"


def celery_settings(config: WorkerConfig) -> dict[str, Any]:
    """Celery's configuration for ``config`` (also used by tests to check what is set)."""
    settings: dict[str, Any] = {
        "broker_url": config.broker_url,
        "result_backend": _result_backend(config),
        "result_expires": 3600,
        "task_default_queue": config.queue,
        # The drift check on a queue of its own (its own worker, ``kishpa worker --drift``):
        # a run of minutes never takes a thread settlement needs.
        "task_routes": {"kishpa.check_drift": {"queue": config.drift_queue}},
        "task_serializer": "json",
        "result_serializer": "json",
        "accept_content": ["json"],
        "task_acks_late": True,
        "task_reject_on_worker_lost": True,
        "worker_prefetch_multiplier": 1,
        "task_track_started": False,
        "broker_connection_retry_on_startup": True,
        # Wait for the broker as long as it takes (reconnecting every 2 s at most, see
        # workers/broker.py): a worker that gave up would only be restarted to wait again.
        "broker_connection_max_retries": None,
        "worker_hijack_root_logger": False,
        "timezone": "UTC",
        "enable_utc": True,
    }
    schedule: dict[str, Any] = {
        "sweep-outboxes": {
            "task": "kishpa.sweep_outboxes",
            "schedule": config.sweep_interval_s,
            "options": {"expires": config.sweep_interval_s},
        },
    }
    if config.reconcile_interval_s > 0:
        schedule["reconcile-wallet"] = {
            "task": "kishpa.reconcile_wallet",
            "schedule": config.reconcile_interval_s,
            "options": {"expires": config.reconcile_interval_s},
        }
    if config.drift_interval_s > 0:
        schedule["check-drift"] = {
            "task": "kishpa.check_drift",
            "schedule": config.drift_interval_s,
            "options": {"expires": config.drift_interval_s, "queue": config.drift_queue},
        }
    settings["beat_schedule"] = schedule
    if config.broker_url.startswith(("redis://", "rediss://", "unix://")):
        # An unacked message comes back after this long if its worker vanished (kill -9).
        # No task keeps a message longer than half of it (``task_budget_s``; no countdown
        # or ETA retries), so a live worker's message is never handed out twice. kombu looks
        # for such messages only every interval x throttle seconds (100 s by default); look
        # every couple of seconds instead, so recovery takes about the timeout. The restore
        # runs under a Redis lock that outlives a worker killed while holding it (300 s by
        # default): keep it short, a rare double restore is only a duplicate.
        settings["broker_transport_options"] = {
            "visibility_timeout": config.visibility_timeout_s,
            "unacked_restore_interval": max(1, min(10, config.visibility_timeout_s // 4)),
            "unacked_restore_throttle": 1,
            "unacked_mutex_expire": max(1, min(60, config.visibility_timeout_s)),
        }
        # kombu's Redis transport with a guard that keeps the worker alive when Redis dies
        # while a task holds a message (workers/broker.py explains the defect).
        settings["broker_transport"] = BROKER_TRANSPORT
    else:
        # AMQP: after a reconnect with tasks running, Celery lowers the prefetch count and
        # raises it again from each finished task's ack, in the pool thread, with a
        # synchronous basic.qos that reads the consumer's py-amqp connection while the main
        # loop reads it too (py-amqp is not thread-safe): the frames interleave
        # (UnexpectedFrame) and the connection can stall for seconds. Off, the new consumer
        # starts at the full count, as Celery itself does with quorum queues
        # (docs/workers.md, "Where Celery's threads pool touches the AMQP connection").
        settings["worker_enable_prefetch_count_reduction"] = False
    return settings


def create_app(config: WorkerConfig) -> Celery:
    """A configured Celery application; ``app`` below is the process's one instance."""
    # The AMQP class names the broker Connection: one that reconnects at least every 2 s.
    application = Celery("kishpa", set_as_current=False, amqp=BROKER_AMQP)
    application.conf.update(celery_settings(config))
    return application


app = create_app(worker_config())


PERIODIC_CHECK: dict[str, Any] = {"acks_late": False, "ignore_result": True}
"""Options of the drift check and the reconciliation: they read every table or the whole
ledger (minutes on a large one), far past the visibility timeout. Late-acked, each run was
delivered again every timeout while it ran (one more full copy in memory and on the CPU each
time); acknowledged on receipt, a run lost with its worker is only the next beat's to do."""


def kishpa_task(name: str, **options: Any) -> Callable[[Callable[P, R]], Any]:
    """Register ``fn`` as the task ``name`` with the project's delivery policy.

    Tasks take keyword arguments only (ids, never objects), are acknowledged late and given
    back when their worker dies. Celery retries nothing by itself: a countdown retry would
    wait unacknowledged in its worker and die with it. A task that wants to try again does
    so inside its budget, or leaves the work to the sweeper. A transient gRPC failure is
    raised as :class:`TransientError` so callers can tell it from a bug.

    A periodic check that may run longer than the visibility timeout takes
    ``**PERIODIC_CHECK``: acknowledged on receipt, since Redis hands a message still
    unacknowledged after the timeout out again, to a second thread, while the first runs.
    """

    def decorate(fn: Callable[P, R]) -> Any:
        @functools.wraps(fn)
        def run(*args: P.args, **kwargs: P.kwargs) -> R:
            if args:
                raise TypeError(f"task {name} takes keyword arguments only")
            try:
                return fn(*args, **kwargs)
            except grpc.RpcError as exc:
                if is_transient(exc):
                    raise TransientError(f"{name}: {exc}") from exc
                raise

        policy: dict[str, Any] = {
            "name": name,
            "acks_late": True,
            "reject_on_worker_lost": True,
            "max_retries": 0,
            "typing": True,
        }
        policy.update(options)
        return app.task(**policy)(run)

    return decorate


def _start_tracing(**_: Any) -> None:
    """Trace this worker's tasks when ``KISHPA_OTLP_ENDPOINT`` is set (off by default)."""
    config = worker_config()
    configure_tracing("worker", config.settings.otlp_endpoint)


signals.worker_init.connect(_start_tracing, weak=False)
signals.worker_process_init.connect(_start_tracing, weak=False)


# Task modules register themselves on import; the worker imports them through this list.
app.conf.imports = ("workers.settlement", "workers.sweeper", "workers.drift")


class _RoutineToDebug(logging.Filter):
    """Demote Celery's per-task chatter (received, succeeded, beat's "sending due task") to
    DEBUG: the tasks log what they did themselves, and a sweep that found nothing says so
    only at debug level. Warnings and errors (a task that raised) pass unchanged."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno != logging.INFO:
            return True
        record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return logging.getLogger().isEnabledFor(logging.DEBUG)


ROUTINE_LOGGERS = (
    "celery.app.trace",
    "celery.worker.strategy",
    "celery.worker.request",
    "celery.beat",
)


def quiet_routine_logs() -> None:
    """Install :class:`_RoutineToDebug` on Celery's per-task loggers (worker and beat)."""
    for name in ROUTINE_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, _RoutineToDebug) for f in logger.filters):
            logger.addFilter(_RoutineToDebug())
