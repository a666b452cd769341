"""The one error model of every service: domain errors carry a category and a reason; one
table (:data:`CATEGORY_CODES`) maps categories to gRPC status codes.

Servicers and use cases just raise. A *domain error* is a :class:`DomainError` (a
:class:`ServiceError` such as :class:`NotFound`, a table or wallet error) or a rules error
from ``games`` (whose ``category`` attribute is one of the :class:`Category` values, as a
plain string: the rules layer imports nothing). Each carries a machine-readable ``reason``,
one of ``kishpa.common.v1.ErrorReason`` (``NOT_YOUR_TURN``, ``INSUFFICIENT_FUNDS``...), and
a short message. :class:`ErrorInterceptor` turns it into a status with a
``google.rpc.ErrorInfo`` detail (domain ``kishpa.dev``), plus a ``google.rpc.RetryInfo``
when the error says when to retry.

A refusal from another Kishpa service we called is translated, not masked: it keeps its
code and reason (:func:`failure_of`). A backing store or service that cannot be reached
(Redis, a socket, another service's UNAVAILABLE or DEADLINE_EXCEEDED) becomes
``UNAVAILABLE`` (retryable). Anything else is a bug: ``INTERNAL`` with a generic message,
logged with its traceback on the server only. Messages are bounded
(:data:`MAX_MESSAGE_CHARS`) and never name a Python class. Clients read the reason back with
:func:`error_reason`.
"""

from __future__ import annotations

import contextlib
import enum
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final, NoReturn

import grpc
import sqlalchemy.exc
from google.protobuf import any_pb2, duration_pb2
from google.rpc import error_details_pb2, status_pb2
from grpc_status import rpc_status

from games.errors import RulesError
from kishpa.common.v1 import errors_pb2
from services.common.handlers import wrap_handler
from services.common.logging import get_logger
from services.common.outage import REDIS
from shared.retry import TRANSIENT_REDIS_ERRORS, UNREACHABLE_CODES

DOMAIN: Final = "kishpa.dev"
STATUS_DETAILS_KEY: Final = "grpc-status-details-bin"
INTERNAL_MESSAGE: Final = "internal error; it has been logged"
UNAVAILABLE_MESSAGE: Final = "a backing service is unavailable; retry later"
MAX_MESSAGE_CHARS: Final = 300
"""A status message is cut to this length: it travels in a header (clients cap metadata at
16 KiB, percent-encoding may triple it) and must never carry a large input back."""
MAX_METADATA_VALUE_CHARS: Final = 128
REASON_PREFIX: Final = "ERROR_REASON_"
KNOWN_REASONS: Final[frozenset[str]] = frozenset(
    value.name.removeprefix(REASON_PREFIX)
    for value in errors_pb2.ErrorReason.DESCRIPTOR.values
    if value.number != 0
)
"""Every reason a client may receive: ``kishpa.common.v1.ErrorReason`` without its prefix."""


class Category(enum.StrEnum):
    """What kind of refusal a domain error is; :data:`CATEGORY_CODES` gives its status."""

    INVALID = "invalid"
    """The request is malformed whatever the state (bad field, unknown tile...)."""
    REFUSED = "refused"
    """Well-formed, but the current state refuses it (not your turn, insufficient funds)."""
    NOT_FOUND = "not_found"
    """The named table, ticket, invite code or wallet does not exist."""
    CONFLICT = "conflict"
    """The thing to create exists already (a request id reused with another request...)."""
    FORBIDDEN = "forbidden"
    """The caller is known but may not do this (not the table's creator...)."""
    UNAUTHENTICATED = "unauthenticated"
    """The caller could not be identified (missing, expired or forged token)."""
    EXHAUSTED = "exhausted"
    """A limit is reached: table full, rate limit, too many streams."""
    CONTENDED = "contended"
    """A concurrency conflict that persisted after the bounded retries; retry."""
    UNAVAILABLE = "unavailable"
    """A dependency (Redis, the wallet...) cannot be reached right now; retry later."""
    BUG = "bug"
    """Nothing the client did: a defect, logged on the server."""


CATEGORY_CODES: Final[Mapping[Category, grpc.StatusCode]] = MappingProxyType(
    {
        Category.INVALID: grpc.StatusCode.INVALID_ARGUMENT,
        Category.REFUSED: grpc.StatusCode.FAILED_PRECONDITION,
        Category.NOT_FOUND: grpc.StatusCode.NOT_FOUND,
        Category.CONFLICT: grpc.StatusCode.ALREADY_EXISTS,
        Category.FORBIDDEN: grpc.StatusCode.PERMISSION_DENIED,
        Category.UNAUTHENTICATED: grpc.StatusCode.UNAUTHENTICATED,
        Category.EXHAUSTED: grpc.StatusCode.RESOURCE_EXHAUSTED,
        Category.CONTENDED: grpc.StatusCode.ABORTED,
        Category.UNAVAILABLE: grpc.StatusCode.UNAVAILABLE,
        Category.BUG: grpc.StatusCode.INTERNAL,
    }
)
"""THE table from error categories to gRPC status codes, for every service."""

# A downstream Kishpa service's refusal keeps its code and reason on the way back; these
# codes are the refusals a client can act on. UNAUTHENTICATED or PERMISSION_DENIED from a
# service we called with our own credential is our misconfiguration, not the client's.
_TRANSLATED_CODES: Final = frozenset(
    CATEGORY_CODES[c]
    for c in (
        Category.INVALID,
        Category.REFUSED,
        Category.NOT_FOUND,
        Category.CONFLICT,
        Category.EXHAUSTED,
        Category.CONTENDED,
    )
)

# A backing store that cannot be reached: the request may succeed if retried (the
# platform's one policy, shared.retry: dropped connections, a cluster electing a master).
_DEPENDENCY_ERRORS: tuple[type[BaseException], ...] = (
    ConnectionError,
    TimeoutError,
    *TRANSIENT_REDIS_ERRORS,
    # The wallet's database unreachable (a refused or dropped connection, a failover, a
    # pool that cannot get a connection in time): the same batch succeeds once it is back.
    sqlalchemy.exc.OperationalError,
    sqlalchemy.exc.DisconnectionError,
    sqlalchemy.exc.TimeoutError,
)
_UNREACHABLE_RPC_CODES = UNREACHABLE_CODES

_log = get_logger(__name__)


def shown(value: object, limit: int = 40) -> str:
    """How a message may quote a client's value: ``repr`` when short, else its length only."""
    text = repr(value)
    if len(text) <= limit:
        return text
    size = len(value) if isinstance(value, str | bytes) else len(text)
    return f"<{size} characters>"


class DomainError(Exception):
    """Base of every error raised on purpose: a category, a reason and a clear message.

    Subclasses fix ``category`` (and often ``reason``) as class attributes.
    """

    category: Category = Category.REFUSED
    reason: str = "RULES_VIOLATION"
    metadata: Mapping[str, str] = MappingProxyType({})
    retry_after_s: float | None = None

    @property
    def message(self) -> str:
        """The human-readable message (the exception's text)."""
        return str(self)


class ServiceError(DomainError):
    """A domain error with its category and reason given per raise."""

    def __init__(
        self,
        category: Category,
        reason: str,
        message: str,
        metadata: Mapping[str, str] | None = None,
        *,
        retry_after_s: float | None = None,
    ) -> None:
        super().__init__(message)
        self.category = category
        self.reason = reason
        self.metadata = dict(metadata or {})
        self.retry_after_s = retry_after_s

    @property
    def code(self) -> grpc.StatusCode:
        """The status code this error maps to."""
        return CATEGORY_CODES[self.category]


class _Canonical(ServiceError):
    """A ServiceError whose category is fixed by its class."""

    fixed: Category = Category.REFUSED

    def __init__(
        self,
        reason: str,
        message: str,
        metadata: Mapping[str, str] | None = None,
        *,
        retry_after_s: float | None = None,
    ) -> None:
        super().__init__(self.fixed, reason, message, metadata, retry_after_s=retry_after_s)


class InvalidArgument(_Canonical):
    """The request is malformed whatever the state (bad tile, seats out of range...)."""

    fixed = Category.INVALID


class FailedPrecondition(_Canonical):
    """The request is well-formed but the current state refuses it (not your turn...)."""

    fixed = Category.REFUSED


class NotFound(_Canonical):
    """The named table, wallet, invite code... does not exist."""

    fixed = Category.NOT_FOUND


class AlreadyExists(_Canonical):
    """The thing to create exists already (a reused idempotency key with another body...)."""

    fixed = Category.CONFLICT


class PermissionDenied(_Canonical):
    """The caller is known but may not do this (not the table's creator...)."""

    fixed = Category.FORBIDDEN


class Unauthenticated(_Canonical):
    """The caller could not be identified (missing, expired or forged token)."""

    fixed = Category.UNAUTHENTICATED


class ResourceExhausted(_Canonical):
    """A limit is reached (table full, queue full, rate limit)."""

    fixed = Category.EXHAUSTED


class Aborted(_Canonical):
    """A concurrency conflict that persisted after the bounded retries; the client may retry."""

    fixed = Category.CONTENDED


class Unavailable(_Canonical):
    """A dependency (Redis, the wallet...) cannot be reached right now; retry later."""

    fixed = Category.UNAVAILABLE


@dataclass(frozen=True, slots=True)
class RpcFailure:
    """What a client will see: status code, reason, message and ErrorInfo metadata."""

    code: grpc.StatusCode
    reason: str
    message: str
    metadata: Mapping[str, str] = field(default_factory=dict)
    retry_after_s: float | None = None


def category_of(exc: BaseException) -> Category | None:
    """The category of a domain error (ours or the rules'), ``None`` for anything else."""
    if isinstance(exc, DomainError):
        return exc.category
    if isinstance(exc, RulesError):
        return Category(exc.category)
    return None


def failure_of(exc: BaseException) -> RpcFailure | None:
    """The status an expected error maps to, or ``None`` for an unexpected one (a bug)."""
    category = category_of(exc)
    if category is not None:
        reason = str(getattr(exc, "reason", "")) or "INTERNAL"
        metadata = dict(getattr(exc, "metadata", {}) or {})
        retry = getattr(exc, "retry_after_s", None)
        return RpcFailure(CATEGORY_CODES[category], reason, str(exc), metadata, retry)
    if isinstance(exc, grpc.RpcError):
        return _downstream_failure(exc)
    if isinstance(exc, _DEPENDENCY_ERRORS):
        return _unavailable()
    return None


def _unavailable() -> RpcFailure:
    # Retryable for the client; the details (hosts, ports) stay in the server's log.
    return RpcFailure(grpc.StatusCode.UNAVAILABLE, "DEPENDENCY_UNAVAILABLE", UNAVAILABLE_MESSAGE)


def _downstream_failure(exc: grpc.RpcError) -> RpcFailure | None:
    """A failed call to another service: its refusal translated, unreachable = UNAVAILABLE."""
    code_of = getattr(exc, "code", None)
    code = code_of() if callable(code_of) else None
    if code in _UNREACHABLE_RPC_CODES:
        return _unavailable()
    if code not in _TRANSLATED_CODES:
        return None  # UNAUTHENTICATED, INTERNAL... from a service we called: our bug
    info = error_info(exc)
    details = getattr(exc, "details", None)
    message = (details() if callable(details) else None) or str(code.name).lower()
    reason = info.reason if info is not None and info.domain == DOMAIN else ""
    metadata = dict(info.metadata) if info is not None and info.domain == DOMAIN else {}
    return RpcFailure(code, reason or _reason_of_code(code), str(message), metadata)


def _reason_of_code(code: grpc.StatusCode) -> str:
    return "INVALID_FIELD" if code is grpc.StatusCode.INVALID_ARGUMENT else "RULES_VIOLATION"


@contextlib.contextmanager
def validating(what: str, reason: str = "INVALID_ARGUMENT") -> Iterator[None]:
    """Turn a ``ValueError`` raised while parsing client input into ``INVALID_ARGUMENT``.

    A bare ``ValueError`` elsewhere is a bug and stays ``INTERNAL``; wrap only the parsing::

        with validating("tile_ids"):
            faces = [face_of(t) for t in request.tile_ids]
    """
    try:
        yield
    except (DomainError, RulesError):
        raise
    except ValueError as exc:
        raise InvalidArgument(reason, f"invalid {what}: {exc}") from exc


def bounded(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """``text`` without control characters, cut to ``limit`` characters."""
    clean = "".join(ch if ch.isprintable() else " " for ch in text)
    return clean if len(clean) <= limit else clean[: limit - 3] + "..."


def to_status(failure: RpcFailure) -> grpc.Status:
    """The ``grpc.Status`` (with an ErrorInfo detail) to abort a call with."""
    metadata = {
        bounded(k, 64): bounded(v, MAX_METADATA_VALUE_CHARS) for k, v in failure.metadata.items()
    }
    if failure.retry_after_s is not None:
        metadata["retry_after_ms"] = str(max(0, int(failure.retry_after_s * 1000)))
    info = error_details_pb2.ErrorInfo(reason=failure.reason, domain=DOMAIN, metadata=metadata)
    detail = any_pb2.Any()
    detail.Pack(info)
    details = [detail]
    if failure.retry_after_s is not None:
        delay = duration_pb2.Duration()
        delay.FromMilliseconds(max(0, int(failure.retry_after_s * 1000)))
        retry = any_pb2.Any()
        retry.Pack(error_details_pb2.RetryInfo(retry_delay=delay))
        details.append(retry)
    # grpc.StatusCode values are (int, name) pairs; google.rpc codes use the same numbers.
    code_number: int = failure.code.value[0]
    status = status_pb2.Status(code=code_number, message=bounded(failure.message), details=details)
    return rpc_status.to_status(status)


def internal_failure() -> RpcFailure:
    """What a client sees for a bug: a generic message (the server logged the details)."""
    return RpcFailure(grpc.StatusCode.INTERNAL, "INTERNAL", INTERNAL_MESSAGE)


async def abort_with(context: grpc.aio.ServicerContext[Any, Any], exc: BaseException) -> NoReturn:
    """Abort the current call for ``exc`` (mapped, or INTERNAL and logged if unexpected)."""
    failure = failure_of(exc)
    await context.abort_with_status(to_status(failure or internal_failure()))


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
        elif failure.code is grpc.StatusCode.UNAVAILABLE and REDIS.absorbs(exc, where=method):
            pass  # Redis away: the outage is logged once, as such (services/common/outage.py)
        elif failure.code is grpc.StatusCode.UNAVAILABLE:
            _log.warning(
                "rpc.dependency_unavailable",
                method=method,
                error_type=type(exc).__name__,
                exc_info=True,
            )
        elif isinstance(exc, grpc.RpcError):
            _log.info("rpc.downstream_refused", method=method, reason=failure.reason)
        await context.abort_with_status(to_status(failure or internal_failure()))


# -- the reference, rendered for docs/api.md ----------------------------------------------


def reasons_markdown(proto_text: str) -> str:
    """The table of every reason (from ``errors.proto``'s text: value names, their comments
    and the section each sits in), as docs/api.md shows it."""
    lines = ["| reason | usual status | meaning |", "|---|---|---|"]
    section, comment = "", ""
    for raw in proto_text.splitlines():
        line = raw.strip()
        if line.startswith("// ---- "):
            section = line.removeprefix("// ---- ").split(":", 1)[0]
        elif line.startswith("//"):
            comment = line.removeprefix("//").strip()
        elif line.startswith(REASON_PREFIX) and not line.startswith(REASON_PREFIX + "UNSPECIFIED"):
            name = line.split("=", 1)[0].strip().removeprefix(REASON_PREFIX)
            lines.append(f"| `{name}` | `{section}` | {comment} |")
            comment = ""
    return "\n".join(lines) + "\n"


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


if __name__ == "__main__":
    import pathlib
    import sys

    root = pathlib.Path(__file__).resolve().parents[2]
    sys.stdout.write(reasons_markdown((root / "protos/kishpa/common/v1/errors.proto").read_text()))
