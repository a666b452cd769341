"""Error mapping: domain and service errors -> status code + ErrorInfo reason, and back."""

from __future__ import annotations

import grpc
import pytest
import redis.exceptions
from google.rpc import error_details_pb2, status_pb2

from games.errors import IllegalMoveError, InvalidRecordError, RulesError
from games.kishpa.errors import TileNotationError
from services.common.errors import (
    CATEGORY_CODES,
    DOMAIN,
    KNOWN_REASONS,
    MAX_MESSAGE_CHARS,
    STATUS_DETAILS_KEY,
    AlreadyExists,
    Category,
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
        (ServiceError(Category.CONTENDED, "TABLE_BUSY", "retry"), "ABORTED", "TABLE_BUSY"),
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


# -- one error model (issue 13 item 4) -----------------------------------------------------


def test_one_table_maps_every_category_to_a_distinct_code() -> None:
    assert set(CATEGORY_CODES) == set(Category)
    assert len(set(CATEGORY_CODES.values())) == len(Category)
    assert CATEGORY_CODES[Category.BUG] is grpc.StatusCode.INTERNAL


def test_table_and_wallet_errors_carry_categories_not_codes() -> None:
    from services.table.engine import BadRequestError, NotAllowedError, TableError
    from services.table.service import TableNotFoundError
    from services.wallet.errors import IdempotencyKeyReused, InsufficientFunds, InvalidRequest

    cases: list[tuple[Exception, grpc.StatusCode]] = [
        (TableError("no", "NOT_YOUR_TURN"), grpc.StatusCode.FAILED_PRECONDITION),
        (NotAllowedError("no", "NOT_CREATOR"), grpc.StatusCode.PERMISSION_DENIED),
        (BadRequestError("no", "BAD_SEATS"), grpc.StatusCode.INVALID_ARGUMENT),
        (TableNotFoundError("no", "TABLE_NOT_FOUND"), grpc.StatusCode.NOT_FOUND),
        (InsufficientFunds("no"), grpc.StatusCode.FAILED_PRECONDITION),
        (IdempotencyKeyReused("no"), grpc.StatusCode.ALREADY_EXISTS),
        (InvalidRequest("no"), grpc.StatusCode.INVALID_ARGUMENT),
    ]
    for exc, code in cases:
        failure = failure_of(exc)
        assert failure is not None, exc
        assert failure.code is code, exc
        assert not hasattr(type(exc), "status")
        assert not isinstance(getattr(exc, "code", None), str)


def test_every_reason_raised_in_the_code_is_in_the_proto_enum() -> None:
    """Scan the sources: each ALL_CAPS string given as a reason is an ErrorReason value."""
    import ast
    import pathlib

    root = pathlib.Path(__file__).resolve().parents[2]
    error_names = {
        "InvalidArgument", "FailedPrecondition", "NotFound", "AlreadyExists",
        "PermissionDenied", "Unauthenticated", "ResourceExhausted", "Aborted", "Unavailable",
        "TableError", "NotAllowedError", "BadRequestError",
        "TableNotFoundError", "IllegalMoveError", "HandMoveError", "InvalidRequest",
        "WalletError", "AccountNotFound", "ServiceError", "_refuse", "BadTableRequest",
        "NotAllowed", "TableRuleError",
    }  # fmt: skip
    found: dict[str, str] = {}
    for folder in ("services", "games", "workers", "shared"):
        for path in (root / folder).rglob("*.py"):
            tree = ast.parse(path.read_text())
            for node in ast.walk(tree):
                values: list[ast.expr] = []
                if isinstance(node, ast.Call):
                    name = getattr(node.func, "id", getattr(node.func, "attr", ""))
                    inner = getattr(node.func, "value", None)
                    if name == "__init__" and isinstance(inner, ast.Call):
                        name = getattr(inner.func, "id", "")  # super().__init__("REASON", ...)
                    if name in error_names or name == "super":
                        values = [
                            *node.args,
                            *(k.value for k in node.keywords if k.arg == "reason"),
                        ]
                elif isinstance(node, ast.Assign) and any(
                    getattr(t, "id", "") == "reason" for t in node.targets
                ):
                    values = [node.value]
                for value in values:
                    if isinstance(value, ast.Constant) and isinstance(value.value, str):
                        text = value.value
                        if text.isupper() and " " not in text and len(text) > 3:
                            found[text] = f"{path.relative_to(root)}:{value.lineno}"
    from games.hand.errors import Reason

    for name, value in vars(Reason).items():
        if name.isupper():
            found[value] = "games/hand/errors.py"
    assert len(found) > 50
    missing = {r: where for r, where in found.items() if r not in KNOWN_REASONS}
    assert not missing, f"add these to protos/kishpa/common/v1/errors.proto: {missing}"


def test_messages_are_bounded_and_never_echo_a_large_input() -> None:
    huge = "x" * 100_000
    status = to_status(RpcFailure(grpc.StatusCode.INVALID_ARGUMENT, "INVALID_FIELD", huge))
    assert len(status.details) <= MAX_MESSAGE_CHARS
    decoded = status_pb2.Status.FromString(status.trailing_metadata[0][1])
    assert len(decoded.SerializeToString()) < 2048


def test_rate_limit_refusal_carries_retry_info() -> None:
    exc = ResourceExhausted("RATE_LIMITED", "slow down", retry_after_s=1.5)
    failure = failure_of(exc)
    assert failure is not None
    status = to_status(failure)
    decoded = status_pb2.Status.FromString(status.trailing_metadata[0][1])
    retry = error_details_pb2.RetryInfo()
    assert any(d.Unpack(retry) for d in decoded.details)
    assert retry.retry_delay.ToMilliseconds() == 1500
    info = error_details_pb2.ErrorInfo()
    assert decoded.details[0].Unpack(info)
    assert info.metadata["retry_after_ms"] == "1500"


class FakeDownstreamError(grpc.RpcError):
    """A failed call to another service, as grpc.aio raises it (code, details, trailers)."""

    def __init__(self, code: grpc.StatusCode, reason: str | None, message: str = "m") -> None:
        self._code = code
        self._message = message
        trailing: tuple[tuple[str, str | bytes], ...] = ()
        if reason is not None:
            trailing = tuple(to_status(RpcFailure(code, reason, message)).trailing_metadata)
        self._trailing = trailing

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._message

    def trailing_metadata(self) -> tuple[tuple[str, str | bytes], ...]:
        return self._trailing


@pytest.mark.parametrize(
    ("code", "reason"),
    [
        (grpc.StatusCode.INVALID_ARGUMENT, "BAD_TURN_SECONDS"),
        (grpc.StatusCode.FAILED_PRECONDITION, "GAME_STARTED"),
        (grpc.StatusCode.NOT_FOUND, "TABLE_NOT_FOUND"),
        (grpc.StatusCode.ALREADY_EXISTS, "IDEMPOTENCY_KEY_REUSED"),
        (grpc.StatusCode.RESOURCE_EXHAUSTED, "TABLE_FULL"),
        (grpc.StatusCode.ABORTED, "TABLE_BUSY"),
    ],
)
def test_downstream_refusals_keep_their_code_and_reason(code: grpc.StatusCode, reason: str) -> None:
    failure = failure_of(FakeDownstreamError(code, reason, "turn_seconds must be 1-600"))
    assert failure is not None
    assert (failure.code, failure.reason) == (code, reason)
    assert failure.message == "turn_seconds must be 1-600"


@pytest.mark.parametrize(
    "code", [grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN, grpc.StatusCode.UNAUTHENTICATED]
)
def test_downstream_bugs_stay_internal(code: grpc.StatusCode) -> None:
    assert failure_of(FakeDownstreamError(code, "X")) is None


def test_downstream_unreachable_is_unavailable() -> None:
    failure = failure_of(FakeDownstreamError(grpc.StatusCode.DEADLINE_EXCEEDED, None))
    assert failure is not None
    assert failure.code is grpc.StatusCode.UNAVAILABLE


def test_docs_list_every_reason_of_the_proto() -> None:
    import pathlib

    from services.common.errors import reasons_markdown

    root = pathlib.Path(__file__).resolve().parents[2]
    table = reasons_markdown((root / "protos/kishpa/common/v1/errors.proto").read_text())
    assert table.count("\n") - 2 == len(KNOWN_REASONS)
    text = (root / "docs" / "api.md").read_text()
    begin, end = "<!-- error-reasons:begin -->\n", "<!-- error-reasons:end -->"
    assert text[text.index(begin) + len(begin) : text.index(end)] == table, (
        "run: python -m services.common.errors"
    )
