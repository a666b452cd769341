"""The periodic tasks Celery beat runs: the outbox sweeper and the wallet reconciliation.

The sweeper is what makes a lost task harmless: every few seconds it SCANs the tables'
outboxes and enqueues again every phase that has no settlement after the deadline (a task
lost with its broker, a worker that gave up retrying). It enqueues one phase at most once
per deadline, so a long wallet outage does not flood the queue.

The reconciliation checks the wallet's ledger every minute and reports discrepancies as a
metric and as the structured log line ``event=wallet_reconciliation_failed`` that an alert
fires on.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import redis

from services.common.logging import get_logger
from shared.phase_record import PhaseRef
from workers import metrics
from workers.celery_app import kishpa_task
from workers.config import worker_config
from workers.deadletter import is_dead_lettered
from workers.enqueue import enqueue_settlement
from workers.outbox import unsettled_phases
from workers.settlement import redis_client

log = get_logger(__name__)

SWEEP_TASK = "kishpa.sweep_outboxes"
RECONCILE_TASK = "kishpa.reconcile_wallet"


def enqueued_marker(ref: PhaseRef) -> str:
    """Key remembering that the sweeper enqueued ``ref`` recently (expires by itself)."""
    return f"kishpa:sweeper:{{{ref.table_id}}}:{ref.round_no}:{ref.phase}"


def sweep(
    client: redis.Redis,
    *,
    deadline_s: float,
    now_ms: int,
    enqueue: Callable[..., None] = enqueue_settlement,
) -> list[PhaseRef]:
    """Enqueue every phase unsettled for longer than ``deadline_s``; returns those enqueued.

    ``enqueue`` is called with the keyword ids of ``kishpa.settle_phase``.
    """
    deadline_ms = int(deadline_s * 1000)
    enqueued: list[PhaseRef] = []
    for ref in unsettled_phases(client, created_before_ms=now_ms - deadline_ms):
        if is_dead_lettered(client, ref):
            continue
        # SET NX: another beat or sweep run within the deadline already enqueued it.
        if not client.set(enqueued_marker(ref), now_ms, nx=True, px=max(deadline_ms, 1000)):
            continue
        enqueue(table_id=ref.table_id, round_no=ref.round_no, phase=ref.phase)
        enqueued.append(ref)
        metrics.SWEPT.inc()
        log.warning(
            "unsettled_phase_reenqueued",
            table_id=ref.table_id,
            round=ref.round_no,
            phase=ref.phase,
        )
    return enqueued


@kishpa_task(SWEEP_TASK, max_retries=0, ignore_result=True)
def sweep_outboxes() -> dict[str, Any]:
    """Celery task ``kishpa.sweep_outboxes``: one sweep of every table's outbox."""
    refs = sweep(
        redis_client(),
        deadline_s=worker_config().settle_deadline_s,
        now_ms=time.time_ns() // 1_000_000,
    )
    return {"enqueued": len(refs)}


def reconcile(database_url: str) -> list[str]:
    """Run the wallet's reconciliation against ``database_url``; the discrepancies found."""
    # Imported here: only the process running the check needs the wallet's SQL stack.
    from services.wallet.reconcile import reconcile_url

    report = reconcile_url(database_url)
    return [f"{d.check} {d.subject}: {d.detail}" for d in report.discrepancies]


@kishpa_task(RECONCILE_TASK, max_retries=0, ignore_result=True)
def reconcile_wallet() -> dict[str, Any]:
    """Celery task ``kishpa.reconcile_wallet``: check the ledger, report what is wrong."""
    try:
        discrepancies = reconcile(worker_config().settings.database_url)
    except Exception as exc:
        metrics.RECONCILIATION_RUNS.labels(result="error").inc()
        log.error("wallet_reconciliation_error", error=str(exc))
        raise
    metrics.RECONCILIATION_DISCREPANCIES.set(len(discrepancies))
    if discrepancies:
        metrics.RECONCILIATION_RUNS.labels(result="discrepancies").inc()
        log.error(
            "wallet_reconciliation_failed",
            discrepancies=len(discrepancies),
            details=discrepancies[:20],
        )
    else:
        metrics.RECONCILIATION_RUNS.labels(result="clean").inc()
        log.info("wallet_reconciliation_clean")
    return {"discrepancies": len(discrepancies)}
