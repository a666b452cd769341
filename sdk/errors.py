"""What a failed call raises: one exception type with the status code and the reason."""

from __future__ import annotations

import grpc
from google.rpc import error_details_pb2, status_pb2

from kishpa.common.v1 import errors_pb2
from shared.retry import is_retryable

STATUS_DETAILS_KEY = "grpc-status-details-bin"
"""Trailing metadata holding the serialized ``google.rpc.Status`` of a failed call."""


def error_info(error: grpc.RpcError) -> error_details_pb2.ErrorInfo | None:
    """The ``google.rpc.ErrorInfo`` a failed call carries in its status details, if any
    (the protos are vendored under ``protos/google/rpc/`` for other languages)."""
    trailing = getattr(error, "trailing_metadata", None)
    for key, value in (trailing() if trailing is not None else None) or ():
        if key != STATUS_DETAILS_KEY:
            continue
        data = value if isinstance(value, bytes) else str(value).encode("latin-1")
        for detail in status_pb2.Status.FromString(data).details:
            info = error_details_pb2.ErrorInfo()
            if detail.Unpack(info):  # False when the detail is another message type
                return info
    return None


def error_reason(error: grpc.RpcError) -> str | None:
    """The machine-readable reason of a failed call (``"NOT_YOUR_TURN"``...), if any."""
    info = error_info(error)
    return info.reason if info is not None else None


def retry_after_s(error: grpc.RpcError) -> float | None:
    """Seconds the server asked a rate-limited caller to wait (``RATE_LIMITED`` refusals
    carry ``retry_after_ms``); ``None`` for any other failure."""
    info = error_info(error)
    if info is None or info.reason != "RATE_LIMITED":
        return None
    try:
        return max(0.0, int(info.metadata.get("retry_after_ms", "0")) / 1000)
    except ValueError:
        return None


EVENTS_TRIMMED = "EVENTS_TRIMMED"
"""The reason a WatchTable resumed from an event the table no longer keeps is refused with
(``FAILED_PRECONDITION``; docs/api.md, *Resuming a watch*): load the view again."""


class KishpaError(Exception):
    """A call the server refused (or could not answer).

    ``code`` is the gRPC status (``FAILED_PRECONDITION``...), ``reason`` the machine-readable
    reason (``NOT_YOUR_TURN``, ``TABLE_FULL``, ``INVITE_NOT_FOUND``...; ``None`` when the
    status carried none, e.g. a network failure) and ``message`` the server's text, written
    to be shown to a person.
    """

    def __init__(self, code: grpc.StatusCode, reason: str | None, message: str) -> None:
        super().__init__(f"{code.name}{f' ({reason})' if reason else ''}: {message}")
        self.code = code
        self.reason = reason
        self.message = message

    @classmethod
    def from_rpc(cls, error: grpc.RpcError) -> KishpaError:
        """The SDK's form of a failed gRPC call."""
        code = error.code() if hasattr(error, "code") else grpc.StatusCode.UNKNOWN
        details = error.details() if hasattr(error, "details") else str(error)
        return cls(code, error_reason(error), details or code.name.lower())

    @property
    def reason_code(self) -> errors_pb2.ErrorReason.ValueType:
        """The reason as ``kishpa.common.v1.ErrorReason`` (``ERROR_REASON_NOT_YOUR_TURN``...);
        unspecified when there is none or this SDK's contract does not know it yet."""
        try:
            return errors_pb2.ErrorReason.Value(f"ERROR_REASON_{self.reason}")
        except ValueError:
            return errors_pb2.ERROR_REASON_UNSPECIFIED

    @property
    def retryable(self) -> bool:
        """True when the same request may succeed later (the platform's retry policy,
        :mod:`shared.retry`: the server was unreachable, a deadline passed, a conflict)."""
        return is_retryable(self.code)
