"""A watcher resuming from an event the table no longer keeps: the documented signal
(FAILED_PRECONDITION / EVENTS_TRIMMED, docs/api.md) and what each Python client does with it.

A real table service on loopback over Redis; the stream is trimmed by the workers' real
settlement script (``workers.outbox.mark_settled`` running settle.lua): settling round 1's
ending phase drops the events before round 1 (the seating), exactly as a settled round's
history leaves Redis in play.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import grpc
import pytest
from google.protobuf import duration_pb2
from redis.asyncio import Redis
from rich.console import Console

from cli.play.bot import BotSeat
from cli.play.kishpa_ui import KishpaUI
from cli.play.session import CAUGHT_UP, PlaySession
from kishpa.common.v1 import common_pb2
from kishpa.table.v1 import table_pb2, table_pb2_grpc
from sdk import KishpaClient, KishpaError, Session
from sdk.errors import error_info
from services.common.auth import TokenAuthority
from services.common.redis_client import sync_client
from shared import keys
from shared.phase_record import PhaseRef
from tests.integration.tables.conftest import cleanup
from workers.outbox import mark_settled

pytestmark = pytest.mark.integration


def _sid(event_id: str) -> tuple[int, int]:
    ms, _, seq = event_id.partition("-")
    return int(ms), int(seq or 0)


def _settle(redis_url: str, table_id: str, round_no: int, phase: str) -> None:
    """Settle a phase as a worker does (settle.lua): an ending phase trims the stream."""
    client = sync_client(redis_url)
    try:
        ref = PhaseRef(table_id, round_no, phase)
        mark_settled(client, ref, batch_id="1", balances={}, settled_ms=int(time.time() * 1000))
    finally:
        client.close()


@pytest.fixture
async def trimmed(
    stub: table_pb2_grpc.TableServiceStub,
    md: dict[str, Any],
    players: list[str],
    redis: Redis,
    redis_url: str,
) -> AsyncIterator[tuple[str, str, str]]:
    """A started table (a person and a bot) whose seating events were trimmed: (table id,
    an id from before the trim, the oldest id kept)."""
    created = await stub.CreateTable(
        table_pb2.CreateTableRequest(
            settings=table_pb2.TableSettings(
                game=common_pb2.GAME_KISHPA,
                seats=2,
                bots=1,
                turn_time=duration_pb2.Duration(seconds=60),
                reveal_window=duration_pb2.Duration(seconds=60),
            ),
            request_id=str(uuid.uuid4()),
        ),
        metadata=md[players[0]],
    )
    table_id = created.table.table_id
    try:
        await stub.StartGame(
            table_pb2.StartGameRequest(table_id=table_id, request_id="s"),
            metadata=md[players[0]],
        )
        old = (await redis.xrange(keys.events(table_id), count=1))[0][0].decode()
        _settle(redis_url, table_id, 1, "end")
        oldest = (await redis.xrange(keys.events(table_id), count=1))[0][0].decode()
        assert oldest != old  # the seating went: the test would prove nothing otherwise
        yield table_id, old, oldest
    finally:
        await cleanup(redis, table_id)


@contextlib.contextmanager
def _client(
    channel: grpc.aio.Channel, authority: TokenAuthority, player: str
) -> Iterator[KishpaClient]:
    client = KishpaClient.over_channel(channel)
    now = time.time()
    token = authority.issue_player_token(player, player.upper()).token
    client._session = Session(player, player.upper(), token, now, now + 3600)
    yield client


async def test_resuming_from_a_trimmed_event_is_refused_events_trimmed_with_the_oldest_id(
    stub: table_pb2_grpc.TableServiceStub,
    md: dict[str, Any],
    players: list[str],
    trimmed: tuple[str, str, str],
) -> None:
    table_id, old, oldest = trimmed
    call = stub.WatchTable(
        table_pb2.WatchTableRequest(table_id=table_id, after_event_id=old),
        metadata=md[players[0]],
    )
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        async for _ in call:
            pass
    assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    info = error_info(refused.value)
    assert info is not None
    assert (info.domain, info.reason) == ("kishpa.dev", "EVENTS_TRIMMED")
    assert info.metadata["oldest_event_id"] == oldest
    assert "GetTable" in (refused.value.details() or "")

    # From the oldest kept event on (or with no cursor: from the oldest kept), nothing is
    # missing, so the stream flows.
    for after in (oldest, ""):
        first = stub.WatchTable(
            table_pb2.WatchTableRequest(table_id=table_id, after_event_id=after),
            metadata=md[players[0]],
        )
        message = await asyncio.wait_for(first.read(), 10)
        first.cancel()
        assert _sid(message.event.event_id) >= _sid(oldest)


async def test_the_sdk_raises_events_trimmed_or_reloads_the_view_through_on_trimmed(
    channel: grpc.aio.Channel,
    authority: TokenAuthority,
    players: list[str],
    redis_url: str,
    trimmed: tuple[str, str, str],
) -> None:
    table_id, old, _ = trimmed
    with _client(channel, authority, players[0]) as client:
        with pytest.raises(KishpaError) as refused:
            async for _ in client.watch_table(table_id, old):
                pass
        assert refused.value.reason == "EVENTS_TRIMMED"
        assert refused.value.code == grpc.StatusCode.FAILED_PRECONDITION

        reloaded: list[str] = []

        async def reload() -> str:
            view = await client.get_table(table_id)
            reloaded.append(view.last_event_id)
            _settle(redis_url, table_id, 1, "start")  # something new after the view
            return view.last_event_id

        stream = client.watch_table(table_id, old, on_trimmed=reload)
        event = await asyncio.wait_for(anext(stream), 10)
        await stream.aclose()
    assert len(reloaded) == 1
    assert _sid(event.event_id) > _sid(reloaded[0])  # went on from the reloaded view
    assert event.WhichOneof("event") == "settled"


async def test_kishpa_play_shows_the_table_as_it_is_now_and_follows_on(
    channel: grpc.aio.Channel,
    authority: TokenAuthority,
    players: list[str],
    trimmed: tuple[str, str, str],
) -> None:
    table_id, old, _ = trimmed
    console = Console(record=True, width=100)
    with _client(channel, authority, players[0]) as client:
        session = PlaySession(client, console, table_id, {}, KishpaUI())
        session.view = await client.get_table(table_id)
        watching = asyncio.create_task(session._watch(old))
        try:
            deadline = time.monotonic() + 10
            while CAUGHT_UP not in console.export_text(clear=False):
                assert time.monotonic() < deadline, console.export_text()
                assert not watching.done(), console.export_text()
                await asyncio.sleep(0.02)
            assert _sid(session.view.last_event_id) > _sid(old)  # the table as it is now
            assert not watching.done()  # and it follows on
        finally:
            watching.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watching
    text = console.export_text()
    assert "Lost the table" not in text


async def test_kishpa_bots_reload_the_table_and_play_on(
    channel: grpc.aio.Channel,
    authority: TokenAuthority,
    players: list[str],
    trimmed: tuple[str, str, str],
) -> None:
    """A bot seat that read the table, then was away while it moved on by more than a round
    (its view's last event is trimmed): it reloads the table, counts it, and plays its turn."""
    table_id, old, _ = trimmed
    with _client(channel, authority, players[0]) as client:
        real_get_table = client.get_table
        stale = True

        async def get_table(table: str) -> table_pb2.TableView:
            nonlocal stale
            view = await real_get_table(table)
            if stale:  # the view it read before it was away
                stale = False
                view.last_event_id = old
            return view

        client.get_table = get_table  # type: ignore[method-assign]
        seat = BotSeat(client, table_id)
        playing = asyncio.create_task(seat.play())
        try:
            deadline = time.monotonic() + 20
            while seat.stats.caught_up == 0 or seat.stats.moves == 0:
                assert time.monotonic() < deadline, seat.stats
                assert not playing.done(), playing.exception() or seat.stats
                await asyncio.sleep(0.05)
        finally:
            playing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await playing
    assert seat.stats.caught_up == 1
    assert not seat.stats.errors
