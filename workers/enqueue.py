"""Enqueue settlement from inside the workers (the sweeper) with the workers' own app.

Other processes (the table service) use :class:`shared.celery_enqueue.CeleryEnqueue`: the
task name, the queue and the :class:`~shared.tasks.Enqueue` port are in ``shared.tasks``.
"""

from __future__ import annotations

from shared.tasks import SETTLE_TASK, settle_kwargs
from workers.celery_app import app

__all__ = ["SETTLE_TASK", "enqueue_settlement"]


def enqueue_settlement(*, table_id: str, round_no: int, phase: str) -> None:
    """Ask the workers to settle ``phase`` of round ``round_no`` at ``table_id``.

    Blocking (a broker round trip). Losing this message is safe: the sweeper enqueues any
    phase left unsettled past its deadline.
    """
    kwargs = settle_kwargs(table_id=table_id, round_no=round_no, phase=phase)
    app.send_task(SETTLE_TASK, kwargs=kwargs, ignore_result=True)
