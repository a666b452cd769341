"""Slow and black-holed links between the table service and Redis: nothing doubled, nothing
hangs.

The table store runs over the services' own Redis client (``async_client``: guarded
connections, a deadline on every command) to a redis-server of the test's own through a
:class:`FaultProxy` that adds latency to every chunk, both ways.

- 1 s each way (a 2 s round trip, the issue's upper figure): a round end is committed once
  even when the player's client, tired of waiting, sends it again meanwhile (same request
  id): one new version, one outbox record, one ``round_ended`` event, the same answer twice.
- The same slow link seen from outside: a real table server (in this process) over it
  answers, and its ``kishpa_grpc_server_handling_seconds`` histogram shows the latency
  (the operator's signal, docs/operations.md *A link is slow*).
- A link slower than the command deadline (a Redis that stopped answering without closing
  its connections): the request fails within the deadline as UNAVAILABLE, it does not hang.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
import redis
import redis.exceptions
from prometheus_client import REGISTRY

from kishpa.table.v1 import table_pb2, table_pb2_grpc
from services.common.auth import TokenAuthority
from services.common.errors import failure_of
from services.common.redis_client import async_client
from services.common.settings import load_settings
from services.table.server import create_table_server
from services.table.store import Snapshot, TableStore, Transition, request_field
from shared import keys
from shared.phase_record import PhaseRecord
from shared.retry import REDIS_COMMAND_TIMEOUT_S
from shared.stream import TableEvent
from tests.integration.fault_proxy import FaultProxy
from tests.integration.workers_support import RedisServer
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration


@pytest.fixture
def link(tmp_path: Path) -> Iterator[tuple[RedisServer, FaultProxy]]:
    server = RedisServer(tmp_path / "redis").start()
    proxy = FaultProxy(server.port).start()
    yield server, proxy
    proxy.stop()
    server.stop()


def _round_end(table_id: str) -> Transition:
    record = PhaseRecord(table_id, "kishpa", 1, "end", {"players": ["p1", "p2"]}, 7)
    return Transition(
        state={"round": 1, "status": "between_rounds"},
        events=[TableEvent("round_ended", 1, -1, {"winner": "p1"})],
        phases=[record],
        answer=json.dumps({"result": {"won": True}}),
    )


def _create(snapshot: Snapshot) -> Transition:
    return Transition(state={"round": 1, "status": "playing"})


async def test_a_round_end_sent_twice_over_a_two_second_link_is_committed_once(
    link: tuple[RedisServer, FaultProxy],
) -> None:
    server, proxy = link
    client = async_client(f"redis://{proxy.addr}/0")
    try:
        store = TableStore(client)
        table_id = f"t-slow-{uuid.uuid4().hex[:8]}"
        await store.transact(table_id, _create, create=True)
        proxy.latency_s = 1.0
        request = request_field("p1", "r-end")
        started = time.monotonic()
        sent_before = proxy.received
        first = asyncio.create_task(
            store.transact(table_id, lambda s: _round_end(table_id), request=request)
        )
        # The player's retry leaves while the first is on the way (inside the slow link).
        await wait_until(
            lambda: proxy.received > sent_before,
            timeout=10,
            interval=0.01,
            message="the first request to enter the link",
        )
        again = await store.transact(table_id, lambda s: _round_end(table_id), request=request)
        once = await first
        took = time.monotonic() - started
    finally:
        proxy.latency_s = 0.0
        await client.aclose()
    assert {once.answer, again.answer} == {_round_end(table_id).answer}
    assert sorted([once.replayed, again.replayed]) == [False, True]  # one commit, one replay
    direct = redis.Redis.from_url(server.url)
    assert direct.hget(keys.state(table_id), "version") == b"2"
    assert direct.hlen(keys.outbox(table_id)) == 1
    ended = [f for _, f in direct.xrange(keys.events(table_id)) if f[b"type"] == b"round_ended"]
    assert len(ended) == 1
    print(f"\nround end over a 2 s round-trip link: {took:.1f}s for both answers")


async def test_a_black_holed_redis_is_unavailable_within_the_deadline(
    link: tuple[RedisServer, FaultProxy],
) -> None:
    _server, proxy = link
    client = async_client(f"redis://{proxy.addr}/0")
    try:
        store = TableStore(client)
        table_id = f"t-slow-{uuid.uuid4().hex[:8]}"
        await store.transact(table_id, _create, create=True)
        proxy.latency_s = 3 * REDIS_COMMAND_TIMEOUT_S  # answers arrive far too late
        started = time.monotonic()
        with pytest.raises(
            (redis.exceptions.TimeoutError, redis.exceptions.ConnectionError)
        ) as failed:
            await store.transact(table_id, lambda s: _round_end(table_id), request="p1:x")
        took = time.monotonic() - started
    finally:
        proxy.latency_s = 0.0
        await client.aclose()
    assert took < 2 * REDIS_COMMAND_TIMEOUT_S + 1, took  # not hung
    failure = failure_of(failed.value)
    assert failure is not None, repr(failed.value)
    assert failure.code == grpc.StatusCode.UNAVAILABLE


def _get_table_latency(le: str) -> float:
    """GetTable calls observed (in this process's registry) at or under ``le`` seconds
    (``+Inf``: all of them)."""
    labels = {
        "grpc_service": "kishpa.table.v1.TableService",
        "grpc_method": "GetTable",
        "le": le,
    }
    value = REGISTRY.get_sample_value("kishpa_grpc_server_handling_seconds_bucket", labels)
    return value or 0.0


async def test_a_slow_redis_link_shows_in_the_table_services_latency_histogram(
    link: tuple[RedisServer, FaultProxy],
) -> None:
    _server, proxy = link
    settings = load_settings(
        "table",
        redis_url=f"redis://{proxy.addr}/0",
        token_secret="t" * 40,
        service_secret="s" * 40,
        grpc_port=0,
        metrics_port=0,
        rate_limits=False,
    )
    table = create_table_server(settings, address="127.0.0.1:0", timers=False)
    await table.start()
    token = TokenAuthority.from_settings(settings).issue_player_token("p1", "P1").token
    metadata = (("authorization", f"Bearer {token}"),)
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{table.port}") as channel:
            stub = table_pb2_grpc.TableServiceStub(channel)

            async def get_table() -> grpc.StatusCode:
                try:
                    request = table_pb2.GetTableRequest(table_id=f"t-{uuid.uuid4().hex[:8]}")
                    await stub.GetTable(request, metadata=metadata, timeout=30)
                except grpc.aio.AioRpcError as exc:
                    return exc.code()
                return grpc.StatusCode.OK

            assert await get_table() == grpc.StatusCode.NOT_FOUND  # connections warmed up
            calls, fast = _get_table_latency("+Inf"), _get_table_latency("1.0")
            proxy.latency_s = 0.6  # each way: a Redis round trip takes at least 1.2 s
            assert await get_table() == grpc.StatusCode.NOT_FOUND  # slow, but answered
    finally:
        proxy.latency_s = 0.0
        await table.stop(0)
    assert _get_table_latency("+Inf") == calls + 1
    assert _get_table_latency("1.0") == fast  # the new call is in a bucket above 1 s
