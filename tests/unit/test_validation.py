"""The edge validation layer: rules reference real fields, checks name the field (never the
value), and docs/api.md shows exactly the rules the code enforces."""

from __future__ import annotations

import pathlib

import pytest
from google.protobuf import descriptor_pool
from google.protobuf.duration_pb2 import Duration
from hypothesis import given, settings
from hypothesis import strategies as st

from kishpa.auth.v1 import auth_pb2
from kishpa.matchmaking.v1 import matchmaking_pb2 as mm_pb2
from kishpa.table.v1 import table_pb2
from kishpa.wallet.v1 import wallet_pb2
from services.common.errors import InvalidArgument
from services.common.validation import (
    RULES,
    Undecodable,
    check_message,
    fingerprint_of,
    reference_markdown,
    request_type,
    safe_deserializer,
)

pytestmark = pytest.mark.unit

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_every_rule_names_a_real_field() -> None:
    assert auth_pb2.LoginRequest.DESCRIPTOR.fields_by_name["device_id"]
    pool = descriptor_pool.Default()
    for name in RULES:
        field_name = name.removesuffix("[]")
        message_name, _, field = field_name.rpartition(".")
        message = pool.FindMessageTypeByName(message_name)
        assert field in message.fields_by_name, name


def test_docs_show_the_rules_the_code_enforces() -> None:
    text = (ROOT / "docs" / "api.md").read_text()
    begin, end = "<!-- validation-rules:begin -->\n", "<!-- validation-rules:end -->"
    shown = text[text.index(begin) + len(begin) : text.index(end)]
    assert shown == reference_markdown(), "run: python -m services.common.validation"


def refusal(msg: object) -> InvalidArgument:
    with pytest.raises(InvalidArgument) as info:
        check_message(msg)  # type: ignore[arg-type]
    return info.value


def test_nested_fields_are_named_by_path_never_by_value() -> None:
    error = refusal(
        mm_pb2.CreatePrivateTableRequest(
            settings=table_pb2.TableSettings(turn_time=Duration(seconds=99_999)), request_id="r"
        )
    )
    assert error.reason == "BAD_TURN_SECONDS"
    assert error.metadata["field"] == "settings.turn_time"
    assert "99999" not in error.message
    for bad in (Duration(seconds=5, nanos=-1), Duration(nanos=10**9), Duration(seconds=2, nanos=5)):
        error = refusal(table_pb2.TableSettings(turn_time=bad))
        assert error.reason == "BAD_TURN_SECONDS"
    check_message(table_pb2.TableSettings(turn_time=Duration(seconds=0)))
    check_message(table_pb2.TableSettings(next_round_pause=Duration(nanos=500_000_000)))
    big = "x" * 10_000
    error = refusal(wallet_pb2.GetBalanceRequest(account=big))
    assert big[:20] not in error.message
    error = refusal(
        wallet_pb2.ApplyBatchRequest(
            request_id="k",
            postings=[wallet_pb2.Posting(from_account="bank", to_account="bowl:t1", amount=0)],
        )
    )
    assert error.metadata["field"] == "postings[0].amount"
    assert error.reason == "INVALID_AMOUNT"


@pytest.mark.parametrize(
    ("after", "ok"),
    [
        ("", True),
        ("0-0", True),
        ("18446744073709551615-18446744073709551615", True),
        ("18446744073709551616-0", False),
        ("1-18446744073709551616", False),
        ("99999999999999999999-1", False),
        ("1700000000000", False),
        ("1-2-3", False),
        ("١-٢", False),  # Arabic-Indic digits match \d in Python, not in Redis
    ],
)
def test_stream_ids_must_fit_64_bits(after: str, ok: bool) -> None:
    request = table_pb2.WatchTableRequest(table_id="t1", after_event_id=after)
    if ok:
        check_message(request)
    else:
        assert refusal(request).reason == "BAD_EVENT_ID"


def test_unknown_enum_numbers_are_refused_known_ones_pass() -> None:
    check_message(table_pb2.DrawRequest(table_id="t1", source=table_pb2.DRAW_SOURCE_PILE))
    error = refusal(table_pb2.DrawRequest(table_id="t1", source=42))  # type: ignore[arg-type]
    assert error.metadata["field"] == "source"


def test_required_ids_and_request_id_format() -> None:
    assert refusal(table_pb2.GetTableRequest()).reason == "BAD_TABLE_ID"
    assert refusal(table_pb2.DrawRequest(table_id="t1", request_id="a b")).reason == (
        "BAD_REQUEST_ID"
    )
    check_message(table_pb2.DrawRequest(table_id="t1", request_id="x" * 128))
    assert refusal(mm_pb2.JoinByCodeRequest(request_id="x" * 65)).reason == "BAD_REQUEST_ID"


def test_undecodable_and_oversized_bodies_become_refusals_not_exceptions() -> None:
    decode = safe_deserializer(table_pb2.GetTableRequest.FromString, 100)
    assert isinstance(decode(b"\x0a\x02\xff\xfe"), Undecodable)  # bad UTF-8
    assert isinstance(decode(b"\x08\xff\xff"), Undecodable)  # truncated varint
    too_big = decode(b"\x0a\x70" + b"a" * 112)
    assert isinstance(too_big, Undecodable)
    assert too_big.refusal.reason == "REQUEST_TOO_LARGE"
    assert decode(b"\x0a\x02t1").table_id == "t1"


def test_request_types_come_from_the_descriptors() -> None:
    found = request_type("/kishpa.wallet.v1.WalletService/ApplyBatch")
    assert found is not None
    assert found.message_class.DESCRIPTOR.full_name == "kishpa.wallet.v1.ApplyBatchRequest"
    assert found.max_bytes == 512 * 1024
    assert request_type("/nope.Service/X") is None


def test_fingerprint_differs_by_rpc_and_body() -> None:
    a = table_pb2.LeaveTableRequest(table_id="t1", request_id="r")
    b = table_pb2.StartGameRequest(table_id="t1", request_id="r")
    same = fingerprint_of("/kishpa.table.v1.TableService/LeaveTable", a)
    assert same == fingerprint_of("/kishpa.table.v1.TableService/LeaveTable", a)
    assert same != fingerprint_of("/kishpa.table.v1.TableService/StartGame", b)
    c = table_pb2.LeaveTableRequest(table_id="t2", request_id="r")
    assert same != fingerprint_of("/kishpa.table.v1.TableService/LeaveTable", c)


def _request_types() -> list[type]:
    from google.protobuf import message_factory

    import kishpa.admin.v1.admin_pb2
    import kishpa.auth.v1.auth_pb2
    import kishpa.matchmaking.v1.matchmaking_pb2
    import kishpa.table.v1.table_pb2
    import kishpa.wallet.v1.wallet_pb2

    out = []
    for module in (
        kishpa.admin.v1.admin_pb2,
        kishpa.auth.v1.auth_pb2,
        kishpa.matchmaking.v1.matchmaking_pb2,
        kishpa.table.v1.table_pb2,
        kishpa.wallet.v1.wallet_pb2,
    ):
        for service in module.DESCRIPTOR.services_by_name.values():
            out += [message_factory.GetMessageClass(m.input_type) for m in service.methods]
    return out


REQUEST_TYPES = _request_types()


@settings(max_examples=300, derandomize=True)
@given(data=st.binary(max_size=300), index=st.integers(0, len(REQUEST_TYPES) - 1))
def test_any_bytes_decode_or_are_refused_never_raise(data: bytes, index: int) -> None:
    """Hypothesis: whatever arrives, the edge answers a message or a refusal, no exception."""
    cls = REQUEST_TYPES[index]
    decoded = safe_deserializer(cls.FromString, 64 * 1024)(data)
    if isinstance(decoded, Undecodable):
        assert decoded.refusal.reason in ("MALFORMED_REQUEST", "REQUEST_TOO_LARGE")
        return
    refusal: InvalidArgument | None = None
    try:
        check_message(decoded)
    except InvalidArgument as exc:
        refusal = exc
    if refusal is not None:
        assert 0 < len(refusal.message) <= 300
        assert refusal.metadata["field"]
