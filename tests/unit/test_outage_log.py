"""The Redis outage log: one WARNING when it starts, one with its length when it ends."""

from __future__ import annotations

import pytest
import redis.exceptions
import structlog.testing

from services.common.outage import ENDED, STARTED, RedisOutage, is_transient_redis_error

pytestmark = pytest.mark.unit


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_an_outage_logs_one_warning_at_each_end_with_its_length() -> None:
    clock = Clock()
    outage = RedisOutage(clock)
    with structlog.testing.capture_logs() as logs:
        outage.answered()  # Redis answers: nothing to say
        clock.now = 101.0
        for _ in range(30):  # every loop and handler meets the outage
            outage.failed(redis.exceptions.TimeoutError("read"), where="sweep")
            clock.now += 0.5
        outage.answered()
        outage.answered()
    assert [(line["event"], line["log_level"]) for line in logs] == [
        (STARTED, "warning"),
        (ENDED, "warning"),
    ]
    # From the last answer (100.0) to the first after it (101.0 + 30 * 0.5 = 116.0).
    assert logs[1]["outage_s"] == 16.0
    assert logs[1]["failed_commands"] == 30


def test_an_outage_without_a_recent_answer_starts_at_its_first_failure() -> None:
    clock = Clock()
    outage = RedisOutage(clock)
    outage.answered()
    clock.now = 200.0  # long quiet, then a failure
    with structlog.testing.capture_logs() as logs:
        outage.failed(redis.exceptions.ConnectionError("refused"), where="rpc")
        clock.now = 203.0
        outage.answered()
    assert logs[1]["outage_s"] == 3.0


def test_only_transient_redis_errors_are_an_outage() -> None:
    wrapped = RuntimeError("enqueue failed")
    wrapped.__cause__ = redis.exceptions.ConnectionError("reset")
    assert is_transient_redis_error(redis.exceptions.TimeoutError())
    assert is_transient_redis_error(wrapped)
    assert not is_transient_redis_error(redis.exceptions.ResponseError("WRONGTYPE"))
    assert not is_transient_redis_error(KeyError("bug"))
    outage = RedisOutage(Clock())
    assert not outage.absorbs(KeyError("bug"), where="x")
    assert not outage.ongoing
