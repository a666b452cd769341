"""The :class:`~shared.tasks.Enqueue` port over Celery: publish ``kishpa.settle_phase`` by name.

A producer only: it needs the broker's URL and the queue, never the workers' application,
tasks or their dependencies (the wallet client, the rules).
"""

from __future__ import annotations

from celery import Celery

from shared.tasks import DEFAULT_QUEUE, SETTLE_TASK, settle_kwargs


class CeleryEnqueue:
    """Sends settlement tasks to the workers' queue on ``broker_url``."""

    def __init__(self, broker_url: str, *, queue: str = DEFAULT_QUEUE) -> None:
        self.queue = queue
        self._app = Celery("kishpa-enqueue", set_as_current=False)
        self._app.conf.update(
            broker_url=broker_url,
            task_default_queue=queue,
            task_serializer="json",
            accept_content=["json"],
            broker_connection_retry_on_startup=True,
        )

    def __call__(self, *, table_id: str, round_no: int, phase: str) -> None:
        """Blocking (a broker round trip); asyncio callers run it in a thread."""
        kwargs = settle_kwargs(table_id=table_id, round_no=round_no, phase=phase)
        self._app.send_task(SETTLE_TASK, kwargs=kwargs, queue=self.queue, ignore_result=True)
