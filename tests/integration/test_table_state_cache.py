"""A process computes its next action on the state it last committed (state_cache.py)
against a private redis-server, so that the commands Redis counts are these tests' alone.

Each "process" is a TableStore of its own; the expected counts and states are worked out
by hand from the steps each test takes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from typing import Any

import pytest
from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError

from devkit.redis_servers import start_redis, stop_redis
from services.table.store import Snapshot, TableStore, Transition, request_field
from shared import keys

pytestmark = pytest.mark.integration


def new_table_id() -> str:
    return f"t-kept-{uuid.uuid4().hex[:12]}"


def increment(snapshot: Snapshot) -> Transition:
    count = int(snapshot.state.get("count", 0)) + 1
    state = {**snapshot.state, "count": count}
    return Transition(state=state, answer=json.dumps({"count": count}))


async def scripts_run(client: Redis) -> int:
    """EVALSHA and EVAL commands the server has run: each is one round trip of a store."""
    stats = await client.info("commandstats")
    return sum(int(stats.get(f"cmdstat_{c}", {}).get("calls", 0)) for c in ("evalsha", "eval"))


async def stored_state(client: Redis, table_id: str) -> dict[str, Any]:
    raw = await client.hget(keys.state(table_id), "state")
    assert raw is not None
    state: dict[str, Any] = json.loads(raw)
    return state


async def test_actions_after_this_process_s_own_commit_take_one_round_trip_each(
    client: Redis,
) -> None:
    kept, unkept = TableStore(client), TableStore(client, state_cache_tables=0)
    for store in (kept, unkept):
        table_id = new_table_id()
        await store.transact(table_id, lambda _: Transition(state={"count": 0}), create=True)
        before = await scripts_run(client)
        answers = [
            json.loads((await store.transact(table_id, increment)).answer) for _ in range(10)
        ]
        used = await scripts_run(client) - before
        assert [a["count"] for a in answers] == list(range(1, 11))
        assert (await stored_state(client, table_id))["count"] == 10
        # Kept: the commit alone (10); not kept: load.lua, then commit.lua (20).
        assert used == (10 if store is kept else 20)


async def test_another_process_s_commit_makes_the_kept_state_stale_and_costs_no_extra_read(
    client: Redis,
) -> None:
    first, second = TableStore(client), TableStore(client)
    table_id = new_table_id()
    await first.transact(table_id, lambda _: Transition(state={"count": 0}), create=True)
    await first.transact(table_id, increment)  # first keeps count 1
    await second.transact(table_id, increment)  # count 2, behind first's back
    before = await scripts_run(client)
    done = await first.transact(table_id, increment)
    # The refused commit returned the state it found (count 2): computed again on it, and
    # committed. Two round trips, as a read then a commit would be.
    assert json.loads(done.answer) == {"count": 3}
    assert await scripts_run(client) - before == 2
    assert (await stored_state(client, table_id))["count"] == 3


async def test_a_table_re_created_under_its_id_is_not_mistaken_for_the_kept_one(
    client: Redis,
) -> None:
    """Same id, same version number, other state: the revision tells them apart (as after a
    Redis restart from an older copy on which another process played on)."""
    first, second = TableStore(client), TableStore(client)
    table_id = new_table_id()
    await first.transact(
        table_id, lambda _: Transition(state={"count": 0, "life": "old"}), create=True
    )
    assert first.cache.get(table_id) is not None  # version 1 of the old table
    await client.delete(keys.state(table_id), keys.events(table_id), keys.requests(table_id))
    await second.transact(
        table_id, lambda _: Transition(state={"count": 100, "life": "new"}), create=True
    )
    done = await first.transact(table_id, increment)
    assert json.loads(done.answer) == {"count": 101}
    assert await stored_state(client, table_id) == {"count": 101, "life": "new"}


def take_turn(player: str, following: str) -> Any:
    """A move only the player whose turn it is may make (the turn then passes on)."""

    def compute(snapshot: Snapshot) -> Transition:
        if snapshot.state["turn"] != player:
            raise PermissionError(f"not {player}'s turn")
        moves = int(snapshot.state["moves"]) + 1
        return Transition(
            state={"turn": following, "moves": moves}, answer=json.dumps({"moves": moves})
        )

    return compute


async def test_a_retried_request_gets_its_first_answer_though_the_kept_state_refuses_it(
    client: Redis,
) -> None:
    store = TableStore(client)
    table_id = new_table_id()
    await store.transact(
        table_id, lambda _: Transition(state={"turn": "p1", "moves": 0}), create=True
    )
    request = request_field("p1", "r1")
    first = await store.transact(table_id, take_turn("p1", "p2"), request=request)
    # The reply was lost; p1 retries. On the kept state it is no longer p1's turn.
    again = await store.transact(table_id, take_turn("p1", "p2"), request=request)
    assert not first.replayed
    assert again.replayed
    assert json.loads(again.answer) == json.loads(first.answer) == {"moves": 1}
    # A new request of p1 is refused, on a fresh read as well.
    with pytest.raises(PermissionError):
        await store.transact(table_id, take_turn("p1", "p2"), request=request_field("p1", "r2"))
    assert await stored_state(client, table_id) == {"turn": "p2", "moves": 1}


async def test_a_retried_request_the_kept_state_would_allow_is_answered_once(
    client: Redis,
) -> None:
    store = TableStore(client)
    table_id = new_table_id()
    await store.transact(table_id, lambda _: Transition(state={"count": 0}), create=True)
    request = request_field("p1", "r1")
    first = await store.transact(table_id, increment, request=request)
    again = await store.transact(table_id, increment, request=request)
    assert again.replayed
    assert again.answer == first.answer == '{"count": 1}'
    assert (await stored_state(client, table_id))["count"] == 1


async def test_a_computation_that_spoils_its_snapshot_and_refuses_spoils_nothing_kept(
    client: Redis,
) -> None:
    store = TableStore(client)
    table_id = new_table_id()
    await store.transact(table_id, lambda _: Transition(state={"count": 0}), create=True)

    def spoil(snapshot: Snapshot) -> Transition:
        snapshot.state["count"] = 999
        raise ValueError("refused after writing into its snapshot")

    with pytest.raises(ValueError, match="refused after"):
        await store.transact(table_id, spoil)
    await store.transact(table_id, increment)  # may compute on a kept state again
    with pytest.raises(ValueError, match="refused after"):
        await store.transact(table_id, spoil)
    done = await store.transact(table_id, increment)
    assert json.loads(done.answer) == {"count": 2}


async def test_concurrent_actions_from_three_processes_lose_and_double_nothing(
    client: Redis,
) -> None:
    stores = [TableStore(client) for _ in range(3)]
    table_id = new_table_id()
    await stores[0].transact(table_id, lambda _: Transition(state={"count": 0}), create=True)
    rounds, per_round = 8, 6

    for _ in range(rounds):
        done = await asyncio.gather(
            *(stores[i % 3].transact(table_id, increment) for i in range(per_round))
        )
        counts = sorted(json.loads(d.answer)["count"] for d in done)
        assert counts == sorted(set(counts)), "each increment answered a count of its own"
    total = rounds * per_round
    assert (await stored_state(client, table_id))["count"] == total
    assert int(await client.hget(keys.state(table_id), "version") or 0) == 1 + total


async def test_a_finished_table_is_not_kept(client: Redis) -> None:
    store = TableStore(client)
    table_id = new_table_id()
    await store.transact(table_id, lambda _: Transition(state={"count": 0}), create=True)
    await store.transact(table_id, lambda s: Transition(state=s.state, finished=True))
    assert store.cache.get(table_id) is None


async def test_a_redis_restart_that_lost_the_table_is_not_mistaken_for_it() -> None:
    """Redis dies and comes back empty; another process re-creates the table and plays it up
    to the version this process kept. This process's next action is computed on what Redis
    holds now, not on what it kept."""
    server = start_redis()
    client, other = Redis.from_url(server.url), Redis.from_url(server.url)
    try:
        here, there = TableStore(client), TableStore(other)
        table_id = new_table_id()
        start = Transition(state={"count": 0, "life": "before"})
        await here.transact(table_id, lambda _: start, create=True)
        for _ in range(2):
            await here.transact(table_id, increment)  # version 3, count 2, kept
        server.kill()
        server.start()
        # The restart broke this process's pooled connection: some other call of its
        # fails on it first (UNAVAILABLE to that caller), and the pool reconnects.
        with contextlib.suppress(RedisConnectionError):
            await client.ping()
        again = Transition(state={"count": 50, "life": "after"})
        await there.transact(table_id, lambda _: again, create=True)
        for _ in range(2):
            await there.transact(table_id, increment)  # version 3 again, count 52
        done = await here.transact(table_id, increment)
        assert json.loads(done.answer) == {"count": 53}
        assert await stored_state(client, table_id) == {"count": 53, "life": "after"}
    finally:
        await client.aclose()
        await other.aclose()
        stop_redis(server)
