"""Matchmaking by stake (issue 17) through real grpc.aio servers (matchmaking, table) and
Redis: one quick-match queue per (game, seats, stake), so players at different stakes never
share a table; private tables at any stake the game offers.

The fixtures (own Redis database and key prefix, table server without timers, cleanup) are
tests/support/matchmaking.py's, shared with test_matchmaking_service.py.
"""

from __future__ import annotations

import asyncio
import json
import random
import uuid
from typing import Any

import grpc
import pytest
from redis.asyncio import Redis

from kishpa.common.v1 import common_pb2
from kishpa.matchmaking.v1 import matchmaking_pb2 as mm_pb2
from kishpa.table.v1 import table_pb2
from sdk import table_settings
from services.common.auth import TokenAuthority
from services.common.errors import error_reason
from shared import keys as table_keys
from tests.support.matchmaking import (
    authority,
    channel,
    cleanup,
    final_ticket,
    md_for,
    mm,
    mm_server,
    new_players,
    prefix,
    redis,
    redis_url,
    secrets_env,
    table_server,
)

pytestmark = pytest.mark.integration

__all__ = [  # fixtures, imported so pytest finds them in this module
    "authority",
    "channel",
    "cleanup",
    "mm",
    "mm_server",
    "prefix",
    "redis",
    "redis_url",
    "secrets_env",
    "table_server",
]

GAMES = {"kishpa": common_pb2.GAME_KISHPA, "hand": common_pb2.GAME_HAND}
Queue = tuple[str, int, int]  # game, seats, stake


async def _join(mm: Any, md: Any, queue: Queue) -> mm_pb2.QueueTicket:
    game, seats, stake = queue
    response = await mm.JoinQueue(
        mm_pb2.JoinQueueRequest(
            game=GAMES[game], seats=seats, stake=stake, request_id=uuid.uuid4().hex
        ),
        metadata=md,
    )
    return response.ticket


async def _table(redis: Redis, table_id: str) -> dict[str, Any]:
    raw = await redis.hget(table_keys.state(table_id), "state")  # type: ignore[misc]
    assert raw is not None, f"table {table_id} does not exist"
    state: dict[str, Any] = json.loads(raw)
    return state


async def test_players_at_different_stakes_never_share_a_table(
    mm: Any, authority: TokenAuthority, redis: Redis, cleanup: set[str]
) -> None:
    # Every (game, seats, stake) queue gets two tables' worth of players, all joining at
    # once in a shuffled order, so that the queues interleave.
    queues: list[Queue] = [
        (game, seats, stake) for game in GAMES for seats in (2, 4) for stake in (1, 5, 100)
    ]
    wanted: dict[str, Queue] = {}
    for queue in queues:
        for player in new_players(2 * queue[1]):
            wanted[player] = queue
    order = list(wanted)
    random.Random(17).shuffle(order)
    mds = {p: md_for(authority, p) for p in order}
    tickets = await asyncio.gather(*(_join(mm, mds[p], wanted[p]) for p in order))
    finals = await asyncio.gather(
        *(final_ticket(mm, mds[p], t.ticket_id) for p, t in zip(order, tickets, strict=True))
    )
    seated: dict[str, list[str]] = {}
    for player, ticket in zip(order, finals, strict=True):
        assert ticket.state == mm_pb2.TICKET_STATE_MATCHED, (player, ticket)
        assert (ticket.stake, ticket.seats) == (wanted[player][2], wanted[player][1])
        seated.setdefault(ticket.table_id, []).append(player)
        cleanup.add(ticket.table_id)

    tables_per_queue: dict[Queue, int] = {}
    for table_id, players in seated.items():
        state = await _table(redis, table_id)
        assert sorted(state["players"]) == sorted(players)
        queue = (state["game_name"], state["settings"]["seats"], state["settings"]["stake"])
        # Everyone at this table asked for exactly its game, size and stake.
        assert {wanted[p] for p in players} == {queue}
        assert len(players) == queue[1]
        tables_per_queue[queue] = tables_per_queue.get(queue, 0) + 1
    assert tables_per_queue == dict.fromkeys(queues, 2)


async def test_two_players_alone_at_their_stakes_keep_waiting(
    mm: Any, authority: TokenAuthority
) -> None:
    low, high = new_players(2)
    md = {low: md_for(authority, low), high: md_for(authority, high)}
    first = await _join(mm, md[low], ("kishpa", 2, 5))
    second = await _join(mm, md[high], ("kishpa", 2, 10))
    for player, ticket in ((low, first), (high, second)):
        assert ticket.state == mm_pb2.TICKET_STATE_WAITING
        assert ticket.players_waiting == 1
        await mm.CancelQueue(
            mm_pb2.CancelQueueRequest(ticket_id=ticket.ticket_id), metadata=md[player]
        )


async def test_a_stake_the_game_does_not_offer_is_refused(
    mm: Any, authority: TokenAuthority, redis: Redis, prefix: str
) -> None:
    player = new_players(1)[0]
    md = md_for(authority, player)
    for stake in (2, 7, 1000, -1):
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await _join(mm, md, ("hand", 4, stake))
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert error_reason(info.value) == "BAD_STAKE"
        assert "1, 5, 10, 50, 100" in str(info.value.details())
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await mm.CreatePrivateTable(
                mm_pb2.CreatePrivateTableRequest(
                    settings=table_pb2.TableSettings(game=common_pb2.GAME_KISHPA, stake=stake)
                ),
                metadata=md,
            )
        assert error_reason(info.value) == "BAD_STAKE"
    pattern = prefix.replace("{", "[{]").replace("}", "[}]") + ":*"
    assert [k async for k in redis.scan_iter(match=pattern)] == []


@pytest.mark.parametrize(("game", "stake"), [("kishpa", 50), ("hand", 100)])
async def test_a_private_table_at_any_offered_stake(
    mm: Any, authority: TokenAuthority, redis: Redis, cleanup: set[str], game: str, stake: int
) -> None:
    ann, bob = new_players(2)
    md = {ann: md_for(authority, ann), bob: md_for(authority, bob)}
    created = await mm.CreatePrivateTable(
        mm_pb2.CreatePrivateTableRequest(
            settings=table_settings(GAMES[game], 2, stake=stake, turn_seconds=600),
            request_id=uuid.uuid4().hex,
        ),
        metadata=md[ann],
    )
    cleanup.add(created.table_id)
    await mm.JoinByCode(
        mm_pb2.JoinByCodeRequest(invite_code=created.invite_code, request_id="j"),
        metadata=md[bob],
    )
    state = await _table(redis, created.table_id)
    assert (state["game_name"], state["settings"]["stake"]) == (game, stake)
    assert state["players"] == [ann, bob]
