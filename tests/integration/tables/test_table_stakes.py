"""Stake levels at the table service (issue 17), through a real grpc.aio server and Redis.

A table is created at any stake its game offers (``KISHPA_STAKES_<GAME>``) and refuses any
other with ``INVALID_ARGUMENT``/``BAD_STAKE``, changing nothing; the stake is in every view,
in ``table_created`` and in the phase records the workers settle.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from redis.asyncio import Redis

from games.kishpa.record import start_postings
from kishpa.common.v1 import common_pb2
from kishpa.table.v1 import table_pb2, table_pb2_grpc
from sdk import table_settings
from services.common.errors import error_reason
from services.common.settings import Settings
from services.table.server import TableServer, create_table_server
from shared import keys
from shared.stream import decode
from tests.integration.tables.conftest import cleanup
from tests.reference_settlement import kishpa_movements
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration


async def _create(
    stub: table_pb2_grpc.TableServiceStub,
    md: dict[str, Any],
    players: list[str],
    game: common_pb2.Game.ValueType,
    stake: int,
) -> str:
    created = await stub.CreateTable(
        table_pb2.CreateTableRequest(
            settings=table_settings(
                game,
                len(players),
                stake=stake,
                turn_seconds=60,
                reveal_window_seconds=1,
                next_round_pause_ms=30,
            ),
            request_id=uuid.uuid4().hex,
        ),
        metadata=md[players[0]],
    )
    table_id = created.table.table_id
    for p in players[1:]:
        await stub.JoinTable(
            table_pb2.JoinTableRequest(table_id=table_id, request_id=uuid.uuid4().hex),
            metadata=md[p],
        )
    await stub.StartGame(
        table_pb2.StartGameRequest(table_id=table_id, request_id=uuid.uuid4().hex),
        metadata=md[players[0]],
    )
    return table_id


async def _phase_record(redis: Redis, table_id: str, field: str) -> dict[str, Any]:
    """The outbox record of one phase, once the table has written it (30 s at most)."""

    async def written() -> bytes | None:
        raw: bytes | None = await redis.hget(keys.outbox(table_id), field)  # type: ignore[misc]
        return raw

    raw = await wait_until(written, timeout=30, message=f"the {field} phase record")
    record: dict[str, Any] = json.loads(raw)["record"]
    return record


async def test_a_kishpa_table_at_stake_50_shows_and_records_its_stake(
    stub: table_pb2_grpc.TableServiceStub, md: dict[str, Any], players: list[str], redis: Redis
) -> None:
    pair = players[:2]
    table_id = await _create(stub, md, pair, common_pb2.GAME_KISHPA, 50)
    try:
        for p in pair:
            view = (
                await stub.GetTable(table_pb2.GetTableRequest(table_id=table_id), metadata=md[p])
            ).table
            assert view.settings.stake == 50
        record = await _phase_record(redis, table_id, "1:start")
        assert record["stake"] == 50
        postings = start_postings(record)
        contributions = [p.amount for p in postings if p.reason == "bowl_contribution"]
        # 50 each, or 100 each when the kishpa is a 1.
        assert contributions in ([50, 50], [100, 100])
        assert all(p.amount % 50 == 0 for p in postings)
        view = (
            await stub.GetTable(table_pb2.GetTableRequest(table_id=table_id), metadata=md[pair[0]])
        ).table
        assert view.bowl == sum(contributions) == kishpa_movements("start", record)["bowl"]
        created = decode((await redis.xrange(keys.events(table_id), count=1))[0][1])
        assert created.type == "table_created"
        assert created.data["stake"] == 50
    finally:
        await cleanup(redis, table_id)


async def test_a_hand_table_at_stake_100_buys_in_100_each(
    stub: table_pb2_grpc.TableServiceStub, md: dict[str, Any], players: list[str], redis: Redis
) -> None:
    table_id = await _create(stub, md, players, common_pb2.GAME_HAND, 100)
    try:
        record = await _phase_record(redis, table_id, "0:buy_in")
        assert record == {"players": players, "stake": 100}
        view = (
            await stub.GetTable(
                table_pb2.GetTableRequest(table_id=table_id), metadata=md[players[1]]
            )
        ).table
        assert view.settings.stake == 100
        started = [
            decode(fields)
            for _, fields in await redis.xrange(keys.events(table_id))
            if fields[b"type"] == b"game_started"
        ]
        assert [(e.data["stake"], e.data["pot"]) for e in started] == [(100, 400)]
    finally:
        await cleanup(redis, table_id)


@pytest.mark.parametrize("stake", [7, 1000, -5])
async def test_a_stake_not_offered_is_refused_and_creates_nothing(
    stub: table_pb2_grpc.TableServiceStub,
    md: dict[str, Any],
    players: list[str],
    redis: Redis,
    stake: int,
) -> None:
    request_id = uuid.uuid4().hex
    for game in (common_pb2.GAME_KISHPA, common_pb2.GAME_HAND):
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await stub.CreateTable(
                table_pb2.CreateTableRequest(
                    settings=table_pb2.TableSettings(game=game, seats=2, stake=stake),
                    request_id=request_id,
                ),
                metadata=md[players[0]],
            )
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert error_reason(info.value) == "BAD_STAKE"
        assert "stake must be one of: 1, 5, 10, 50, 100" in str(info.value.details())
    assert [k async for k in redis.scan_iter(match=f"*{players[0]}*", count=1000)] == []


@pytest.fixture
async def hand_at_1_and_2(settings: Settings) -> AsyncIterator[TableServer]:
    """A table service offering Hand at stakes 1 and 2 only (KISHPA_STAKES_HAND=1,2)."""
    own = settings.model_copy(update={"stakes_hand": (1, 2)})
    srv = create_table_server(own, address="127.0.0.1:0")
    await srv.start()
    yield srv
    await srv.stop(0)


async def test_the_stakes_offered_are_a_setting_per_game(
    hand_at_1_and_2: TableServer, md: dict[str, Any], players: list[str], redis: Redis
) -> None:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{hand_at_1_and_2.port}") as channel:
        stub = table_pb2_grpc.TableServiceStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await stub.CreateTable(
                table_pb2.CreateTableRequest(
                    settings=table_pb2.TableSettings(game=common_pb2.GAME_HAND, seats=2, stake=5)
                ),
                metadata=md[players[0]],
            )
        assert error_reason(info.value) == "BAD_STAKE"
        assert "stake must be one of: 1, 2" in str(info.value.details())
        table_id = await _create(stub, md, players[:2], common_pb2.GAME_HAND, 2)
        try:
            assert (await _phase_record(redis, table_id, "0:buy_in"))["stake"] == 2
        finally:
            await cleanup(redis, table_id)
        # Kishpa keeps its own list.
        kishpa_id = await _create(stub, md, players[2:], common_pb2.GAME_KISHPA, 5)
        await cleanup(redis, kishpa_id)
