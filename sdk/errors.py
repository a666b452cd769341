"""What a failed call raises: one exception type with the status code and the reason."""

from __future__ import annotations

import grpc

from services.common.errors import error_reason


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
    def retryable(self) -> bool:
        """True when the same request may succeed later (the server was unreachable)."""
        return self.code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
