"""Server-side bots: a player asks for a table with bots; the table service seats them,
marks them in every view, plays their turns with the solver at about a move a second, and
answers their reveal windows at once (so a window waits only for the people)."""

from __future__ import annotations

import asyncio
import itertools
import json
import time
import uuid
from typing import Any

import grpc
import pytest
from google.protobuf import duration_pb2
from redis.asyncio import Redis

from kishpa.common.v1 import common_pb2
from kishpa.table.v1 import table_pb2, table_pb2_grpc
from shared import keys
from tests.integration.tables.conftest import cleanup, versioned_state

pytestmark = pytest.mark.integration


def _settings(**kw: Any) -> table_pb2.TableSettings:
    return table_pb2.TableSettings(
        game=common_pb2.GAME_KISHPA,
        turn_time=duration_pb2.Duration(seconds=60),
        reveal_window=duration_pb2.Duration(seconds=60),
        **kw,
    )


async def test_a_tables_bot_pause_is_kept_in_its_settings(
    stub: table_pb2_grpc.TableServiceStub, md: dict[str, Any], players: list[str], redis: Redis
) -> None:
    pause = duration_pb2.Duration(nanos=200_000_000)
    created = await stub.CreateTable(
        table_pb2.CreateTableRequest(
            settings=_settings(seats=2, bots=1, bot_pause=pause), request_id=str(uuid.uuid4())
        ),
        metadata=md[players[0]],
    )
    table_id = created.table.table_id
    try:
        assert created.table.settings.bot_pause == pause
        _, state = await versioned_state(redis, table_id)
        assert state["settings"]["bot_pause_ms"] == 200
        unset = await stub.CreateTable(
            table_pb2.CreateTableRequest(settings=_settings(seats=2), request_id=str(uuid.uuid4())),
            metadata=md[players[1]],
        )
        assert unset.table.settings.bot_pause == duration_pb2.Duration(seconds=1)
        await cleanup(redis, unset.table.table_id)
    finally:
        await cleanup(redis, table_id)


async def test_a_table_with_bots_seats_marks_and_plays_them(
    stub: table_pb2_grpc.TableServiceStub,
    md: dict[str, Any],
    players: list[str],
    redis: Redis,
) -> None:
    me = players[0]
    created = await stub.CreateTable(
        table_pb2.CreateTableRequest(
            settings=_settings(seats=4, bots=3), request_id=str(uuid.uuid4())
        ),
        metadata=md[me],
    )
    view = created.table
    table_id = view.table_id
    try:
        assert view.settings.bots == 3
        assert [s.bot for s in view.seats] == [False, True, True, True]
        assert all(s.display_name.startswith("Bot ") for s in view.seats[1:])
        assert len({s.player_id for s in view.seats}) == 4
        started = await stub.StartGame(
            table_pb2.StartGameRequest(table_id=table_id, request_id="s"), metadata=md[me]
        )
        assert [s.bot for s in started.table.seats] == [False, True, True, True]
        _, state = await versioned_state(redis, table_id)
        assert sorted(state["autoplay"]) == [1, 2, 3]

        # Play the human's turns (the first discard, then draw + discard) and time the bots.
        bot_moves: list[tuple[int, float]] = []
        last_human_move = time.monotonic()
        deadline = time.monotonic() + 60
        n = 0
        while len(bot_moves) < 4 and time.monotonic() < deadline:
            table = (
                await stub.GetTable(table_pb2.GetTableRequest(table_id=table_id), metadata=md[me])
            ).table
            actions = set(table.available_actions)
            n += 1
            if table_pb2.PLAYER_ACTION_DECLINE_REVEAL in actions:
                await stub.DeclineReveal(
                    table_pb2.DeclineRevealRequest(table_id=table_id, request_id=f"d{n}"),
                    metadata=md[me],
                )
                last_human_move = time.monotonic()
            elif table_pb2.PLAYER_ACTION_DRAW_PILE in actions:
                await stub.Draw(
                    table_pb2.DrawRequest(
                        table_id=table_id, source=table_pb2.DRAW_SOURCE_PILE, request_id=f"r{n}"
                    ),
                    metadata=md[me],
                )
            elif table_pb2.PLAYER_ACTION_DISCARD in actions:
                tile = table.round.my_rack.tiles[-1].id
                await stub.Discard(
                    table_pb2.DiscardRequest(table_id=table_id, tile_id=tile, request_id=f"x{n}"),
                    metadata=md[me],
                )
                last_human_move = time.monotonic()
            events = await redis.xrange(keys.events(table_id))
            moves = [
                (int(f[b"seat"]), f[b"type"].decode())
                for _, f in events
                if f[b"type"] in (b"discarded", b"won")
            ]
            bot_discards = [seat for seat, _ in moves if seat != 0]
            if len(bot_discards) > len(bot_moves):
                bot_moves.append((bot_discards[-1], time.monotonic() - last_human_move))
            await asyncio.sleep(0.05)
        assert len(bot_moves) >= 3, f"the bots did not play: {bot_moves}"
        _, state = await versioned_state(redis, table_id)
        assert state["timeouts"].get("0") is None  # the human was never timed out
        events = await redis.xrange(keys.events(table_id))
        joined = [json.loads(f[b"data"]) for _, f in events if f[b"type"] == b"player_joined"]
        assert [bool(d.get("bot")) for d in joined] == [False, True, True, True]
        # At a human pace: each bot's discard comes about a second after the move before it
        # (stream ids are milliseconds), and well within the 60 s turn timer.
        discards = [
            (int(eid.decode().split("-")[0]), int(f[b"seat"]))
            for eid, f in events
            if f[b"type"] == b"discarded"
        ]
        gaps = [t - prev for (prev, _), (t, seat) in itertools.pairwise(discards) if seat != 0]
        assert gaps
        assert all(900 <= gap <= 10_000 for gap in gaps), gaps
    finally:
        await cleanup(redis, table_id)


async def test_bots_need_a_seat_left_for_every_player(
    stub: table_pb2_grpc.TableServiceStub, md: dict[str, Any], players: list[str]
) -> None:
    for seats, bots in ((4, 4), (2, 2), (4, -1)):
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await stub.CreateTable(
                table_pb2.CreateTableRequest(
                    settings=_settings(seats=seats, bots=bots), request_id=str(uuid.uuid4())
                ),
                metadata=md[players[0]],
            )
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_hand_house_bots_meld_instead_of_timing_out(
    stub: table_pb2_grpc.TableServiceStub,
    md: dict[str, Any],
    players: list[str],
    redis: Redis,
) -> None:
    """A Hand table with a house bot at the default level: the bot opens with 51 and lays
    melds within a few of its turns (before, every bot turn was the rules' timeout)."""
    me = players[0]
    created = await stub.CreateTable(
        table_pb2.CreateTableRequest(
            settings=table_pb2.TableSettings(
                game=common_pb2.GAME_HAND,
                seats=2,
                bots=1,
                turn_time=duration_pb2.Duration(seconds=60),
            ),
            request_id=str(uuid.uuid4()),
        ),
        metadata=md[me],
    )
    table_id = created.table.table_id
    try:
        assert created.table.settings.bot_level == table_pb2.BOT_LEVEL_NORMAL
        await stub.StartGame(
            table_pb2.StartGameRequest(table_id=table_id, request_id="s"), metadata=md[me]
        )
        deadline = time.monotonic() + 60
        n = 0
        bot_types: list[str] = []
        while time.monotonic() < deadline:
            events = await redis.xrange(keys.events(table_id))
            bot_types = [f[b"type"].decode() for _, f in events if f[b"seat"] == b"1"]
            if "melds_laid" in bot_types:
                break
            table = (
                await stub.GetTable(table_pb2.GetTableRequest(table_id=table_id), metadata=md[me])
            ).table
            actions = set(table.available_actions)
            n += 1
            # The human plays draw-and-discard at once, so the bot's turns set the pace.
            if table_pb2.PLAYER_ACTION_DRAW_PILE in actions:
                await stub.Draw(
                    table_pb2.DrawRequest(
                        table_id=table_id, source=table_pb2.DRAW_SOURCE_PILE, request_id=f"r{n}"
                    ),
                    metadata=md[me],
                )
            elif table_pb2.PLAYER_ACTION_DISCARD in actions:
                card = table.round.my_rack.tiles[-1].id
                await stub.Discard(
                    table_pb2.DiscardRequest(table_id=table_id, tile_id=card, request_id=f"x{n}"),
                    metadata=md[me],
                )
            else:
                await asyncio.sleep(0.1)
        assert "melds_laid" in bot_types, f"the bot never melded: {bot_types}"
        assert "timed_out" not in bot_types
        opening = next(
            json.loads(f[b"data"])
            for _, f in await redis.xrange(keys.events(table_id))
            if f[b"seat"] == b"1" and f[b"type"] == b"melds_laid"
        )
        assert opening["opening"]
        assert opening["value"] >= 51
    finally:
        await cleanup(redis, table_id)
