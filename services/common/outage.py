"""An expected Redis outage, logged as an operator expects: one WARNING when it starts, one
WARNING with its length when it ends; no ERROR, no traceback, no line per failed command.

Every loop and handler of a service that meets a transient Redis error (a connection lost, a
command past its deadline, a cluster electing a master: :data:`shared.retry.
TRANSIENT_REDIS_ERRORS`) reports it here instead of logging it; the loops that talk to Redis
on a schedule (the table timers, matchmaking's sweeper, the durability probe) report each
success, which ends the outage. The process's outage is one: the first report opens it,
whoever sees Redis answer again closes it (docs/operations.md, "Redis outages").
"""

from __future__ import annotations

import time
from collections.abc import Callable

import structlog

from shared.retry import REDIS_COMMAND_TIMEOUT_S, TRANSIENT_REDIS_ERRORS

log = structlog.get_logger("kishpa.outage")

RECENT_SLACK_S = 2.5
"""How much older than a command's deadline the last answer may be and still mark the
outage's start."""

STARTED = "redis_outage_started"
ENDED = "redis_outage_ended"


def is_transient_redis_error(exc: BaseException) -> bool:
    """Whether ``exc`` (or what it was raised from) is Redis being away for a while."""
    seen: BaseException | None = exc
    for _ in range(4):  # a short chain: the error itself, what it wraps
        if seen is None:
            return False
        if isinstance(seen, TRANSIENT_REDIS_ERRORS):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


class RedisOutage:
    """The process's view of whether Redis answers (one per process: :data:`REDIS`)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.since: float | None = None
        """When the current outage started (None: Redis answers)."""
        self.failures = 0
        """Transient errors met during the current outage."""
        self.last_answered: float | None = None
        """When Redis last answered (a scheduled loop reports every success)."""

    @property
    def ongoing(self) -> bool:
        return self.since is not None

    def failed(self, exc: BaseException, *, where: str) -> None:
        """A transient Redis error met by ``where``: the first one starts the outage."""
        self.failures += 1
        if self.since is not None:
            return
        now = self.clock()
        # A command fails only at its deadline: the outage began at the last answer seen,
        # when that is recent enough to be the failed command's own start (its deadline,
        # plus the longest interval of the loops that report answers, 1 s, plus slack).
        recent = self.last_answered is not None and now - self.last_answered <= (
            REDIS_COMMAND_TIMEOUT_S + RECENT_SLACK_S
        )
        self.since = self.last_answered if recent and self.last_answered is not None else now
        log.warning(STARTED, where=where, error=f"{type(exc).__name__}: {exc}")

    def absorbs(self, exc: BaseException, *, where: str) -> bool:
        """Report ``exc`` if it is Redis being away (then the caller logs nothing more)."""
        if not is_transient_redis_error(exc):
            return False
        self.failed(exc, where=where)
        return True

    def answered(self) -> None:
        """Redis answered a command: the outage, if any, is over."""
        now = self.last_answered = self.clock()
        if self.since is None:
            return
        length = now - self.since
        failures, self.since, self.failures = self.failures, None, 0
        log.warning(ENDED, outage_s=round(length, 1), failed_commands=failures)


REDIS = RedisOutage()
