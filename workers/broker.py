"""kombu's Redis transport, with one guard that keeps a worker alive when Redis dies under it.

The defect (kombu 5.7.0 with Celery 5.7.0, the versions pinned here; the same error as
kombu #970 and #582): when the broker connection breaks, Celery's consumer first
``collect()``s the connection, which ends by detaching the transport from it
(``transport.client = None``), and then ``close()``s it. Closing closes the default channel
again; a channel that holds unacknowledged messages tries to give them back
(``restore_unacked``), which needs a Redis client, which needs a pool, which is rebuilt from
``self.connection.client.hostname``: ``AttributeError: 'NoneType' object has no attribute
'hostname'``. Celery's ``ignore_errors`` swallows connection and channel errors only, so the
AttributeError leaves the consumer, and the worker logs ``Unrecoverable error`` and stops.
It happens exactly when a task holds a message while Redis goes away (acks_late).

The guard: a channel whose connection is gone raises Redis's own ``ConnectionError`` instead,
a connection error Celery expects at that point; it reconnects as after any broker outage.
The unacknowledged messages are not lost: they are still in Redis's ``unacked`` hash and come
back after the visibility timeout (and the sweeper re-enqueues any phase left unsettled).

Also here: the broker connection the worker uses (:class:`BrokerConnection`). Celery's consumer
reconnects with kombu's default pauses, 2 s growing by 2 s up to 30 s: after a 20 s outage the
worker came back up to 10 s after its broker, after a long one up to 30 s. It pauses as the
platform's retry policy says instead (``shared.retry.BROKER_RECONNECT``: 0.5 s, growing by
0.5 s, at most 2 s), for Redis and RabbitMQ alike.

The guard is selected with Celery's ``broker_transport`` setting for ``redis://`` brokers
(:func:`workers.celery_app.celery_settings`). Remove it once a kombu release closes the gap
(``tests/unit/test_worker_broker_guard.py`` shows whether kombu still has it).
"""

from __future__ import annotations

from typing import Any

import redis.exceptions
from celery.app import amqp as celery_amqp
from kombu.connection import Connection
from kombu.transport import redis as kombu_redis

from shared.retry import BROKER_RECONNECT

TRANSPORT = "workers.broker:GuardedRedisTransport"
"""Celery's ``broker_transport`` value for this transport."""
AMQP = "workers.broker:BrokerAMQP"
"""Celery's ``amqp`` class, whose broker connections reconnect at least every 2 s."""


class GuardedChannel(kombu_redis.Channel):
    """A kombu Redis channel that answers a closed connection with a ConnectionError."""

    def _connparams(self, asynchronous: bool = False) -> Any:
        transport = self.connection
        if transport is None or getattr(transport, "client", None) is None:
            raise redis.exceptions.ConnectionError(
                "the broker connection is closed (kombu channel used after close)"
            )
        return super()._connparams(asynchronous=asynchronous)  # type: ignore[no-untyped-call]


class GuardedRedisTransport(kombu_redis.Transport):
    """kombu's Redis transport with :class:`GuardedChannel`."""

    Channel = GuardedChannel


class BrokerConnection(Connection):
    """A kombu connection whose reconnection pauses follow ``BROKER_RECONNECT`` unless the
    caller names its own (Celery's consumer names none)."""

    def _ensure_connection(self, *args: Any, **kwargs: Any) -> Any:
        if len(args) <= 2:  # (errback, max_retries) at most: the pauses are not given
            kwargs.setdefault("interval_start", BROKER_RECONNECT.first_delay_s)
            kwargs.setdefault("interval_step", BROKER_RECONNECT.first_delay_s)
            kwargs.setdefault("interval_max", BROKER_RECONNECT.max_delay_s)
        return super()._ensure_connection(*args, **kwargs)  # type: ignore[no-untyped-call]


class BrokerAMQP(celery_amqp.AMQP):  # type: ignore[misc]
    """Celery's AMQP helper with :class:`BrokerConnection` as its connection class."""

    Connection = BrokerConnection
