"""``kishpa play`` says, at each round end, who paid whom and why (issue 13): the typed
``settled`` event's payments, with the players' names and the reasons in words."""

from __future__ import annotations

import pytest
from rich.console import Console

from cli.play.kishpa_ui import KishpaUI
from cli.play.session import PlaySession
from kishpa.table.v1 import table_pb2
from kishpa.wallet.v1 import wallet_pb2
from sdk import KishpaClient

pytestmark = pytest.mark.unit


def _view() -> table_pb2.TableView:
    seats = [
        table_pb2.Seat(seat=0, player_id="p-ann", display_name="Ann"),
        table_pb2.Seat(seat=1, player_id="p-bob", display_name="Bob"),
        table_pb2.Seat(seat=2, player_id="p-me", display_name="Me"),
    ]
    return table_pb2.TableView(table_id="t1", seats=seats, my_seat=2)


def _settled(phase: table_pb2.SettlementPhase.ValueType) -> table_pb2.TableEvent:
    pay = table_pb2.Payment
    return table_pb2.TableEvent(
        event_id="1-0",
        round=3,
        settled=table_pb2.Settled(
            phase=phase,
            payments=[
                pay(
                    from_account="player:p-bob",
                    to_account="player:p-ann",
                    amount=3,
                    reason=wallet_pb2.TRANSFER_REASON_WIN,
                ),
                pay(
                    from_account="bank",
                    to_account="player:p-me",
                    amount=50,
                    reason=wallet_pb2.TRANSFER_REASON_BANK_LOAD,
                ),
                pay(
                    from_account="player:p-me",
                    to_account="player:p-ann",
                    amount=3,
                    reason=wallet_pb2.TRANSFER_REASON_WIN,
                ),
                pay(
                    from_account="bowl:t1",
                    to_account="player:p-ann",
                    amount=12,
                    reason=wallet_pb2.TRANSFER_REASON_BOWL_WIN,
                ),
            ],
        ),
    )


async def test_a_round_end_settlement_is_told_as_who_paid_whom_and_why() -> None:
    console = Console(width=100, force_terminal=False, color_system=None)
    client = KishpaClient("127.0.0.1:1", "127.0.0.1:1")  # never called
    try:
        session = PlaySession(client, console, "t1", {}, KishpaUI())
        session.view = _view()
        with console.capture() as captured:
            await session._narrate(_settled(table_pb2.SETTLEMENT_PHASE_END))
    finally:
        await client.close()
    lines = [line.strip() for line in captured.get().splitlines()]
    assert lines == [
        "Payments, end of round 3:",
        "Bob → Ann  3  (win)",
        "bank → You  50  (bank load (50 tokens to cover a payment))",
        "You → Ann  3  (win)",
        "the bowl → Ann  12  (took the bowl)",
    ]


async def test_a_settlement_that_moved_nothing_says_nothing() -> None:
    console = Console(width=100, force_terminal=False, color_system=None)
    client = KishpaClient("127.0.0.1:1", "127.0.0.1:1")
    try:
        session = PlaySession(client, console, "t1", {}, KishpaUI())
        session.view = _view()
        event = table_pb2.TableEvent(settled=table_pb2.Settled(phase=1))
        with console.capture() as captured:
            await session._narrate(event)
    finally:
        await client.close()
    assert captured.get() == ""


async def test_a_hand_deal_end_shows_the_cards_left_by_their_faces() -> None:
    """Issue 17 item 4 at the terminal: the hands left at a deal's end, faces shown."""
    from cli.play.hand_ui import HandUI
    from kishpa.common.v1 import common_pb2

    console = Console(width=100, force_terminal=False, color_system=None)
    client = KishpaClient("127.0.0.1:1", "127.0.0.1:1")
    tile = common_pb2.Tile
    event = table_pb2.TableEvent(
        round=2,
        deal_ended=table_pb2.DealEnded(
            reason=table_pb2.DEAL_END_REASON_STOCK_EXHAUSTED,
            hands=[
                table_pb2.SeatTiles(seat=0, tiles=[tile(id=0, face="AS"), tile(id=104, face="J1")]),
                table_pb2.SeatTiles(seat=2, tiles=[tile(id=9, face="10S")]),
            ],
        ),
    )
    try:
        session = PlaySession(client, console, "t1", {}, HandUI())
        session.view = _view()
        with console.capture() as captured:
            await session._narrate(event)
    finally:
        await client.close()
    lines = [line.strip() for line in captured.get().splitlines()]
    assert lines == ["The stock ran out: nobody wins this deal.", "Ann held AS ★J1"]


def test_the_sdk_error_names_its_reason_in_the_shared_enum() -> None:
    """The SDK uses kishpa.common.v1.ErrorReason (errors.proto) instead of its own list."""
    import grpc

    from kishpa.common.v1 import errors_pb2
    from sdk import KishpaError

    refused = KishpaError(grpc.StatusCode.FAILED_PRECONDITION, "NOT_YOUR_TURN", "wait")
    assert refused.reason_code == errors_pb2.ERROR_REASON_NOT_YOUR_TURN
    unknown = KishpaError(grpc.StatusCode.FAILED_PRECONDITION, "SOMETHING_NEWER", "?")
    assert unknown.reason_code == errors_pb2.ERROR_REASON_UNSPECIFIED
    assert KishpaError(grpc.StatusCode.UNAVAILABLE, None, "down").reason_code == 0
