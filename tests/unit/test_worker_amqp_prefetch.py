"""Where Celery's threads pool touches the consumer's AMQP connection (docs/workers.md).

A late ack itself is safe: Celery 5.7 hands it to the main loop (``Consumer.call_soon_ack``
puts it on the hub). But after a broker reconnect with tasks still running, Celery lowers
the prefetch count and raises it again from each finished task's ack promise
(``Consumer.loop_args`` chains ``_restore_prefetch_count_after_connection_restart`` to it),
and a promise runs what is chained to it in the thread that fulfils it: with
``--pool=threads`` a pool thread, which then sends a synchronous ``basic.qos`` and reads the
consumer's py-amqp connection for its answer while the main loop reads the same socket.

These tests drive Celery's own Consumer, QoS, hub and thread pool; only the count's setter
is the test's (it records the thread it runs in, where the real one writes and reads the
socket), so no broker is needed.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from celery.concurrency.thread import TaskPool
from celery.worker.consumer.consumer import Consumer
from kombu.asynchronous import Hub
from kombu.common import QoS
from vine import promise

from services.common.settings import Settings
from workers.celery_app import celery_settings, create_app
from workers.config import WorkerConfig

pytestmark = pytest.mark.unit

THREADS = 4


def _config(broker_url: str) -> WorkerConfig:
    settings = Settings(service="worker", redis_url="redis://r:6379/0", broker_url=broker_url)
    return WorkerConfig(settings=settings, reconcile_interval_s=0, drift_interval_s=0)


@pytest.fixture
def pool() -> Iterator[TaskPool]:
    threads = TaskPool(limit=THREADS)
    threads.start()
    yield threads
    threads.stop()


def _reconnected_consumer(broker_url: str, pool: TaskPool, qos_threads: list[str]) -> Consumer:
    """A Consumer as Celery leaves it after a reconnect with three tasks still running:
    prefetch lowered to 1 of 4, not yet restored (built without __init__, which would
    start the worker's bootsteps)."""
    consumer = Consumer.__new__(Consumer)
    consumer.app = create_app(_config(broker_url))
    consumer.hub = Hub()
    consumer.pool = pool
    consumer.prefetch_multiplier = 1
    consumer.initial_prefetch_count = 1
    consumer._maximum_prefetch_restored = False
    consumer.qos = QoS(
        lambda prefetch_count: qos_threads.append(threading.current_thread().name), 1
    )
    consumer.qos.prev = 1  # the reduced count was sent on connecting
    return consumer


def _finish_a_task(consumer: Consumer, pool: TaskPool) -> None:
    """Run a task in the pool and ack it from its callback, wired as ``loop_args`` wires a
    received message's ack (late acks: ``Request.on_success`` calls it in the pool)."""
    acked: list[str] = []
    ack = promise(consumer.call_soon_ack, (lambda: acked.append("ack"),))
    ack.then(consumer._restore_prefetch_count_after_connection_restart)
    pool.apply_async(lambda: "settled", callback=lambda _result: ack()).wait(5)
    assert acked == []  # the basic.ack waits on the hub for the main loop, as it should
    assert len(consumer.hub._ready) == 1


def test_celery_sets_the_prefetch_count_from_the_pool_thread_that_acked(pool: TaskPool) -> None:
    # The upstream behaviour the setting below avoids. When a Celery release moves this to
    # the main loop, this test fails: the setting can go then.
    qos_threads: list[str] = []
    consumer = _reconnected_consumer("amqp://guest@mq:5672//", pool, qos_threads)
    consumer.app.conf.worker_enable_prefetch_count_reduction = True  # Celery's default
    _finish_a_task(consumer, pool)
    assert len(qos_threads) == 1
    assert qos_threads[0] != threading.main_thread().name
    assert qos_threads[0] != threading.current_thread().name


def test_an_amqp_worker_never_sets_the_prefetch_count_from_a_pool_thread(pool: TaskPool) -> None:
    assert (
        celery_settings(_config("amqp://guest@mq:5672//"))["worker_enable_prefetch_count_reduction"]
        is False
    )
    qos_threads: list[str] = []
    consumer = _reconnected_consumer("amqp://guest@mq:5672//", pool, qos_threads)
    for _ in range(THREADS):
        _finish_a_task(consumer, pool)
        consumer.hub._ready.clear()
    assert qos_threads == []


def test_a_redis_broker_keeps_celerys_prefetch_reduction() -> None:
    # kombu's Redis channel sets the count in memory (no socket), so nothing to avoid there.
    conf = celery_settings(_config("redis://r:6379/0"))
    assert "worker_enable_prefetch_count_reduction" not in conf
