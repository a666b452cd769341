"""Error mapping: domain and service errors -> status code + ErrorInfo reason, and back."""

from __future__ import annotations

import grpc
import pytest
import redis.exceptions
from google.rpc import error_details_pb2, status_pb2

from games.kishpa.errors import IllegalMoveError, InvalidRecordError, RulesError, TileNotationError
from services.common.errors import (
    DOMAIN,
    STATUS_DETAILS_KEY,
    AlreadyExists,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    ResourceExhausted,
    RpcFailure,
    ServiceError,
    Unauthenticated,
    error_info,
    error_reason,
    failure_of,
    to_status,
    validating,
)

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("exc", "code", "reason"),
    [
        (IllegalMoveError("not now", "NOT_YOUR_TURN"), "FAILED_PRECONDITION", "NOT_YOUR_TURN"),
        (IllegalMoveError("no"), "FAILED_PRECONDITION", "ILLEGAL_MOVE"),
        (TileNotationError("bad tile Z9"), "INVALID_ARGUMENT", "MALFORMED_TILE"),
        (InvalidRecordError("impossible"), "INVALID_ARGUMENT", "INVALID_RECORD"),
        (RulesError("refused"), "FAILED_PRECONDITION", "RULES_VIOLATION"),
        (NotFound("TABLE_NOT_FOUND", "no table t1"), "NOT_FOUND", "TABLE_NOT_FOUND"),
        (AlreadyExists("SEATED", "seated"), "ALREADY_EXISTS", "SEATED"),
        (InvalidArgument("BAD_SEATS", "2-4"), "INVALID_ARGUMENT", "BAD_SEATS"),
        (PermissionDenied("NOT_CREATOR", "no"), "PERMISSION_DENIED", "NOT_CREATOR"),
        (ResourceExhausted("TABLE_FULL", "full"), "RESOURCE_EXHAUSTED", "TABLE_FULL"),
        (FailedPrecondition("NOT_YOUR_TURN", "wait"), "FAILED_PRECONDITION", "NOT_YOUR_TURN"),
        (Unauthenticated("TOKEN_EXPIRED", "old"), "UNAUTHENTICATED", "TOKEN_EXPIRED"),
        (ServiceError(grpc.StatusCode.ABORTED, "CONFLICT", "retry"), "ABORTED", "CONFLICT"),
    ],
)
def test_expected_errors_map_to_code_and_reason(exc: Exception, code: str, reason: str) -> None:
    failure = failure_of(exc)
    assert failure is not None
    assert failure.code.name == code
    assert failure.reason == reason
    assert failure.message == str(exc)


@pytest.mark.parametrize(
    "exc",
    [
        redis.exceptions.ConnectionError("Error 111 connecting to 10.0.0.7:6379"),
        redis.exceptions.TimeoutError("timed out"),
        ConnectionRefusedError(111, "refused"),
        TimeoutError(),
    ],
)
def test_unreachable_dependencies_are_unavailable(exc: Exception) -> None:
    failure = failure_of(exc)
    assert failure is not None
    assert (failure.code, failure.reason) == (grpc.StatusCode.UNAVAILABLE, "DEPENDENCY_UNAVAILABLE")
    assert "10.0.0.7" not in failure.message


@pytest.mark.parametrize("exc", [ValueError("x"), KeyError("k"), RuntimeError("boom")])
def test_unexpected_errors_are_not_mapped(exc: Exception) -> None:
    assert failure_of(exc) is None


def test_validating_turns_value_errors_into_invalid_argument() -> None:
    with pytest.raises(InvalidArgument) as info, validating("seats"):
        int("four")
    assert info.value.reason == "INVALID_ARGUMENT"
    assert "invalid seats" in info.value.message


def test_validating_keeps_domain_reasons() -> None:
    with pytest.raises(TileNotationError), validating("tiles"):
        raise TileNotationError("bad")


def test_status_carries_error_info_detail() -> None:
    status = to_status(
        RpcFailure(grpc.StatusCode.FAILED_PRECONDITION, "NOT_YOUR_TURN", "wait", {"seat": "2"})
    )
    assert status.code is grpc.StatusCode.FAILED_PRECONDITION
    assert status.details == "wait"
    key, value = status.trailing_metadata[0]
    assert key == STATUS_DETAILS_KEY
    decoded = status_pb2.Status.FromString(value)
    info = error_details_pb2.ErrorInfo()
    assert decoded.details[0].Unpack(info)
    assert (info.reason, info.domain, dict(info.metadata)) == (
        "NOT_YOUR_TURN",
        DOMAIN,
        {"seat": "2"},
    )


class FakeRpcError(grpc.RpcError):
    """Shape of a client-side error: only what error_reason reads (trailing metadata)."""

    def __init__(self, trailing: tuple[tuple[str, str | bytes], ...]) -> None:
        self._trailing = trailing

    def trailing_metadata(self) -> tuple[tuple[str, str | bytes], ...]:
        return self._trailing


def test_error_reason_reads_error_info() -> None:
    status = to_status(RpcFailure(grpc.StatusCode.NOT_FOUND, "TABLE_NOT_FOUND", "gone"))
    error = FakeRpcError(tuple(status.trailing_metadata))
    assert error_reason(error) == "TABLE_NOT_FOUND"
    info = error_info(error)
    assert info is not None
    assert info.domain == DOMAIN


def test_error_reason_absent() -> None:
    assert error_reason(FakeRpcError(())) is None
    assert error_reason(grpc.RpcError()) is None
