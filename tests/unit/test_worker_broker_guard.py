"""The worker's broker guard (workers/broker.py) and its real exit codes (cli/worker_cmd.py).

The guard exists because of a defect in kombu's Redis transport: a channel closed after its
connection was detached rebuilds a pool from ``connection.client.hostname`` and raises an
AttributeError, which Celery's consumer does not expect and which stopped the worker. These
tests reproduce that state with kombu's own objects (no broker needed: the failure happens
before any socket is opened).
"""

from __future__ import annotations

import pytest
import redis.exceptions
from celery import Celery, bootsteps
from kombu.connection import Connection
from kombu.transport import redis as kombu_redis

from cli.worker_cmd import run_celery
from shared.retry import BROKER_RECONNECT
from workers.broker import AMQP, TRANSPORT, BrokerConnection, GuardedRedisTransport
from workers.celery_app import celery_settings, create_app
from workers.config import config_from_settings

pytestmark = pytest.mark.unit

DEAD_BROKER = "redis://127.0.0.1:9/0"  # port 9 (discard): nothing listens


def _detached_channel(transport: str | type) -> kombu_redis.Channel:
    """A channel whose connection was collected, as Celery's consumer leaves it after a
    broker connection error (``transport.client = None``), its pool already dropped."""
    connection = Connection(DEAD_BROKER, transport=transport)
    # Built without __init__, which would connect (and fail: nothing listens): the state is
    # the one a closed channel has, its transport detached from the connection.
    channel = connection.transport.Channel.__new__(connection.transport.Channel)
    channel.connection = connection.transport
    channel._pool = None
    connection.transport.client = None
    return channel


def test_kombu_still_fails_with_attribute_error_on_a_detached_channel() -> None:
    # The upstream defect this guard works around. When a kombu release fixes it, this test
    # fails: drop workers/broker.py's guard then.
    channel = _detached_channel(kombu_redis.Transport)
    with pytest.raises(AttributeError, match="hostname"):
        channel._connparams()


def test_the_guard_turns_it_into_a_connection_error_celery_recovers_from() -> None:
    channel = _detached_channel(GuardedRedisTransport)
    with pytest.raises(redis.exceptions.ConnectionError, match="closed"):
        channel._connparams()
    # ... one of the errors Celery's consumer (kombu's ignore_errors) treats as a lost broker.
    assert redis.exceptions.ConnectionError in GuardedRedisTransport.connection_errors


def test_the_guard_is_the_transport_of_a_redis_broker_only() -> None:
    from services.common.settings import Settings

    redis_cfg = config_from_settings(Settings(service="worker", broker_url=DEAD_BROKER))
    amqp_cfg = config_from_settings(
        Settings(service="worker", broker_url="amqp://guest:guest@127.0.0.1:5672//")
    )
    assert celery_settings(redis_cfg)["broker_transport"] == TRANSPORT
    assert "broker_transport" not in celery_settings(amqp_cfg)
    app = create_app(redis_cfg)
    assert app.amqp.Connection is BrokerConnection
    assert AMQP == "workers.broker:BrokerAMQP"


def test_the_broker_connection_reconnects_at_least_every_two_seconds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: dict[str, float] = {}
    slept: list[float] = []
    monkeypatch.setattr("kombu.utils.functional.sleep", slept.append)  # no real waiting

    class Recording(BrokerConnection):
        def _connection_factory(self) -> None:
            raise ConnectionRefusedError("down")

    connection = Recording(DEAD_BROKER)

    def errback(exc: BaseException, interval: float) -> None:
        seen[str(len(seen))] = interval

    with pytest.raises(Exception, match="down"):
        connection.ensure_connection(errback, 7, callback=None)
    # Growing by 0.5 s from 0.5 s, capped at 2 s (kombu's default: 2 s growing to 30 s).
    assert list(seen.values())[:6] == [0.5, 1.0, 1.5, 2.0, 2.0, 2.0]
    assert max(seen.values()) == BROKER_RECONNECT.max_delay_s == 2.0


class _Fails(bootsteps.StartStopStep):
    """A worker step that fails at start: Celery logs 'Unrecoverable error' and stops."""

    def start(self, parent: object) -> None:
        raise RuntimeError("broken on purpose")


def test_kishpa_worker_returns_celerys_exit_code() -> None:
    app = Celery("exit-code-test", broker="memory://", set_as_current=False)
    app.steps["worker"].add(_Fails)
    argv = ["worker", "--pool=solo", "--without-gossip", "--without-mingle", "--loglevel=ERROR"]
    # Celery's own worker_main gives the code away (returns None)...
    assert app.worker_main(argv=argv) is None
    # ... run_celery (what `kishpa worker` and `kishpa beat` return) passes it on.
    assert run_celery(app, argv) == 1


def test_a_celery_command_that_raises_exits_one() -> None:
    app = Celery("exit-code-test", broker="memory://", set_as_current=False)
    assert run_celery(app, ["worker", "--pool=no-such-pool"]) != 0
