"""Hand tables made by matchmaking: real grpc.aio matchmaking and table servers on loopback
and the machine's Redis. Players queue by game; a full Hand queue becomes a Hand table that
starts at once and writes its pot buy-in; Kishpa players are never mixed in.

The test uses its own matchmaking key prefix and fresh player ids; its tables are deleted.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import uuid
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from redis.asyncio import Redis

from kishpa.common.v1 import common_pb2
from kishpa.matchmaking.v1 import matchmaking_pb2 as mm_pb2
from kishpa.matchmaking.v1 import matchmaking_pb2_grpc as mm_grpc
from services.common.auth import TokenAuthority, bearer_metadata
from services.common.redis_client import async_client
from services.common.settings import load_settings
from services.matchmaking.server import create_matchmaking_server
from services.matchmaking.service import MatchmakingConfig
from services.table.server import create_table_server
from shared import keys

pytestmark = pytest.mark.integration

# Long timers: the tables made here must not play by themselves while the test reads them.
CONFIG = MatchmakingConfig(turn_seconds=600, reveal_window_seconds=600, invite_ttl_s=60)


@pytest.fixture
async def redis(redis_url: str) -> AsyncIterator[Redis]:
    client = async_client(redis_url)
    yield client
    await client.aclose()


async def final_ticket(mm: Any, md: Any, ticket_id: str) -> mm_pb2.QueueTicket:
    last = None
    async for message in mm.WatchQueue(mm_pb2.WatchQueueRequest(ticket_id=ticket_id), metadata=md):
        last = message.ticket
    assert last is not None
    return last


async def test_table_players_queue_apart_and_sit_at_a_started_hand_table(
    redis_url: str, redis: Redis
) -> None:
    secrets_env = {
        "token_secret": secrets.token_urlsafe(48),
        "service_secret": secrets.token_urlsafe(48),
    }
    prefix = f"kishpa:mm-hand-{uuid.uuid4().hex[:12]}"
    table_settings = load_settings(
        "table", redis_url=redis_url, grpc_port=0, metrics_port=0, **secrets_env
    )
    table_server = create_table_server(table_settings, address="127.0.0.1:0", timers=False)
    await table_server.start()
    mm_settings = load_settings(
        "matchmaking",
        redis_url=redis_url,
        grpc_port=0,
        metrics_port=0,
        table_addr=f"127.0.0.1:{table_server.port}",
        wallet_addr="127.0.0.1:1",
        **secrets_env,
    )
    mm_server = create_matchmaking_server(
        mm_settings, address="127.0.0.1:0", config=CONFIG, key_prefix=prefix, open_wallets=False
    )
    await mm_server.start()
    authority = TokenAuthority(secrets_env["token_secret"], secrets_env["service_secret"])
    run = uuid.uuid4().hex[:8]
    table_players = [f"h{run}x{i}" for i in range(4)]
    kishpa_players = [f"k{run}x{i}" for i in range(2)]
    tables: set[str] = set()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{mm_server.port}") as channel:
            mm = mm_grpc.MatchmakingServiceStub(channel)
            md = {
                p: bearer_metadata(authority.issue_player_token(p, p).token)
                for p in table_players + kishpa_players
            }

            async def join(player: str, game: int) -> mm_pb2.QueueTicket:
                response = await mm.JoinQueue(
                    mm_pb2.JoinQueueRequest(
                        game=game, seats=4, stake=1, request_id=uuid.uuid4().hex
                    ),
                    metadata=md[player],
                )
                return response.ticket

            # Two Kishpa players wait in their own queue while four Hand players arrive.
            kishpa = [await join(p, common_pb2.GAME_KISHPA) for p in kishpa_players]
            hand = await asyncio.gather(*(join(p, common_pb2.GAME_HAND) for p in table_players))
            finals = await asyncio.wait_for(
                asyncio.gather(
                    *(
                        final_ticket(mm, md[p], t.ticket_id)
                        for p, t in zip(table_players, hand, strict=True)
                    )
                ),
                timeout=30,
            )
            assert {f.state for f in finals} == {mm_pb2.TICKET_STATE_MATCHED}
            assert len({f.table_id for f in finals}) == 1
            table_id = finals[0].table_id
            tables.add(table_id)
            seats = {f.seat: p for p, f in zip(table_players, finals, strict=True)}

            raw = await redis.hget(keys.state(table_id), "state")  # type: ignore[misc]
            state = json.loads(raw)
            assert state["game_name"] == "hand"
            assert state["status"] == "playing", "a matched table starts at once"
            assert state["players"] == [seats[i] for i in range(4)]
            assert state["game"]["round_no"] == 1
            outbox = await redis.hgetall(keys.outbox(table_id))  # type: ignore[misc]
            buy_in = json.loads(outbox[b"0:buy_in"])
            assert buy_in["game"] == "hand"
            assert buy_in["record"] == {"players": state["players"], "stake": 1}

            # The Kishpa players are still waiting (a matched ticket cannot be cancelled):
            # games never share a queue.
            for player, ticket in zip(kishpa_players, kishpa, strict=True):
                cancelled = await mm.CancelQueue(
                    mm_pb2.CancelQueueRequest(
                        ticket_id=ticket.ticket_id, request_id=uuid.uuid4().hex
                    ),
                    metadata=md[player],
                )
                assert cancelled.ticket.state == mm_pb2.TICKET_STATE_CANCELLED
    finally:
        await mm_server.stop(0)
        await table_server.stop(0)
        for table_id in tables:
            await redis.delete(
                keys.state(table_id),
                keys.events(table_id),
                keys.requests(table_id),
                keys.outbox(table_id),
                keys.balances(table_id),
            )
            await redis.zrem(keys.deadlines(table_id), table_id)
        pattern = prefix.replace("{", "[{]").replace("}", "[}]") + ":*"
        async for key in redis.scan_iter(match=pattern):
            await redis.delete(key)
