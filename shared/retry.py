"""The one retry policy of the platform: what is worth trying again, how long, how often.

Used by the SDK (and through it ``kishpa play`` and ``kishpa bots``), the settlement workers
and the services; nothing else lists retryable codes or backoff figures (docs/operations.md,
"Retries").

- **What**: a gRPC status in :data:`RETRYABLE_CODES` (the server was unreachable, a deadline
  passed, a conflict persisted), or ``RESOURCE_EXHAUSTED`` when the server said when to retry
  (``RetryInfo``; without it, "table full" is not worth repeating); a Redis error in
  :data:`TRANSIENT_REDIS_ERRORS` (a connection dropped, a cluster electing a master). A stream
  is also reopened after ``CANCELLED`` (:data:`STREAM_REOPEN_CODES`: a server shutting down
  cancels its streams).
- **Safely**: every mutation carries a request id chosen once; a retry sends the same one and
  the server answers a repeat with its first answer. Settlement is idempotent by its key.
- **How**: capped exponential backoff with jitter (:class:`Backoff`), for at most a budget of
  seconds: :data:`CLIENT_BUDGET_S` for players' clients (``KISHPA_RETRY_BUDGET_S``, at least
  30 s: longer than a Redis restart or a service's rolling deploy, shorter than a turn
  timer), the task budget for a settlement task (half the broker's visibility timeout, then
  the sweeper takes over), :data:`SERVICE_BUDGET_S` for one service calling another inside a
  player's request (the player's client retries the whole request).

This module imports nothing of the platform, so every layer may import it.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass
from typing import TypeVar

import grpc
import redis.exceptions
from pydantic import Field, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

RETRYABLE_CODES = frozenset(
    {
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.ABORTED,
    }
)
"""Codes after which the same request (same request id) is sent again."""
HINTED_CODES = frozenset({grpc.StatusCode.RESOURCE_EXHAUSTED})
"""Codes retried only when the server named a delay (a rate limit), after that delay."""
STREAM_REOPEN_CODES = RETRYABLE_CODES | {grpc.StatusCode.CANCELLED}
"""Codes after which a watch stream is reopened from its last event."""
UNREACHABLE_CODES = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED})
"""No answer came: the callee may or may not have acted (an idempotent call may be repeated to
learn which); a service that gets these from another answers its own caller UNAVAILABLE."""

TRANSIENT_REDIS_ERRORS: tuple[type[BaseException], ...] = (
    redis.exceptions.ConnectionError,
    redis.exceptions.TimeoutError,
    # A Redis Cluster answers these while a master restarts or fails over (CLUSTERDOWN,
    # MASTERDOWN), while a slot migrates (TRYAGAIN), or while the client's slot map has a
    # hole until it is refreshed: the same command succeeds a moment later.
    redis.exceptions.ClusterDownError,
    redis.exceptions.TryAgainError,
    redis.exceptions.SlotNotCoveredError,
    redis.exceptions.MasterDownError,
)
"""Redis errors after which the same command may succeed."""

BUDGET_ENV = "KISHPA_RETRY_BUDGET_S"
CLIENT_BUDGET_S = 30.0
"""Default patience of a player's client (SDK, ``kishpa play``, ``kishpa bots``)."""
SERVICE_BUDGET_S = 2.0
"""Patience of a service calling another inside a player's request."""
FIRST_DELAY_S = 0.1
MAX_DELAY_S = 2.0

REDIS_COMMAND_TIMEOUT_S = 5.0
"""Deadline of one Redis command of a service (socket timeout): a Redis that stopped
answering without closing its connections (a black-holed link) is UNAVAILABLE after this,
well within a player's call deadline (15 s), never a hung request."""
REDIS_CONNECT_TIMEOUT_S = 2.0
"""Deadline of opening a connection to Redis."""


def is_retryable(code: grpc.StatusCode, *, hinted: bool = False) -> bool:
    """Whether a call that ended with ``code`` may be sent again (``hinted``: the server
    named a delay)."""
    return code in RETRYABLE_CODES or (hinted and code in HINTED_CODES)


def is_transient(exc: BaseException) -> bool:
    """Whether retrying may succeed where this attempt failed (a gRPC call's code in
    :data:`RETRYABLE_CODES`, or a transient Redis error)."""
    if isinstance(exc, grpc.RpcError) and isinstance(exc, grpc.Call):
        return is_retryable(exc.code(), hinted=has_retry_hint(exc))
    return isinstance(exc, TRANSIENT_REDIS_ERRORS)


def has_retry_hint(call: grpc.Call) -> bool:
    """Whether a failed call names when to retry (the ``retry_after_ms`` trailer the
    services send beside ``google.rpc.RetryInfo``)."""
    try:
        trailers = call.trailing_metadata() or ()
    except Exception:  # a call object that never reached a server has none
        return False
    return any(key == "retry_after_ms" for key, _ in trailers)


class ClientRetrySettings(BaseSettings):
    """Read by the players' clients: the SDK, ``kishpa play``, ``kishpa bots``."""

    model_config = SettingsConfigDict(
        extra="ignore", frozen=True, use_attribute_docstrings=True, env_ignore_empty=True
    )

    budget_s: float = Field(default=CLIENT_BUDGET_S, ge=0, validation_alias=BUDGET_ENV)
    """Seconds a player's client keeps retrying an unreachable server, from the first
    failure of an outage (``0``: no retries)."""


def client_budget_s() -> float:
    """``KISHPA_RETRY_BUDGET_S`` (seconds, default 30; 0 disables client retries); a bad
    value raises ``ValueError`` naming the variable."""
    try:
        return ClientRetrySettings().budget_s
    except ValidationError as exc:
        reason = "; ".join(str(err["msg"]) for err in exc.errors())
        raise ValueError(f"{BUDGET_ENV}: {reason}") from None


@dataclass(frozen=True, slots=True)
class Backoff:
    """Capped exponential backoff with jitter, for at most ``budget_s`` seconds of trying.

    The n-th pause (from 0) is drawn from ``[c/2, c]`` with ``c = min(max_delay_s,
    first_delay_s * 2**n)``: spread enough that clients cut off together do not return
    together, never longer than the cap, so a client notices a server's return within
    ``max_delay_s``. ``attempts`` bounds the tries as well (0: no bound but the budget).
    """

    budget_s: float = CLIENT_BUDGET_S
    first_delay_s: float = FIRST_DELAY_S
    max_delay_s: float = MAX_DELAY_S
    attempts: int = 0

    def delay(self, attempt: int) -> float:
        """Seconds to wait after failed try ``attempt`` (0 = the first)."""
        ceiling = min(self.max_delay_s, self.first_delay_s * 2 ** min(attempt, 30))
        # Jitter only spreads retries of many clients; it needs no unpredictability.
        return random.uniform(ceiling / 2, ceiling)  # noqa: S311

    def deadline(self, now: float | None = None) -> float:
        """The monotonic time after which no try starts."""
        return (time.monotonic() if now is None else now) + self.budget_s

    def may_retry(self, attempt: int, deadline: float, pause: float) -> bool:
        """Whether try ``attempt + 1`` may follow a pause of ``pause`` seconds."""
        if self.attempts and attempt + 1 >= self.attempts:
            return False
        return time.monotonic() + pause <= deadline

    async def sleep(self, attempt: int) -> None:
        """Wait (asyncio) before the try after ``attempt``."""
        await asyncio.sleep(self.delay(attempt))


def client_backoff() -> Backoff:
    """The players' clients' policy: :data:`CLIENT_BUDGET_S` or ``KISHPA_RETRY_BUDGET_S``."""
    return Backoff(budget_s=client_budget_s())


def task_backoff(budget_s: float) -> Backoff:
    """A settlement task's policy: a short first pause, capped at 2 s, within ``budget_s``."""
    return Backoff(budget_s=budget_s, first_delay_s=0.25, max_delay_s=MAX_DELAY_S)


SERVICE_BACKOFF = Backoff(budget_s=SERVICE_BUDGET_S, first_delay_s=0.05, max_delay_s=0.5)
"""A service's policy for its own calls to a dependency inside one request."""

BROKER_RECONNECT = Backoff(budget_s=float("inf"), first_delay_s=0.5, max_delay_s=2.0)
"""A worker reconnecting to its broker: forever, at least every 2 s."""

PUBSUB_RECONNECT = Backoff(budget_s=float("inf"), first_delay_s=0.5, max_delay_s=2.0)
"""A service's Redis pub/sub listener (the table fan-out, matchmaking's ticket notifier)
reconnecting, and the fan-out reading again what it failed to read: forever, at least every
2 s (the streams hold what was published meanwhile)."""


T = TypeVar("T")
RetryNote = Callable[[int, BaseException, float], None]
"""Called before each pause: the failed try (0 = the first), its error, the pause in seconds."""


def code_in(codes: Collection[grpc.StatusCode]) -> Callable[[BaseException], bool]:
    """A ``retry_on`` predicate: a gRPC call that ended with one of ``codes``."""

    def matches(exc: BaseException) -> bool:
        # grpc.aio's AioRpcError has code() without being a grpc.Call.
        code = getattr(exc, "code", None) if isinstance(exc, grpc.RpcError) else None
        return callable(code) and code() in codes

    return matches


class Attempts:
    """The state of one retry loop: how many tries failed and when trying stops.

    :func:`retrying` and :func:`retrying_sync` are built on it; a loop that cannot be one
    awaited call (a stream that yields between its failures) uses it directly:
    :meth:`pause_after` a failure (``None``: give up), :meth:`next` after the pause,
    :meth:`reset` once the other side answered again (a new outage gets the whole budget).

    ``pause_hint`` gives the pause a server named (a rate limit's ``retry_after``), used
    instead of the policy's. The budget counts from the start (``deadline``, monotonic, if
    given), or from the first failure with ``from_first_failure`` (a client: the first
    call may take its whole deadline before it fails).
    """

    def __init__(
        self,
        policy: Backoff,
        *,
        retry_on: Callable[[BaseException], bool] = is_transient,
        pause_hint: Callable[[BaseException], float | None] | None = None,
        deadline: float | None = None,
        from_first_failure: bool = False,
    ) -> None:
        self.policy = policy
        self.retry_on = retry_on
        self.pause_hint = pause_hint
        self.from_first_failure = from_first_failure
        self.until = deadline if deadline is not None or from_first_failure else policy.deadline()
        self.tried = 0

    def pause_after(self, exc: BaseException) -> float | None:
        """The pause before trying again after ``exc``; ``None`` when ``retry_on`` refuses
        it or the budget or the attempts are spent."""
        if not self.retry_on(exc):
            return None
        return self.pause(self.pause_hint(exc) if self.pause_hint is not None else None)

    def pause(self, hinted: float | None = None) -> float | None:
        """The pause before the next try (``hinted``, else the policy's); ``None`` when the
        budget or the attempts are spent."""
        pause = hinted if hinted is not None else self.policy.delay(self.tried)
        if self.until is None:
            self.until = self.policy.deadline()
        return pause if self.policy.may_retry(self.tried, self.until, pause) else None

    def next(self) -> None:
        """A pause was taken: the next try follows."""
        self.tried += 1

    def reset(self) -> None:
        """The other side answered: the next failure starts a new outage."""
        self.tried = 0
        if self.from_first_failure:
            self.until = None


async def retrying(
    attempt: Callable[[], Awaitable[T]],
    policy: Backoff,
    *,
    retry_on: Callable[[BaseException], bool] = is_transient,
    on_retry: RetryNote | None = None,
    deadline: float | None = None,
    pause_hint: Callable[[BaseException], float | None] | None = None,
    from_first_failure: bool = False,
) -> T:
    """Await ``attempt()`` until it succeeds, trying again after an error ``retry_on``
    accepts, with ``policy``'s pauses (or the one ``pause_hint`` finds in the error), until
    its budget (from the start, ``deadline``, or the first failure: see :class:`Attempts`)
    or its number of attempts runs out; then the last error propagates, as does any other
    at once.

    The attempt must be safe to repeat (the same request id, an idempotent call).
    """
    state = Attempts(
        policy,
        retry_on=retry_on,
        pause_hint=pause_hint,
        deadline=deadline,
        from_first_failure=from_first_failure,
    )
    while True:
        try:
            return await attempt()
        except Exception as exc:
            pause = state.pause_after(exc)
            if pause is None:
                raise
            if on_retry is not None:
                on_retry(state.tried, exc, pause)
        await asyncio.sleep(pause)
        state.next()


def retrying_sync(
    attempt: Callable[[], T],
    policy: Backoff,
    *,
    retry_on: Callable[[BaseException], bool] = is_transient,
    on_retry: RetryNote | None = None,
    deadline: float | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """:func:`retrying` for blocking code (the settlement workers)."""
    state = Attempts(policy, retry_on=retry_on, deadline=deadline)
    while True:
        try:
            return attempt()
        except Exception as exc:
            pause = state.pause_after(exc)
            if pause is None:
                raise
            if on_retry is not None:
                on_retry(state.tried, exc, pause)
        sleep(pause)
        state.next()
