"""Regression tests for every defect issue 11 lists, against real running services.

Each refusal must be the right status class with a reason, a short message that does not
echo a long input, no traceback in the servers' logs, and no change of state.
"""

from __future__ import annotations

import base64
import uuid
from typing import Any

import grpc
import pytest
from google.protobuf.duration_pb2 import Duration
from sqlalchemy import text

from kishpa.auth.v1 import auth_pb2
from kishpa.common.v1 import common_pb2
from kishpa.matchmaking.v1 import matchmaking_pb2 as mm_pb2
from kishpa.table.v1 import table_pb2
from kishpa.wallet.v1 import wallet_pb2
from services.common.auth import ISSUER, bearer_metadata
from services.common.errors import MAX_MESSAGE_CHARS, error_info, error_reason, failure_of
from shared import keys as table_keys
from tests.integration.edge.conftest import LogCapture, Stack

pytestmark = pytest.mark.integration

KISHPA = common_pb2.GAME_KISHPA
DEADLINE_S = 5.0


async def refused(call: Any, request: Any, metadata: Any = None) -> grpc.aio.AioRpcError:
    """The error of a call that must fail (with a 5 s deadline: a hang is a failure too)."""
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await call(request, metadata=metadata, timeout=DEADLINE_S)
    error = info.value
    assert error.code() not in (grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN), error
    assert error.code() is not grpc.StatusCode.DEADLINE_EXCEEDED, "the call hung"
    message = error.details() or ""
    assert 0 < len(message) <= MAX_MESSAGE_CHARS
    assert "<class" not in message
    assert "Error" not in message  # no Python exception class names
    return error


async def new_table(stack: Stack, md: Any, seats: int = 2) -> table_pb2.TableView:
    response = await stack.table_stub.CreateTable(
        table_pb2.CreateTableRequest(
            settings=table_pb2.TableSettings(
                game=KISHPA, seats=seats, turn_time=Duration(seconds=600)
            ),
            request_id=uuid.uuid4().hex,
        ),
        metadata=md,
        timeout=DEADLINE_S,
    )
    stack.tables.add(response.table.table_id)
    return response.table


async def table_state(stack: Stack, table_id: str) -> tuple[int, int]:
    """(version, stream length): what a refused request must leave unchanged."""
    version = await stack.redis.hget(table_keys.state(table_id), "version")
    length = await stack.redis.xlen(table_keys.events(table_id))
    return int(version or 0), int(length)


def raw_call(stack: Stack, service: str, method: str) -> Any:
    """A stub method that sends raw bytes (no client-side encoding)."""
    return stack.channels[service].unary_unary(method)


# -- bodies that are not valid messages -------------------------------------------------------

CORRUPT_BODIES = {
    "truncated varint": b"\x08\xff\xff\xff",
    "bad wire type": b"\x0f\x01",
    "length past the end": b"\x0a\x10abc",
    "bad utf-8 in a string": b"\x0a\x02\xff\xfe",
}


@pytest.mark.parametrize("body", list(CORRUPT_BODIES.values()), ids=list(CORRUPT_BODIES))
async def test_corrupt_body_is_invalid_argument_without_traceback(
    stack: Stack, logs: LogCapture, body: bytes
) -> None:
    _, md = stack.player()
    for service, method in (
        ("table", "/kishpa.table.v1.TableService/GetTable"),
        ("matchmaking", "/kishpa.matchmaking.v1.MatchmakingService/JoinByCode"),
        ("wallet", "/kishpa.wallet.v1.WalletService/GetBalance"),
        ("matchmaking", "/kishpa.auth.v1.AuthService/Login"),  # public: no token needed
    ):
        error = await refused(raw_call(stack, service, method), body, md)
        assert error.code() is grpc.StatusCode.INVALID_ARGUMENT, method
        assert error_reason(error) == "MALFORMED_REQUEST"
    # Without a token: refused as unauthenticated, still cleanly.
    error = await refused(raw_call(stack, "table", "/kishpa.table.v1.TableService/Draw"), body)
    assert error.code() is grpc.StatusCode.UNAUTHENTICATED
    assert logs.tracebacks() == []


# -- tokens ------------------------------------------------------------------------------------


def _signed_raw(payload: str, key: str) -> str:
    import hashlib
    import hmac

    def b64(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    head = b64(b'{"alg":"HS256","typ":"JWT"}') + "." + b64(payload.encode())
    sig = hmac.new(key.encode(), head.encode(), hashlib.sha256).digest()
    return head + "." + b64(sig)


async def test_tokens_with_out_of_range_times_are_unauthenticated(
    stack: Stack, logs: LogCapture
) -> None:
    key = stack.authority._token_secret
    assert key is not None
    import time

    now = int(time.time())
    for exp, iat in (("1e400", str(now)), (str(now + 60), "1e400"), ("1" + "0" * 30, str(now))):
        token = _signed_raw(
            f'{{"sub":"p1","typ":"player","iss":"{ISSUER}","iat":{iat},"exp":{exp}}}', key
        )
        error = await refused(
            stack.mm_stub.GetMyTable, mm_pb2.GetMyTableRequest(), bearer_metadata(token)
        )
        assert error.code() is grpc.StatusCode.UNAUTHENTICATED
        assert error_reason(error) == "TOKEN_INVALID"
    assert logs.tracebacks() == []


async def test_lower_case_bearer_scheme_is_accepted(stack: Stack) -> None:
    player_id, _ = stack.player()
    token = stack.authority.issue_player_token(player_id, "Lee").token
    opened = await stack.wallet_stub.OpenWallet(
        wallet_pb2.OpenWalletRequest(), metadata=(("authorization", "bearer " + token),)
    )
    assert opened.balance.account == f"player:{player_id}"


# -- matchmaking: settings and request ids (downstream refusals were INTERNAL) ----------------


@pytest.mark.parametrize(
    ("field", "value", "reason"),
    [
        ("turn_time", Duration(seconds=100_000), "BAD_TURN_SECONDS"),
        ("turn_time", Duration(seconds=-1), "BAD_TURN_SECONDS"),
        ("turn_time", Duration(seconds=10, nanos=5), "BAD_TURN_SECONDS"),
        ("reveal_window", Duration(seconds=2**40), "BAD_WINDOW_SECONDS"),
        ("next_round_pause", Duration(seconds=-5), "BAD_PAUSE"),
        ("next_round_pause", Duration(seconds=10**9), "BAD_PAUSE"),
        ("next_round_pause", Duration(seconds=1, nanos=-1), "BAD_PAUSE"),
        ("bot_pause", Duration(seconds=6), "BAD_PAUSE"),
        ("bot_pause", Duration(nanos=-1), "BAD_PAUSE"),
    ],
)
async def test_create_private_table_with_out_of_range_settings_is_invalid_argument(
    stack: Stack, logs: LogCapture, field: str, value: Duration, reason: str
) -> None:
    _, md = stack.player()
    settings = table_pb2.TableSettings(game=KISHPA, seats=2, **{field: value})
    error = await refused(
        stack.mm_stub.CreatePrivateTable,
        mm_pb2.CreatePrivateTableRequest(settings=settings, request_id="r1"),
        md,
    )
    assert error.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert error_reason(error) == reason
    info = error_info(error)
    assert info is not None
    assert info.metadata["field"] == f"settings.{field}"
    assert logs.tracebacks() == []


@pytest.mark.parametrize("length", [65, 125, 128, 129, 5000])
async def test_long_request_ids_are_invalid_argument_at_matchmaking(
    stack: Stack, logs: LogCapture, length: int
) -> None:
    _, md = stack.player()
    rid = "r" * length
    settings = table_pb2.TableSettings(game=KISHPA, seats=2)
    for call, request in (
        (
            stack.mm_stub.CreatePrivateTable,
            mm_pb2.CreatePrivateTableRequest(settings=settings, request_id=rid),
        ),
        (stack.mm_stub.JoinByCode, mm_pb2.JoinByCodeRequest(invite_code="ABCDEF", request_id=rid)),
    ):
        error = await refused(call, request, md)
        assert error.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert error_reason(error) == "BAD_REQUEST_ID"
        assert rid not in (error.details() or "")
    assert logs.tracebacks() == []


async def test_a_table_service_refusal_reaches_the_caller_with_its_code_and_reason(
    stack: Stack,
) -> None:
    """What matchmaking does with a table refusal it did not special-case: translate it."""
    from services.common.auth import ServiceCredentials
    from services.matchmaking.gateways import SeatedPlayer, TableGateway

    credentials = ServiceCredentials(stack.authority, "matchmaking")
    gateway = TableGateway(stack.channels["table"], credentials)
    bad = table_pb2.TableSettings(game=KISHPA, seats=2, stake=7)  # not an offered stake
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await gateway.create_table(
            [SeatedPlayer("pa"), SeatedPlayer("pb")], bad, request_id="mm-x" + uuid.uuid4().hex
        )
    failure = failure_of(info.value)
    assert failure is not None
    assert failure.code is grpc.StatusCode.INVALID_ARGUMENT
    assert failure.reason == "BAD_STAKE"


# -- table: stream ids, player ids ------------------------------------------------------------


async def test_watch_table_with_a_stream_id_over_64_bits_is_invalid_argument(
    stack: Stack, logs: LogCapture
) -> None:
    _, md = stack.player()
    view = await new_table(stack, md)
    for after in ("18446744073709551616-0", "1-18446744073709551616", "9" * 20 + "-0", "1-x"):
        with pytest.raises(grpc.aio.AioRpcError) as info:
            async for _ in stack.table_stub.WatchTable(
                table_pb2.WatchTableRequest(table_id=view.table_id, after_event_id=after),
                metadata=md,
                timeout=DEADLINE_S,
            ):
                pass
        assert info.value.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert error_reason(info.value) == "BAD_EVENT_ID"
    assert logs.tracebacks() == []


@pytest.mark.parametrize("length", [65, 200, 1_000_000])
async def test_join_table_with_a_long_service_player_id_changes_nothing(
    stack: Stack, logs: LogCapture, length: int
) -> None:
    _, md = stack.player()
    view = await new_table(stack, md, seats=4)
    before = await table_state(stack, view.table_id)
    error = await refused(
        stack.table_stub.JoinTable,
        table_pb2.JoinTableRequest(table_id=view.table_id, player_id="q" * length, request_id="j1"),
        stack.service("matchmaking"),
    )
    assert error.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert await table_state(stack, view.table_id) == before
    assert logs.tracebacks() == []


# -- wallet -----------------------------------------------------------------------------------


async def test_list_transfers_with_a_forged_page_token_is_invalid_argument(
    stack: Stack, logs: LogCapture
) -> None:
    _, md = stack.player()
    await stack.wallet_stub.OpenWallet(wallet_pb2.OpenWalletRequest(), metadata=md)
    for number in ("9" * 40, str(2**63), "-1"):
        token = base64.urlsafe_b64encode(f"t1:{number}".encode()).decode()
        error = await refused(
            stack.wallet_stub.ListTransfers,
            wallet_pb2.ListTransfersRequest(page_token=token),
            md,
        )
        assert error.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert error_reason(error) == "INVALID_PAGE_TOKEN"
    assert logs.tracebacks() == []


async def test_refused_batch_from_a_never_used_bowl_writes_no_account(
    stack: Stack, logs: LogCapture
) -> None:
    player_id, md = stack.player()
    await stack.wallet_stub.OpenWallet(wallet_pb2.OpenWalletRequest(), metadata=md)
    bowl = f"bowl:t{uuid.uuid4().hex[:12]}"
    error = await refused(
        stack.wallet_stub.ApplyBatch,
        wallet_pb2.ApplyBatchRequest(
            request_id="b-" + uuid.uuid4().hex,
            postings=[
                wallet_pb2.Posting(
                    from_account=bowl,
                    to_account=f"player:{player_id}",
                    amount=3,
                    reason=wallet_pb2.TRANSFER_REASON_WIN,
                )
            ],
        ),
        stack.service("worker"),
    )
    assert error.code() is grpc.StatusCode.FAILED_PRECONDITION
    with stack.wallet.engine.connect() as conn:
        rows = conn.execute(text("SELECT count(*) FROM accounts WHERE id = :id"), {"id": bowl})
        assert rows.scalar_one() == 0
    assert logs.tracebacks() == []


# -- messages never echo large inputs ---------------------------------------------------------


async def test_large_inputs_never_overflow_the_status_message(
    stack: Stack, logs: LogCapture
) -> None:
    big = "z" * 60_000
    error = await refused(
        stack.wallet_stub.GetBalance,
        wallet_pb2.GetBalanceRequest(account=big),
        stack.service("worker"),
    )
    assert error.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "zzzz" not in (error.details() or "")
    error = await refused(stack.auth_stub.Login, auth_pb2.LoginRequest(display_name=big[:40_000]))
    assert error.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "zzzz" not in (error.details() or "")
    assert logs.tracebacks() == []


# -- one request-id rule for every service ----------------------------------------------------


async def test_table_request_id_reused_with_another_body_or_rpc_is_already_exists(
    stack: Stack, logs: LogCapture
) -> None:
    _creator, md = stack.player()
    _guest, guest_md = stack.player()
    settings = table_pb2.TableSettings(game=KISHPA, seats=3, turn_time=Duration(seconds=600))
    first = await stack.table_stub.CreateTable(
        table_pb2.CreateTableRequest(settings=settings, request_id="c1"), metadata=md
    )
    stack.tables.add(first.table.table_id)
    again = await stack.table_stub.CreateTable(
        table_pb2.CreateTableRequest(settings=settings, request_id="c1"), metadata=md
    )
    assert again.table.table_id == first.table.table_id  # the same request: a replay
    other = table_pb2.TableSettings(game=KISHPA, seats=4, turn_time=Duration(seconds=600))
    error = await refused(
        stack.table_stub.CreateTable,
        table_pb2.CreateTableRequest(settings=other, request_id="c1"),
        md,
    )
    assert error.code() is grpc.StatusCode.ALREADY_EXISTS
    assert error_reason(error) == "IDEMPOTENCY_KEY_REUSED"

    table_id = first.table.table_id
    await stack.table_stub.JoinTable(
        table_pb2.JoinTableRequest(table_id=table_id, request_id="k1"), metadata=guest_md
    )
    before = await table_state(stack, table_id)
    error = await refused(
        stack.table_stub.LeaveTable,
        table_pb2.LeaveTableRequest(table_id=table_id, request_id="k1"),
        guest_md,
    )
    assert error.code() is grpc.StatusCode.ALREADY_EXISTS
    assert await table_state(stack, table_id) == before
    assert logs.tracebacks() == []


async def test_matchmaking_request_id_reused_with_another_body_or_rpc_is_already_exists(
    stack: Stack, logs: LogCapture
) -> None:
    _, md = stack.player()
    settings = table_pb2.TableSettings(game=KISHPA, seats=2)
    created = await stack.mm_stub.CreatePrivateTable(
        mm_pb2.CreatePrivateTableRequest(settings=settings, request_id="m1"), metadata=md
    )
    stack.tables.add(created.table_id)
    replay = await stack.mm_stub.CreatePrivateTable(
        mm_pb2.CreatePrivateTableRequest(settings=settings, request_id="m1"), metadata=md
    )
    assert replay.invite_code == created.invite_code
    error = await refused(
        stack.mm_stub.CreatePrivateTable,
        mm_pb2.CreatePrivateTableRequest(
            settings=table_pb2.TableSettings(game=KISHPA, seats=3), request_id="m1"
        ),
        md,
    )
    assert error.code() is grpc.StatusCode.ALREADY_EXISTS
    error = await refused(
        stack.mm_stub.JoinByCode,
        mm_pb2.JoinByCodeRequest(invite_code=created.invite_code, request_id="m1"),
        md,
    )
    assert error.code() is grpc.StatusCode.ALREADY_EXISTS
    assert error_reason(error) == "IDEMPOTENCY_KEY_REUSED"

    _, md2 = stack.player()
    await stack.mm_stub.JoinQueue(
        mm_pb2.JoinQueueRequest(game=KISHPA, seats=4, stake=1, request_id="q1"), metadata=md2
    )
    error = await refused(
        stack.mm_stub.JoinQueue,
        mm_pb2.JoinQueueRequest(game=KISHPA, seats=3, stake=1, request_id="q1"),
        md2,
    )
    assert error.code() is grpc.StatusCode.ALREADY_EXISTS
    assert logs.tracebacks() == []


# -- unknown enum values: refused everywhere --------------------------------------------------


async def test_unknown_enum_values_are_refused_by_every_rpc(stack: Stack, logs: LogCapture) -> None:
    _, md = stack.player()
    view = await new_table(stack, md)
    before = await table_state(stack, view.table_id)
    cases: list[tuple[Any, Any]] = [
        (
            stack.table_stub.Draw,
            table_pb2.DrawRequest(table_id=view.table_id, source=99, request_id="d"),  # type: ignore[arg-type]
        ),
        (
            stack.mm_stub.JoinQueue,
            mm_pb2.JoinQueueRequest(game=99, seats=2, stake=1, request_id="e"),  # type: ignore[arg-type]
        ),
        (
            stack.table_stub.CreateTable,
            table_pb2.CreateTableRequest(
                settings=table_pb2.TableSettings(game=7, seats=2),  # type: ignore[arg-type]
                request_id="f",
            ),
        ),
        (
            stack.table_stub.LayOff,
            table_pb2.LayOffRequest(table_id=view.table_id, end=5, request_id="g"),  # type: ignore[arg-type]
        ),
    ]
    for call, request in cases:
        error = await refused(call, request, md)
        assert error.code() is grpc.StatusCode.INVALID_ARGUMENT, request
    assert await table_state(stack, view.table_id) == before
    assert logs.tracebacks() == []
