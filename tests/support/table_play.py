"""Opening a table and playing it with bots through the table service's gRPC API."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from typing import Any

from cli.play.bot import BotPlayer
from kishpa.common.v1 import common_pb2
from kishpa.table.v1 import table_pb2, table_pb2_grpc
from sdk import table_settings


async def open_table(
    stub: table_pb2_grpc.TableServiceStub,
    md: dict[str, Any],
    players: list[str],
    *,
    turn_seconds: int = 60,
    window_seconds: int = 30,
    pause_ms: int = 30,
    start: bool = True,
) -> str:
    created = await stub.CreateTable(
        table_pb2.CreateTableRequest(
            settings=table_settings(
                common_pb2.GAME_KISHPA,
                len(players),
                turn_seconds=turn_seconds,
                reveal_window_seconds=window_seconds,
                next_round_pause_ms=pause_ms,
            ),
            request_id=uuid.uuid4().hex,
            client_seed="creator-seed",
        ),
        metadata=md[players[0]],
    )
    table_id = created.table.table_id
    for p in players[1:]:
        await stub.JoinTable(
            table_pb2.JoinTableRequest(table_id=table_id, request_id=uuid.uuid4().hex),
            metadata=md[p],
        )
    if start:
        await stub.StartGame(
            table_pb2.StartGameRequest(table_id=table_id, request_id=uuid.uuid4().hex),
            metadata=md[players[0]],
        )
    return table_id


async def play_until(
    bots: dict[str, BotPlayer],
    table_id: str,
    done: Callable[[table_pb2.TableView], bool],
    *,
    after_each: Callable[[str, table_pb2.TableView], Any] | None = None,
    limit: int = 5000,
) -> table_pb2.TableView:
    """Let every bot move in turn until ``done`` holds (sequential: state is stable between)."""
    view = await next(iter(bots.values())).view(table_id)
    idle = 0
    for _ in range(limit):
        if done(view):
            return view
        moved = False
        for name, player in bots.items():
            mine = await player.view(table_id)
            after = await player.play(table_id, mine)
            if after is not None:
                moved = True
                if after_each is not None:
                    await after_each(name, after)
        view = await next(iter(bots.values())).view(table_id)
        if not moved:
            idle += 1
            assert idle < 500, "nobody could move for too long"
            await asyncio.sleep(0.01)  # the deadline loop starts the next round
        else:
            idle = 0
    raise AssertionError("the game did not finish")
