"""The settlement hand-off between the table service and the workers: task name, queue, port.

The table service commits a phase record to the outbox (``phase_record``), then asks for it
to be settled through an :class:`Enqueue` port. The task travels by name on a queue, so the
sender needs neither the workers' code nor their dependencies; the workers register the task
under the same name. Losing the message is safe: the workers' sweeper finds the record.
"""

from __future__ import annotations

from typing import Protocol

SETTLE_TASK = "kishpa.settle_phase"
"""The Celery task that settles one phase: keyword arguments ``table_id``, ``round_no``,
``phase``."""
QUEUE_ENV = "KISHPA_WORKER_QUEUE"
"""The environment variable naming the queue settlement tasks travel on."""
DEFAULT_QUEUE = "kishpa"


class Enqueue(Protocol):
    """Ask the workers to settle one phase (blocking; a broker round trip)."""

    def __call__(self, *, table_id: str, round_no: int, phase: str) -> None: ...


def settle_kwargs(*, table_id: str, round_no: int, phase: str) -> dict[str, str | int]:
    """The task's keyword arguments, checked (what every sender sends)."""
    if not table_id or round_no < 0 or not phase:
        raise ValueError("table_id, round_no >= 0 and phase are required")
    return {"table_id": table_id, "round_no": round_no, "phase": phase}
