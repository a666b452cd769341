"""Enqueue settlement from any process without importing the task code.

The table service calls :func:`enqueue_settlement` after the commit that wrote a phase
record to the table's outbox. The task travels by name, so the caller needs only the Celery
application's configuration (the broker URL), not the workers' dependencies.
"""

from __future__ import annotations

from workers.celery_app import app

SETTLE_TASK = "kishpa.settle_phase"


def enqueue_settlement(*, table_id: str, round_no: int, phase: str) -> None:
    """Ask the workers to settle ``phase`` of round ``round_no`` at ``table_id``.

    Blocking (a broker round trip); asyncio callers run it in a thread
    (``await asyncio.to_thread(enqueue_settlement, ...)``). Losing this message is safe:
    the sweeper enqueues any phase left unsettled past its deadline.
    """
    if not table_id or round_no < 0 or not phase:
        raise ValueError("table_id, round_no >= 0 and phase are required")
    app.send_task(
        SETTLE_TASK,
        kwargs={"table_id": table_id, "round_no": round_no, "phase": phase},
        ignore_result=True,
    )
