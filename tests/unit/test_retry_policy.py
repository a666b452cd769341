"""The one retry policy (shared/retry.py) and its users: the SDK, the workers, the services."""

from __future__ import annotations

import ast
import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

import grpc
import pytest
import redis.exceptions
from hypothesis import given
from hypothesis import strategies as st

import sdk.retry
from sdk import NO_RETRY
from sdk.errors import KishpaError
from services.common.errors import failure_of
from shared import retry
from workers.celery_app import is_transient as worker_is_transient

pytestmark = pytest.mark.unit


class _Call(grpc.RpcError, grpc.Call):  # type: ignore[misc]
    def __init__(self, code: grpc.StatusCode, trailers: tuple[tuple[str, str], ...] = ()) -> None:
        self._code, self._trailers = code, trailers

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return "details"

    def trailing_metadata(self) -> tuple[tuple[str, str], ...]:
        return self._trailers

    def initial_metadata(self) -> tuple[()]:
        return ()

    def is_active(self) -> bool:
        return False

    def time_remaining(self) -> None:
        return None

    def cancel(self) -> bool:
        return False

    def add_callback(self, callback: object) -> bool:
        return False


@given(st.integers(min_value=0, max_value=200))
def test_every_pause_is_jittered_within_half_to_all_of_a_capped_ceiling(attempt: int) -> None:
    policy = retry.Backoff(budget_s=30, first_delay_s=0.1, max_delay_s=2.0)
    ceiling = min(2.0, 0.1 * 2**attempt)
    assert ceiling / 2 <= policy.delay(attempt) <= ceiling <= 2.0


def test_the_budget_bounds_the_tries() -> None:
    policy = retry.Backoff(budget_s=1.0)
    deadline = policy.deadline(now=0.0)  # long past: nothing more may start
    assert not policy.may_retry(0, deadline, 0.1)
    assert policy.may_retry(0, policy.deadline(), 0.5)
    assert not policy.may_retry(0, policy.deadline(), 1.5)  # the pause outlasts the budget
    assert not NO_RETRY.may_retry(0, NO_RETRY.deadline() + 100, 0.0)  # one try only
    assert not retry.Backoff(attempts=3).may_retry(2, 1e18, 0.0)
    assert retry.Backoff(attempts=3).may_retry(1, 1e18, 0.0)


def test_the_client_budget_is_thirty_seconds_and_configurable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(retry.BUDGET_ENV, raising=False)
    assert retry.client_backoff().budget_s == 30.0
    monkeypatch.setenv(retry.BUDGET_ENV, "90")
    assert retry.client_backoff().budget_s == 90.0
    monkeypatch.setenv(retry.BUDGET_ENV, "soon")
    with pytest.raises(ValueError, match="KISHPA_RETRY_BUDGET_S"):
        retry.client_backoff()


@pytest.mark.parametrize(
    ("code", "hinted", "expected"),
    [
        (grpc.StatusCode.UNAVAILABLE, False, True),
        (grpc.StatusCode.DEADLINE_EXCEEDED, False, True),
        (grpc.StatusCode.ABORTED, False, True),
        (grpc.StatusCode.RESOURCE_EXHAUSTED, False, False),  # "table full" stays full
        (grpc.StatusCode.RESOURCE_EXHAUSTED, True, True),  # a rate limit says when
        (grpc.StatusCode.INVALID_ARGUMENT, False, False),
        (grpc.StatusCode.FAILED_PRECONDITION, False, False),
        (grpc.StatusCode.UNAUTHENTICATED, False, False),
        (grpc.StatusCode.INTERNAL, False, False),
    ],
)
def test_one_list_of_retryable_codes_for_every_caller(
    code: grpc.StatusCode, hinted: bool, expected: bool
) -> None:
    assert retry.is_retryable(code, hinted=hinted) is expected
    trailers = (("retry_after_ms", "250"),) if hinted else ()
    # The workers' view is the same policy ...
    assert worker_is_transient(_Call(code, trailers)) is expected
    # ... and so is the SDK's (an error it raises says whether it is worth repeating).
    if not hinted:
        assert KishpaError(code, "", "m").retryable is expected


def test_the_sdk_names_are_the_policy_itself() -> None:
    assert sdk.retry.RETRYABLE is retry.RETRYABLE_CODES
    assert sdk.retry.STREAM_RETRYABLE is retry.STREAM_REOPEN_CODES
    assert sdk.retry.RetryPolicy is retry.Backoff
    assert grpc.StatusCode.CANCELLED in retry.STREAM_REOPEN_CODES  # a server going away


@pytest.mark.parametrize(
    "exc",
    [
        redis.exceptions.ConnectionError("down"),
        redis.exceptions.TimeoutError("slow"),
        redis.exceptions.ClusterDownError("CLUSTERDOWN The cluster is down"),
        redis.exceptions.TryAgainError("TRYAGAIN"),
        redis.exceptions.MasterDownError("MASTERDOWN"),
        redis.exceptions.SlotNotCoveredError("slot 7"),
    ],
)
def test_a_transient_redis_error_is_retried_by_workers_and_unavailable_from_services(
    exc: Exception,
) -> None:
    assert worker_is_transient(exc)
    failure = failure_of(exc)
    assert failure is not None
    assert failure.code == grpc.StatusCode.UNAVAILABLE  # never INTERNAL


def test_a_redis_command_error_is_neither() -> None:
    exc = redis.exceptions.ResponseError("WRONGTYPE")
    assert not worker_is_transient(exc)
    assert failure_of(exc) is None  # a bug: INTERNAL, logged


FAST = retry.Backoff(budget_s=60, first_delay_s=0.001, max_delay_s=0.002, attempts=4)


async def test_retrying_tries_again_after_a_retryable_code_and_returns_the_answer() -> None:
    results: list[BaseException | str] = [
        _Call(grpc.StatusCode.UNAVAILABLE),
        _Call(grpc.StatusCode.ABORTED),
        "answer",
    ]
    notes: list[tuple[int, grpc.StatusCode]] = []

    async def attempt() -> str:
        result = results.pop(0)
        if isinstance(result, BaseException):
            raise result
        return result

    def note(tried: int, exc: BaseException, pause: float) -> None:
        assert 0 < pause <= FAST.max_delay_s
        notes.append((tried, exc.code()))  # type: ignore[attr-defined]

    assert await retry.retrying(attempt, FAST, on_retry=note) == "answer"
    assert notes == [(0, grpc.StatusCode.UNAVAILABLE), (1, grpc.StatusCode.ABORTED)]


async def test_retrying_gives_up_at_once_on_a_code_it_was_not_told_to_retry() -> None:
    calls = 0

    async def attempt() -> None:
        nonlocal calls
        calls += 1
        raise _Call(grpc.StatusCode.ABORTED)

    unreachable = retry.code_in(retry.UNREACHABLE_CODES)
    with pytest.raises(grpc.RpcError):
        await retry.retrying(attempt, FAST, retry_on=unreachable)
    assert calls == 1  # ABORTED is retryable in general, not by this caller


def test_retrying_sync_stops_after_the_policys_attempts_with_the_last_error() -> None:
    calls, pauses = 0, []

    def attempt() -> None:
        nonlocal calls
        calls += 1
        raise redis.exceptions.ConnectionError(f"try {calls}")

    with pytest.raises(redis.exceptions.ConnectionError, match="try 4"):
        retry.retrying_sync(attempt, FAST, sleep=pauses.append)
    assert calls == FAST.attempts == 4
    assert len(pauses) == 3


def test_retrying_sync_respects_the_deadline() -> None:
    calls = 0

    def attempt() -> None:
        nonlocal calls
        calls += 1
        raise redis.exceptions.TimeoutError("slow")

    with pytest.raises(redis.exceptions.TimeoutError):
        retry.retrying_sync(attempt, FAST, deadline=0.0, sleep=lambda _: None)  # long past
    assert calls == 1


async def test_a_pause_the_server_named_replaces_the_policys() -> None:
    # A rate limit says when to come back: that pause, not the policy's (capped at 2 ms).
    limited = _Call(grpc.StatusCode.RESOURCE_EXHAUSTED, (("retry_after_ms", "30"),))
    results: list[BaseException | str] = [limited, "answer"]
    pauses: list[float] = []

    async def attempt() -> str:
        result = results.pop(0)
        if isinstance(result, BaseException):
            raise result
        return result

    answer = await retry.retrying(
        attempt,
        FAST,
        pause_hint=lambda exc: 0.03 if exc is limited else None,
        on_retry=lambda _tried, _exc, pause: pauses.append(pause),
    )
    assert (answer, pauses) == ("answer", [0.03])


async def test_a_client_budget_counts_from_the_first_failure() -> None:
    # The first try outlasts the whole budget before it fails (a call's own deadline):
    # counted from the start nothing is left; counted from the failure it is tried again.
    policy = retry.Backoff(budget_s=0.05, first_delay_s=0.001, max_delay_s=0.002)

    def slow_then_answer() -> Callable[[], Awaitable[str]]:
        tries = 0

        async def attempt() -> str:
            nonlocal tries
            tries += 1
            if tries == 1:
                await asyncio.sleep(0.1)
                raise _Call(grpc.StatusCode.UNAVAILABLE)
            return "answer"

        return attempt

    with pytest.raises(grpc.RpcError):
        await retry.retrying(slow_then_answer(), policy)
    assert await retry.retrying(slow_then_answer(), policy, from_first_failure=True) == "answer"


def test_an_answer_between_failures_starts_a_new_outage() -> None:
    # A stream's loop: its attempts are spent, then a message arrives (reset): the next
    # failure has the whole allowance again, from the first pause.
    attempts = retry.Attempts(FAST, from_first_failure=True)
    down = redis.exceptions.ConnectionError("down")
    pauses = []
    while (pause := attempts.pause_after(down)) is not None:
        pauses.append(pause)
        attempts.next()
    assert len(pauses) == FAST.attempts - 1
    assert attempts.pause_after(redis.exceptions.ResponseError("WRONGTYPE")) is None
    attempts.reset()
    first = attempts.pause_after(down)
    assert first is not None
    assert first <= FAST.first_delay_s


SOURCES = ("services", "workers", "sdk", "cli", "shared", "archive")


def test_no_module_but_the_retry_policy_lists_retryable_codes() -> None:
    # docs/operations.md "Retries": a set, tuple or list naming two of the retryable codes
    # (or CANCELLED) anywhere else is a second policy.
    names = {code.name for code in retry.STREAM_REOPEN_CODES}
    root = Path(retry.__file__).resolve().parents[1]
    found = []
    for directory in SOURCES:
        for path in (root / directory).rglob("*.py"):
            if path == Path(retry.__file__).resolve():
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, (ast.Set, ast.Tuple, ast.List)):
                    codes = [
                        e.attr
                        for e in node.elts
                        if isinstance(e, ast.Attribute) and e.attr in names
                    ]
                    if len(codes) >= 2:
                        found.append(f"{path.relative_to(root)}:{node.lineno}")
    assert found == []
