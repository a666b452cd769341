"""What more than one deployable or client needs, in three kinds (the name ``shared`` stays for
now; these are its parts):

**Hand-off formats between the table service and the settlement workers**

- ``keys``: every Redis key of a table (the table service owns the key space; the workers
  touch the outbox, settled, balances and events keys named here);
- ``stream``: the table event stream's entry format (the workers append ``settled``);
- ``phase_record``: the outbox record of one round phase, written by one side, read by the
  other, with one type for both;
- ``tasks``: the settlement task's name, its queue and the :class:`~shared.tasks.Enqueue`
  port; ``celery_enqueue`` is that port over Celery.

**Transport every client uses (services, workers, the SDK and the CLI)**

- ``tls``: how a gRPC client verifies its server and presents its own certificate, and the
  file-stamping and key-match helpers both client and server sides use to follow a rotation;
- ``retry``: the one retry policy (which codes are retried, the backoff, the deadlines).

**Schema histories** (the wallet's ledger and the round archive)

- ``migrations``: Alembic configured in code, one :class:`~shared.migrations.Migrations` per
  database history and the one ``env.py`` body.

It imports nothing from ``services``, ``workers``, ``games`` or the clients (import-linter
checks it in ``make lint``).
"""
