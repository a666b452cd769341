"""Matchmaking on a Redis Cluster (issue 14): each (game, seats, stake) queue in its own slot,
each player's reservation in his, and the player-level guarantees holding across them
through real grpc.aio servers (matchmaking, table) and Redis (a single node, and a 3-master
cluster with ``--redis-cluster``).

A join is two steps in two slots (the player's reservation, then the ticket in its queue);
the crash tests stop a join between them, or a cancel before its second step, by calling
the store's steps directly, and check that the next request repairs it.

The fixtures (own Redis database and key prefix, table server without timers, cleanup) are
tests/support/matchmaking.py's, shared with test_matchmaking_service.py.
"""

from __future__ import annotations

import asyncio
import random
import time
import uuid
from dataclasses import replace
from typing import Any

import grpc
import pytest
from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster
from redis.crc import key_slot as redis_key_slot
from redis.exceptions import ConnectionError as RedisConnectionError

from kishpa.common.v1 import common_pb2
from kishpa.matchmaking.v1 import matchmaking_pb2 as mm_pb2
from services.common.auth import TokenAuthority
from services.matchmaking.keys import Queue, queue_of
from services.matchmaking.server import MatchmakingServer
from services.matchmaking.service import Matchmaking
from services.matchmaking.store import CANCELLED, EXPIRED, WAITING, MatchStore, Reservation
from shared.keys import key_slot
from tests.support.matchmaking import (
    authority,
    channel,
    cleanup,
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


def _ms() -> int:
    return time.time_ns() // 1_000_000


async def _join(mm: Any, md: Any, queue: Queue, request_id: str = "") -> mm_pb2.QueueTicket:
    response = await mm.JoinQueue(
        mm_pb2.JoinQueueRequest(
            game=GAMES[queue.game],
            seats=queue.seats,
            stake=queue.stake,
            request_id=request_id or uuid.uuid4().hex,
        ),
        metadata=md,
    )
    return response.ticket


def _slot(key: str) -> int:
    return redis_key_slot(key.encode())


def _text(value: Any) -> str | None:
    return None if value is None else (value.decode() if isinstance(value, bytes) else value)


async def _one_queue_at_a_time(redis: Redis, store: MatchStore, player: str) -> str | None:
    """Checked while nothing runs: the player has at most one waiting ticket, in one queue
    list once, and his reservation holds exactly it (or there is neither). Returns it."""
    live: list[str] = []
    queued: list[str] = []
    async for raw in redis.scan_iter(match=store.keys.prefix + ":*"):
        key = raw.decode() if isinstance(raw, bytes) else raw
        if ":ticket:" in key:
            ticket = await store.ticket(key.rsplit(":", 1)[1])
            assert ticket is not None
            if ticket.player_id == player and ticket.state in (WAITING, "forming"):
                live.append(ticket.ticket_id)
        elif key.endswith(":queue"):
            for item in await redis.lrange(key, 0, -1):  # type: ignore[misc]
                ticket = await store.ticket(item.decode())
                if ticket is not None and ticket.player_id == player:
                    queued.append(ticket.ticket_id)
        elif key.endswith(":forming"):
            assert await redis.zcard(key) == 0, "a group formed around one player"
    held = _text(await redis.hget(store.keys.active_ticket(player), "ticket"))  # type: ignore[misc]
    assert len(live) <= 1, f"waiting in {len(live)} queues at once: {live}"
    assert queued == live
    assert held == (live[0] if live else None)
    return live[0] if live else None


async def test_each_queue_keeps_its_tickets_in_its_own_slot_and_the_queues_spread(
    mm: Any, authority: TokenAuthority, redis: Redis, mm_server: MatchmakingServer
) -> None:
    store = mm_server.matchmaking.store
    queues = [
        Queue("kishpa", 2, 5),
        Queue("kishpa", 2, 10),
        Queue("kishpa", 3, 5),
        Queue("kishpa", 4, 1),
        Queue("hand", 2, 5),
    ]
    players = new_players(len(queues))
    mds = {p: md_for(authority, p) for p in players}
    tickets = [await _join(mm, mds[p], q) for p, q in zip(players, queues, strict=True)]
    found = {
        k.decode() if isinstance(k, bytes) else k
        async for k in redis.scan_iter(match=store.keys.prefix + ":*")
    }
    slots = []
    for player, queue, ticket in zip(players, queues, tickets, strict=True):
        assert ticket.state == mm_pb2.TICKET_STATE_WAITING
        assert queue_of(ticket.ticket_id) == queue
        k = store.keys
        queue_keys = [k.queue(queue), k.ticket(queue, ticket.ticket_id), k.expiring(queue)]
        assert set(queue_keys) <= found
        tag = key_slot(f"mm:{queue.game}:{queue.seats}:{queue.stake}")
        assert {_slot(key) for key in queue_keys} == {tag}
        assert await redis.lrange(k.queue(queue), 0, -1) == [ticket.ticket_id.encode()]  # type: ignore[misc]
        # The player's reservation lives in his own slot, and names this ticket.
        active = k.active_ticket(player)
        assert _slot(active) == key_slot(f"mm:player:{player}")
        assert await redis.hget(active, "ticket") == ticket.ticket_id.encode()  # type: ignore[misc]
        slots.append(tag)
    assert len(set(slots)) == len(queues), "two queues share a slot"
    if isinstance(redis, RedisCluster):
        for key in found:
            assert await redis.cluster_keyslot(key) == _slot(key), "the server counts alike"
        masters = {redis.get_node_from_key(store.keys.queue(q)).name for q in queues}
        assert len(masters) == 3, "these five queues live on all three masters"
    for player, ticket in zip(players, tickets, strict=True):
        await mm.CancelQueue(
            mm_pb2.CancelQueueRequest(ticket_id=ticket.ticket_id), metadata=mds[player]
        )


async def test_a_player_hammering_joins_and_cancels_at_many_stakes_waits_in_one_queue_at_a_time(
    mm: Any, authority: TokenAuthority, redis: Redis, mm_server: MatchmakingServer
) -> None:
    store = mm_server.matchmaking.store
    player = new_players(1)[0]
    md = md_for(authority, player)
    # 2-seat queues among them: two tickets of his in one would seat him against himself.
    queues = [
        Queue("kishpa", 2, 5),
        Queue("kishpa", 2, 10),
        Queue("kishpa", 3, 10),
        Queue("hand", 2, 50),
    ]
    # 48 joins at once over four queues in three slots; a third of them are retries.
    rids = [uuid.uuid4().hex for _ in range(32)]
    calls = [(queues[i % 32 % 4], rids[i % 32]) for i in range(48)]
    answers = await asyncio.gather(*(_join(mm, md, q, r) for q, r in calls))
    assert {a.state for a in answers} == {mm_pb2.TICKET_STATE_WAITING}
    assert len({a.ticket_id for a in answers}) == 1, "two tickets for one player"
    assert await _one_queue_at_a_time(redis, store, player) == answers[0].ticket_id

    rng = random.Random(14)

    async def worker() -> None:
        for _ in range(4):
            ticket = await _join(mm, md, rng.choice(queues))
            # His ticket, maybe cancelled by another of his calls meanwhile; never seated.
            assert ticket.state in (mm_pb2.TICKET_STATE_WAITING, mm_pb2.TICKET_STATE_CANCELLED)
            if rng.random() < 0.5:
                await asyncio.sleep(rng.uniform(0, 0.01))
                cancelled = await mm.CancelQueue(
                    mm_pb2.CancelQueueRequest(ticket_id=ticket.ticket_id), metadata=md
                )
                assert cancelled.ticket.state == mm_pb2.TICKET_STATE_CANCELLED

    for _ in range(5):
        await asyncio.gather(*(worker() for _ in range(8)))
        await _one_queue_at_a_time(redis, store, player)
    last = await _one_queue_at_a_time(redis, store, player)
    if last is not None:
        await mm.CancelQueue(mm_pb2.CancelQueueRequest(ticket_id=last), metadata=md)
    assert await _one_queue_at_a_time(redis, store, player) is None


async def test_a_join_cut_short_between_its_two_steps_is_finished_by_the_next_request(
    mm: Any, authority: TokenAuthority, redis: Redis, mm_server: MatchmakingServer
) -> None:
    store = mm_server.matchmaking.store
    player = new_players(1)[0]
    md = md_for(authority, player)
    low, high = Queue("kishpa", 3, 5), Queue("kishpa", 3, 10)
    now = _ms()
    cut = Reservation(low.new_id(), low, player, now, now + 60_000, "ANN", "ann-seed")
    # The first call died right after its first step: reserved, no ticket yet.
    assert (await store.claim(cut, "r1")).kind == "claimed"
    assert await store.ticket(cut.ticket_id) is None
    # His next request, at another stake, makes the reserved ticket and is answered with it.
    other = await _join(mm, md, high)
    assert (other.ticket_id, other.stake, other.state) == (
        cut.ticket_id,
        5,
        mm_pb2.TICKET_STATE_WAITING,
    )
    assert await store.profiles([cut.ticket_id]) == [("ANN", "ann-seed", False)]
    # The first call's retry finds the same ticket; nothing waits at stake 10.
    retry = await _join(mm, md, low, request_id="r1")
    assert retry.ticket_id == cut.ticket_id
    assert await store.waiting_count(low) == 1
    assert await store.waiting_count(high) == 0
    assert await _one_queue_at_a_time(redis, store, player) == cut.ticket_id

    # Cut short again, and the player is back only after the ticket would have expired:
    # it is never made (an expired tombstone) and he queues where he asks.
    await mm.CancelQueue(mm_pb2.CancelQueueRequest(ticket_id=cut.ticket_id), metadata=md)
    stale = Reservation(low.new_id(), low, player, now - 120_000, now - 60_000)
    assert (await store.claim(stale, "r2")).kind == "claimed"
    fresh = await _join(mm, md, high)
    assert fresh.ticket_id != stale.ticket_id
    assert (fresh.stake, fresh.state) == (10, mm_pb2.TICKET_STATE_WAITING)
    gone = await store.ticket(stale.ticket_id)
    assert gone is not None
    assert gone.state == EXPIRED
    assert await store.waiting_count(low) == 0
    late = await _join(mm, md, low, request_id="r2")
    assert (late.ticket_id, late.state) == (stale.ticket_id, mm_pb2.TICKET_STATE_EXPIRED)
    assert await _one_queue_at_a_time(redis, store, player) == fresh.ticket_id
    await mm.CancelQueue(mm_pb2.CancelQueueRequest(ticket_id=fresh.ticket_id), metadata=md)


async def test_a_ticket_that_ended_before_its_reservation_was_given_back_frees_the_player(
    mm: Any, authority: TokenAuthority, redis: Redis, mm_server: MatchmakingServer
) -> None:
    store = mm_server.matchmaking.store
    player = new_players(1)[0]
    md = md_for(authority, player)
    first = await _join(mm, md, Queue("kishpa", 4, 5))
    ticket = await store.ticket(first.ticket_id)
    assert ticket is not None
    # A cancel whose process died after its first step (the queue's slot).
    assert await store.leave(ticket, CANCELLED, _ms(), only_if_due=False) == CANCELLED
    held = await redis.hget(store.keys.active_ticket(player), "ticket")  # type: ignore[misc]
    assert held == first.ticket_id.encode()
    second = await _join(mm, md, Queue("hand", 4, 10))
    assert second.ticket_id != first.ticket_id
    assert second.state == mm_pb2.TICKET_STATE_WAITING
    assert await _one_queue_at_a_time(redis, store, player) == second.ticket_id
    await mm.CancelQueue(mm_pb2.CancelQueueRequest(ticket_id=second.ticket_id), metadata=md)


async def test_a_join_whose_queue_step_fails_is_given_up_and_a_retry_queues_afresh(
    mm: Any,
    authority: TokenAuthority,
    redis: Redis,
    mm_server: MatchmakingServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store = mm_server.matchmaking.store
    player = new_players(1)[0]
    md = md_for(authority, player)
    queue = Queue("kishpa", 4, 10)
    real_join = store.join
    failed: list[str] = []

    async def queue_master_away(
        reservation: Reservation, now_ms: int, *, abort: bool = False
    ) -> Any:
        if not abort and not failed:
            failed.append(reservation.ticket_id)
            raise RedisConnectionError("the queue's master went away")
        return await real_join(reservation, now_ms, abort=abort)

    monkeypatch.setattr(store, "join", queue_master_away)
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await _join(mm, md, queue, request_id="r1")
    assert err.value.code() == grpc.StatusCode.UNAVAILABLE
    given_up = await store.ticket(failed[0])
    assert given_up is not None
    assert given_up.state == CANCELLED
    assert await redis.exists(store.keys.active_ticket(player)) == 0
    assert await store.request_kinds(player, "r1") == []
    retry = await _join(mm, md, queue, request_id="r1")
    assert retry.ticket_id != failed[0]
    assert retry.state == mm_pb2.TICKET_STATE_WAITING
    assert await _one_queue_at_a_time(redis, store, player) == retry.ticket_id
    await mm.CancelQueue(mm_pb2.CancelQueueRequest(ticket_id=retry.ticket_id), metadata=md)


async def test_the_sweeper_visits_a_joined_queue_its_settings_no_longer_offer(
    mm: Any, authority: TokenAuthority, redis: Redis, mm_server: MatchmakingServer
) -> None:
    player = new_players(1)[0]
    md = md_for(authority, player)
    ticket = await _join(mm, md, Queue("hand", 2, 50))
    serving = mm_server.matchmaking
    # A replica whose settings offer only stake 1, an hour later.
    other = Matchmaking(
        serving.store,
        serving.tables,
        replace(serving.config, stakes={"kishpa": (1,), "hand": (1,)}),
        clock=lambda: _ms() + 3_600_000,
    )
    expired, _ = await other.sweep()
    assert expired == 1
    ended = await serving.store.ticket(ticket.ticket_id)
    assert ended is not None
    assert ended.state == EXPIRED
    assert await _one_queue_at_a_time(redis, serving.store, player) is None
