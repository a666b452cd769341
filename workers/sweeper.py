"""The periodic tasks Celery beat runs: the outbox sweeper and the wallet reconciliation.

The sweeper is what makes a lost task harmless: every couple of seconds it reads the 16
shards of the unsettled index (``keys.unsettled``: the tables with an unsettled outbox
phase, never a SCAN) and, for every table whose earliest unsettled phase has waited past
the deadline, enqueues that phase (earliest phase first, oldest table first). Settling it
enqueues the table's next phase at once, so a table recovers in order without a task per
phase waiting on another. It enqueues one phase at most once per deadline, so a long wallet
outage does not flood the queue. Each sweep also measures settlement lag: the age of the
oldest unsettled phase, the unsettled phases, and the tables stalled past
``KISHPA_STALL_AFTER``.

The index is only an index: the phases come from the outbox and settled hashes. Once every
``KISHPA_REINDEX_INTERVAL`` (60 s) one sweep, whichever worker runs it, first rebuilds it
from the outboxes with a SCAN, so a table whose index entry was lost is swept again within
that interval and one sweep.

The reconciliation checks the wallet's ledger every minute and reports discrepancies as a
metric and as the structured log line ``event=wallet_reconciliation_failed`` that an alert
fires on.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import redis

from services.common.logging import get_logger
from shared import keys
from shared.phase_record import PhaseRef
from workers import metrics
from workers.celery_app import PERIODIC_CHECK, kishpa_task
from workers.config import worker_config
from workers.deadletter import is_dead_lettered
from workers.enqueue import enqueue_settlement
from workers.outbox import (
    PendingPhase,
    claim_enqueue,
    enqueued_marker,
    pending_tables,
    rebuild_unsettled_index,
)
from workers.settlement import redis_client

log = get_logger(__name__)

SWEEP_TASK = "kishpa.sweep_outboxes"
RECONCILE_TASK = "kishpa.reconcile_wallet"

__all__ = ["enqueued_marker", "rebuild_if_due", "sweep", "sweep_report"]

REBUILT_MARKER = f"kishpa:unsettled:{{{keys.shard_tag(0)}}}:rebuilt"
"""Set (NX, with the interval as expiry) by the sweep that rebuilds the unsettled index, so
one sweep per interval rebuilds whatever the number of workers. An index key like the
others (shard 0's hash tag), so it needs no slot of its own on a cluster."""


def stalled_marker(table_id: str) -> str:
    """Key that limits the ``settlement_table_stalled`` warning to one per table per period."""
    return f"kishpa:sweeper:{{{table_id}}}:stalled"


def rebuild_if_due(client: redis.Redis, *, now_ms: int, interval_s: float) -> int | None:
    """Rebuild the unsettled index from the outboxes if no sweep did within ``interval_s``;
    returns how many missing entries the rebuild put back, or None when it was not due."""
    period_ms = max(int(interval_s * 1000), 1000)
    if not client.set(REBUILT_MARKER, now_ms, nx=True, px=period_ms):
        return None
    return rebuild_unsettled_index(client)


@dataclass(slots=True)
class SweepReport:
    """What one sweep found and did."""

    enqueued: list[PhaseRef] = field(default_factory=list)
    unsettled: int = 0
    oldest_age_s: float = 0.0
    stalled: list[str] = field(default_factory=list)
    unreachable: list[str] = field(default_factory=list)
    """Index shards and tables skipped because their Redis node did not answer (a cluster
    master that is down: the other masters' tables are swept all the same)."""


def _live(client: redis.Redis, pending: list[PendingPhase]) -> list[PendingPhase]:
    """The phases not in the dead-letter list (those wait for an operator, and alert)."""
    return [p for p in pending if not is_dead_lettered(client, p.ref)]


def sweep_report(
    client: redis.Redis,
    *,
    deadline_s: float,
    now_ms: int,
    stall_after_s: float = 60.0,
    enqueue: Callable[..., None] = enqueue_settlement,
) -> SweepReport:
    """One sweep: enqueue the earliest unsettled phase of every table where it is older than
    ``deadline_s`` (oldest first), and measure the lag. ``enqueue`` is called with the
    keyword ids of ``kishpa.settle_phase``."""
    report = SweepReport()
    due: list[tuple[int, PhaseRef]] = []
    for table_id, pending in pending_tables(client, unreachable=report.unreachable):
        try:
            live = _live(client, pending)
        except redis.RedisError as exc:  # its dead-letter shard's master is down
            report.unreachable.append(f"{table_id}: {exc!r}")
            continue
        if not live:
            continue
        report.unsettled += len(live)
        # An unreadable record has no time: treat it as due now (its task dead-letters it).
        created = [p.created_ms for p in live if p.created_ms is not None]
        oldest_ms = min(created) if created else now_ms
        age_s = max(0.0, (now_ms - oldest_ms) / 1000)
        report.oldest_age_s = max(report.oldest_age_s, age_s)
        if age_s >= stall_after_s:
            report.stalled.append(table_id)
        earliest = live[0]
        if earliest.created_ms is None or earliest.created_ms <= now_ms - deadline_s * 1000:
            due.append((earliest.created_ms or 0, earliest.ref))
    for _created, ref in sorted(due, key=lambda d: d[0]):
        try:
            if not claim_enqueue(client, ref, now_ms=now_ms, deadline_s=deadline_s):
                continue  # enqueued again within the deadline (by a sweep or a waiting task)
        except redis.RedisError as exc:
            report.unreachable.append(f"{ref.table_id}: {exc!r}")
            continue
        enqueue(table_id=ref.table_id, round_no=ref.round_no, phase=ref.phase)
        report.enqueued.append(ref)
        metrics.SWEPT.inc()
        log.warning(
            "unsettled_phase_reenqueued",
            table_id=ref.table_id,
            round=ref.round_no,
            phase=ref.phase,
        )
    for table_id in report.stalled:
        period_ms = max(int(stall_after_s * 1000), 1000)
        try:
            marked = client.set(stalled_marker(table_id), now_ms, nx=True, px=period_ms)
        except redis.RedisError:
            marked = True  # cannot keep it to once per period: say it anyway
        if marked:
            log.warning("settlement_table_stalled", table_id=table_id, stall_after_s=stall_after_s)
    if report.unreachable:
        log.warning(
            "sweep_partial",
            unreachable=len(report.unreachable),
            first=report.unreachable[0][:200],
        )
    return report


def sweep(
    client: redis.Redis,
    *,
    deadline_s: float,
    now_ms: int,
    enqueue: Callable[..., None] = enqueue_settlement,
) -> list[PhaseRef]:
    """Enqueue the phases :func:`sweep_report` finds due; returns those enqueued."""
    return sweep_report(client, deadline_s=deadline_s, now_ms=now_ms, enqueue=enqueue).enqueued


@kishpa_task(SWEEP_TASK, ignore_result=True)
def sweep_outboxes() -> dict[str, Any]:
    """Celery task ``kishpa.sweep_outboxes``: one sweep of the unsettled tables (after a
    rebuild of their index, once per ``KISHPA_REINDEX_INTERVAL``)."""
    config = worker_config()
    client = redis_client()
    now = time.time_ns() // 1_000_000
    try:
        restored = rebuild_if_due(client, now_ms=now, interval_s=config.reindex_interval_s)
    except redis.RedisError as exc:
        # A master is down (SCAN visits them all): sweep what the index holds meanwhile.
        log.warning("unsettled_index_rebuild_failed", error=repr(exc))
        restored = None
    if restored is not None:
        # A missing entry is a lost index write (or a table settling during the rebuild).
        log.log(20 if restored else 10, "unsettled_index_rebuilt", restored=restored)
    report = sweep_report(
        client,
        deadline_s=config.settle_deadline_s,
        now_ms=now,
        stall_after_s=config.stall_after_s,
    )
    metrics.OLDEST_UNSETTLED.set(report.oldest_age_s)
    metrics.UNSETTLED.set(report.unsettled)
    metrics.STALLED_TABLES.set(len(report.stalled))
    metrics.LAST_SWEEP.set(now / 1000)
    # Nothing to do is the normal case: say so only at debug level.
    log.log(
        20 if report.enqueued else 10,
        "sweep_done",
        enqueued=len(report.enqueued),
        unsettled=report.unsettled,
        oldest_unsettled_s=round(report.oldest_age_s, 3),
    )
    return {"enqueued": len(report.enqueued)}


def reconcile(database_url: str) -> list[str]:
    """Run the wallet's reconciliation against ``database_url``; the discrepancies found."""
    # Imported here: only the process running the check needs the wallet's SQL stack.
    from services.wallet.reconcile import reconcile_url

    report = reconcile_url(database_url, source="beat")
    return [f"{d.check} {d.subject}: {d.detail}" for d in report.discrepancies]


@kishpa_task(RECONCILE_TASK, **PERIODIC_CHECK)
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
        log.debug("wallet_reconciliation_clean")
    return {"discrepancies": len(discrepancies)}
