"""What two deployables share, and nothing else: the table service and the settlement workers.

- ``keys``: every Redis key of a table (the table service owns the key space; the workers
  touch the outbox, settled, balances and events keys named here);
- ``stream``: the table event stream's entry format (the workers append ``settled``);
- ``phase_record``: the outbox record of one round phase, written by one side, read by the
  other, with one type for both;
- ``tls``: how every gRPC client (services, workers, SDK, CLI) verifies its server and
  presents its own certificate;
- ``tasks``: the settlement task's name, its queue and the :class:`~shared.tasks.Enqueue`
  port; ``celery_enqueue`` is that port over Celery.

It imports nothing from ``services``, ``workers``, ``games`` or the clients (import-linter
checks it in ``make lint``).
"""
