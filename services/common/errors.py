"""The one place where errors become gRPC statuses.

Servicers just raise: a :class:`ServiceError` (or a subclass such as :class:`NotFound`)
or a rules error from ``games.kishpa.errors``. :class:`ErrorInterceptor` turns it into the
canonical status code with a ``google.rpc.ErrorInfo`` detail carrying the machine-readable
``reason`` (``NOT_YOUR_TURN``, ``INSUFFICIENT_FUNDS``...) in the domain ``kishpa.dev``.
A backing store or service that cannot be reached (Redis, a socket, another service's
UNAVAILABLE or DEADLINE_EXCEEDED) becomes ``UNAVAILABLE`` (retryable).
Anything unexpected becomes ``INTERNAL`` with a generic message and is logged with its
traceback on the server only. Clients read the reason back with :func:`error_reason`.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, NoReturn

import grpc
import redis.exceptions
from google.protobuf import any_pb2
from google.rpc import error_details_pb2, status_pb2
from grpc_status import rpc_status

from games.kishpa.errors import IllegalMoveError, InvalidRecordError, RulesError, TileNotationError
from services.common.handlers import wrap_handler
from services.common.logging import get_logger

DOMAIN: Final = "kishpa.dev"
STATUS_DETAILS_KEY: Final = "grpc-status-details-bin"
INTERNAL_MESSAGE: Final = "internal error; it has been logged"
UNAVAILABLE_MESSAGE: Final = "a backing service is unavailable; retry later"

# A backing store that cannot be reached: the request may succeed if retried.
_DEPENDENCY_ERRORS = (
    ConnectionError,
    TimeoutError,
    redis.exceptions.ConnectionError,
    redis.exceptions.TimeoutError,
)
_UNREACHABLE_RPC_CODES = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED})

_log = get_logger(__name__)


class ServiceError(Exception):
    """An error a servicer raises on purpose: a status code, a reason and a clear message."""

    code: grpc.StatusCode = grpc.StatusCode.UNKNOWN

    def __init__(
        self,
        code: grpc.StatusCode,
        reason: str,
        message: str,
        metadata: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.metadata = dict(metadata or {})


class _Canonical(ServiceError):
    """A ServiceError whose status code is fixed by its class."""

    status_code: grpc.StatusCode = grpc.StatusCode.UNKNOWN

    def __init__(
        self, reason: str, message: str, metadata: Mapping[str, str] | None = None
    ) -> None:
        super().__init__(self.status_code, reason, message, metadata)


class InvalidArgument(_Canonical):
    """The request is malformed whatever the state (bad tile, seats out of range...)."""

    status_code = grpc.StatusCode.INVALID_ARGUMENT


class FailedPrecondition(_Canonical):
    """The request is well-formed but the current state refuses it (not your turn...)."""

    status_code = grpc.StatusCode.FAILED_PRECONDITION


class NotFound(_Canonical):
    """The named table, wallet, invite code... does not exist."""

    status_code = grpc.StatusCode.NOT_FOUND


class AlreadyExists(_Canonical):
    """The thing to create exists already (a reused idempotency key with another body...)."""

    status_code = grpc.StatusCode.ALREADY_EXISTS


class PermissionDenied(_Canonical):
    """The caller is known but may not do this (not the table's creator...)."""

    status_code = grpc.StatusCode.PERMISSION_DENIED


class Unauthenticated(_Canonical):
    """The caller could not be identified (missing, expired or forged token)."""

    status_code = grpc.StatusCode.UNAUTHENTICATED


class ResourceExhausted(_Canonical):
    """A limit is reached (table full, queue full, rate limit)."""

    status_code = grpc.StatusCode.RESOURCE_EXHAUSTED


class Aborted(_Canonical):
    """A concurrency conflict that persisted after the bounded retries; the client may retry."""

    status_code = grpc.StatusCode.ABORTED


class Unavailable(_Canonical):
    """A dependency (Redis, the wallet...) cannot be reached right now; retry later."""

    status_code = grpc.StatusCode.UNAVAILABLE


@dataclass(frozen=True, slots=True)
class RpcFailure:
    """What a client will see: status code, reason, message and ErrorInfo metadata."""

    code: grpc.StatusCode
    reason: str
    message: str
    metadata: Mapping[str, str] = field(default_factory=dict)


def failure_of(exc: BaseException) -> RpcFailure | None:
    """The status an expected error maps to, or ``None`` for an unexpected one (a bug)."""
    if isinstance(exc, ServiceError):
        return RpcFailure(exc.code, exc.reason, exc.message, exc.metadata)
    if isinstance(exc, TileNotationError | InvalidRecordError):
        return RpcFailure(grpc.StatusCode.INVALID_ARGUMENT, exc.reason, str(exc))
    if isinstance(exc, IllegalMoveError | RulesError):
        return RpcFailure(grpc.StatusCode.FAILED_PRECONDITION, exc.reason, str(exc))
    if isinstance(exc, _DEPENDENCY_ERRORS) or _is_unreachable_rpc(exc):
        # Retryable for the client; the details (hosts, ports) stay in the server's log.
        return RpcFailure(
            grpc.StatusCode.UNAVAILABLE, "DEPENDENCY_UNAVAILABLE", UNAVAILABLE_MESSAGE
        )
    return None


def _is_unreachable_rpc(exc: BaseException) -> bool:
    # A call to another service (the wallet, the table) that could not be answered in time;
    # any other failed downstream call is a bug in how we called it and stays INTERNAL.
    if not isinstance(exc, grpc.RpcError):
        return False
    code = getattr(exc, "code", None)
    return callable(code) and code() in _UNREACHABLE_RPC_CODES


@contextlib.contextmanager
def validating(what: str, reason: str = "INVALID_ARGUMENT") -> Iterator[None]:
    """Turn a ``ValueError`` raised while parsing client input into ``INVALID_ARGUMENT``.

    A bare ``ValueError`` elsewhere is a bug and stays ``INTERNAL``; wrap only the parsing::

        with validating("tile_ids"):
            faces = [face_of(t) for t in request.tile_ids]
    """
    try:
        yield
    except (ServiceError, RulesError):
        raise
    except ValueError as exc:
        raise InvalidArgument(reason, f"invalid {what}: {exc}") from exc


def to_status(failure: RpcFailure) -> grpc.Status:
    """The ``grpc.Status`` (with an ErrorInfo detail) to abort a call with."""
    info = error_details_pb2.ErrorInfo(
        reason=failure.reason, domain=DOMAIN, metadata=dict(failure.metadata)
    )
    detail = any_pb2.Any()
    detail.Pack(info)
    # grpc.StatusCode values are (int, name) pairs; google.rpc codes use the same numbers.
    code_number: int = failure.code.value[0]
    status = status_pb2.Status(code=code_number, message=failure.message, details=[detail])
    return rpc_status.to_status(status)


async def abort_with(context: grpc.aio.ServicerContext[Any, Any], exc: BaseException) -> NoReturn:
    """Abort the current call for ``exc`` (mapped, or INTERNAL and logged if unexpected)."""
    failure = failure_of(exc)
    if failure is None:
        failure = RpcFailure(grpc.StatusCode.INTERNAL, "INTERNAL", INTERNAL_MESSAGE)
    await context.abort_with_status(to_status(failure))


class ErrorInterceptor(grpc.aio.ServerInterceptor):
    """Maps exceptions escaping servicer methods to statuses (see the module docstring)."""

    async def intercept_service(
        self,
        continuation: Callable[
            [grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler[Any, Any] | None]
        ],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any] | None:
        handler = await continuation(handler_call_details)
        if handler is None:
            return None
        return wrap_handler(handler, handler_call_details.method, _mapping_errors)


@contextlib.asynccontextmanager
async def _mapping_errors(
    method: str, context: grpc.aio.ServicerContext[Any, Any]
) -> AsyncIterator[None]:
    try:
        yield
    except grpc.aio.AbortError:
        raise  # the servicer (or an inner interceptor) already chose the status
    except Exception as exc:
        failure = failure_of(exc)
        if failure is None:
            # Logged here with the traceback; the client gets a generic message only.
            _log.exception("rpc.unexpected_error", method=method, error_type=type(exc).__name__)
        elif failure.code is grpc.StatusCode.UNAVAILABLE:
            _log.warning(
                "rpc.dependency_unavailable",
                method=method,
                error_type=type(exc).__name__,
                exc_info=True,
            )
        await abort_with(context, exc)


# -- client side --------------------------------------------------------------------------


def _status_details(error: grpc.RpcError) -> status_pb2.Status | None:
    trailing = getattr(error, "trailing_metadata", None)
    if trailing is None:
        return None
    for key, value in trailing() or ():
        if key == STATUS_DETAILS_KEY:
            data = value if isinstance(value, bytes) else value.encode("latin-1")
            return status_pb2.Status.FromString(data)
    return None


def error_info(error: grpc.RpcError) -> error_details_pb2.ErrorInfo | None:
    """The ``ErrorInfo`` detail of a failed call (sync or ``grpc.aio``), if it carries one."""
    status = _status_details(error)
    if status is None:
        return None
    for detail in status.details:
        info = error_details_pb2.ErrorInfo()
        if detail.Unpack(info):  # False when the detail is another message type
            return info
    return None


def error_reason(error: grpc.RpcError) -> str | None:
    """The machine-readable reason of a failed call (``"NOT_YOUR_TURN"``...), if any."""
    info = error_info(error)
    return info.reason if info is not None else None
