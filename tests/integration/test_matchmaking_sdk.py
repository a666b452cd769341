"""The client SDK and matchmaking's recovery, through real grpc.aio servers and Redis.

Sign-in and a quick match end to end; retries of an unreachable call reuse one request id;
a token near expiry is refreshed before the call; WatchTable resumes after the table server
restarts without losing or repeating an event; a group formed while the table service was
down is seated by the sweeper once it is back.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import grpc
import pytest
from redis.asyncio import Redis

from cli.play.bot import BotPlayer
from kishpa.matchmaking.v1 import matchmaking_pb2 as mm_pb2
from kishpa.matchmaking.v1 import matchmaking_pb2_grpc as mm_grpc
from kishpa.table.v1 import table_pb2
from sdk import KishpaClient, KishpaError, RetryPolicy, events
from sdk.fairness import evidence_from_record, verify_round
from sdk.views import my_turn
from services.common.auth import TokenAuthority
from services.matchmaking.server import MatchmakingServer, create_matchmaking_server
from services.matchmaking.service import MatchmakingConfig
from services.table.server import TableServer
from shared import keys as table_keys
from tests.support.fair_order import web_verdict
from tests.support.matchmaking_sdk import (
    _free_port,
    ann_and_bob,
    client_for,
    mm_settings,
    quick_match,
    start_mm,
    start_table,
    table_and_matchmaking,
)
from tests.support.matchmaking_sdk import env as env  # a fixture
from tests.support.matchmaking_sdk import prefix as prefix  # a fixture
from tests.support.matchmaking_sdk import redis as redis  # a fixture
from tests.support.matchmaking_sdk import redis_url as redis_url  # a fixture
from tests.support.matchmaking_sdk import table_port as table_port  # a fixture
from tests.support.matchmaking_sdk import tables_made as tables_made  # a fixture
from tests.support.table_play import play_until
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration


PATIENT = RetryPolicy(attempts=40, first_delay_s=0.05, max_delay_s=0.5)


async def test_login_quick_match_and_play_through_the_sdk(
    env: dict[str, Any], table_port: int, prefix: str, tables_made: set[str]
) -> None:
    async with (
        table_and_matchmaking(env, table_port, prefix) as (_table, mm),
        ann_and_bob(mm, table_port) as (ann, bob),
    ):
        assert ann.player_id != bob.player_id
        first = await ann.join_queue(seats=2)
        assert first.state == mm_pb2.TICKET_STATE_WAITING
        waiting = asyncio.create_task(ann.wait_for_table(first.ticket_id))
        await bob.join_queue(seats=2)
        matched = await asyncio.wait_for(waiting, 10)
        tables_made.add(matched.table_id)
        assert (await ann.my_table()) is not None
        view = await ann.get_table(matched.table_id)
        assert view.my_seat == matched.seat
        assert len(view.round.my_rack.tiles) in (14, 15)
        with pytest.raises(KishpaError) as err:
            await ann.join_by_code("WRONG1")
        assert err.value.code == grpc.StatusCode.NOT_FOUND
        assert err.value.reason == "INVITE_NOT_FOUND"
        assert not err.value.retryable


class FlakyQueue(mm_grpc.MatchmakingServiceServicer):
    """A real gRPC servicer that is 'unavailable' twice, recording each request id it got."""

    def __init__(self) -> None:
        self.request_ids: list[str] = []

    async def JoinQueue(self, request: mm_pb2.JoinQueueRequest, context: Any) -> Any:
        self.request_ids.append(request.request_id)
        if len(self.request_ids) <= 2:
            await context.abort(grpc.StatusCode.UNAVAILABLE, "restarting")
        return mm_pb2.JoinQueueResponse(
            ticket=mm_pb2.QueueTicket(ticket_id="t1", state=mm_pb2.TICKET_STATE_WAITING)
        )


async def test_retries_reuse_the_request_id() -> None:
    flaky = FlakyQueue()
    server = grpc.aio.server()
    mm_grpc.add_MatchmakingServiceServicer_to_server(flaky, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        async with KishpaClient(f"127.0.0.1:{port}", "127.0.0.1:1", retry=PATIENT) as client:
            client.use_token(TokenAuthority("k" * 32).issue_player_token("p1", "Ann").token)
            ticket = await client.join_queue(seats=4)
        assert ticket.ticket_id == "t1"
        assert len(flaky.request_ids) == 3
        assert len(set(flaky.request_ids)) == 1, "a retry must resend the same request id"
        assert flaky.request_ids[0]
    finally:
        await server.stop(0)


async def test_a_call_waits_out_a_server_that_is_not_up_yet(
    env: dict[str, Any], table_port: int, prefix: str
) -> None:
    port = _free_port()

    async def start_late() -> MatchmakingServer:
        await asyncio.sleep(0.5)
        srv = create_matchmaking_server(
            mm_settings(env, table_port),
            address=f"127.0.0.1:{port}",
            key_prefix=prefix,
            open_wallets=False,
        )
        await srv.start()
        return srv

    late = asyncio.create_task(start_late())
    async with KishpaClient(f"127.0.0.1:{port}", "127.0.0.1:1", retry=PATIENT) as client:
        session = await client.login("Early Bird")
    srv = await late
    await srv.stop(0)
    assert session.display_name == "Early Bird"


async def test_a_token_near_expiry_is_refreshed_before_the_call(
    env: dict[str, Any], table_port: int, prefix: str
) -> None:
    mm = await start_mm(env, table_port, prefix)
    authority = TokenAuthority(env["token_secret"], token_ttl_seconds=100)
    issued = authority.issue_player_token("p-refresh-" + uuid.uuid4().hex[:6], "Ann")
    # The client's clock says 90 of the token's 100 seconds are gone.
    clock = [float(issued.expires_at - 10)]
    try:
        async with client_for(mm, table_port, clock=lambda: clock[0]) as client:
            client.use_token(issued.token)
            assert await client.my_table() is None
            assert client.session.token != issued.token, "the token was refreshed"
            assert client.session.expires_at > issued.expires_at - 10
    finally:
        await mm.stop(0)


async def whose_turn(table_id: str, *players: KishpaClient) -> tuple[KishpaClient, Any]:
    """The player whose turn it is (to draw or discard) and his view, once there is one."""

    async def turn() -> tuple[KishpaClient, Any] | None:
        for player in players:
            view = await player.get_table(table_id)
            playing = view.round.phase in (
                table_pb2.ROUND_PHASE_FIRST_DISCARD,
                table_pb2.ROUND_PHASE_TURNS,
            )
            if playing and my_turn(view):
                return player, view
        return None

    return await wait_until(turn, timeout=60, interval=0.1, message="a player's turn")


async def test_watch_table_resumes_after_the_table_server_restarts(
    env: dict[str, Any], table_port: int, prefix: str, redis: Redis, tables_made: set[str]
) -> None:
    table = await start_table(env, table_port)
    mm = await start_mm(env, table_port, prefix)
    try:
        async with ann_and_bob(mm, table_port, retry=PATIENT) as (ann, bob):
            private = await ann.create_private_table(2, turn_seconds=600, reveal_window_seconds=1)
            tables_made.add(private.table_id)
            await bob.join_by_code(private.invite_code)
            seen: list[str] = []
            kinds: list[str] = []
            moved = asyncio.Event()
            delivering = asyncio.Event()

            async def follow() -> None:
                async for event in ann.watch_table(private.table_id):
                    seen.append(event.event_id)
                    delivering.set()
                    kinds.append(events.kind(event))
                    if moved.is_set() and events.kind(event) == "discarded":
                        return

            watcher = asyncio.create_task(follow())
            await asyncio.wait_for(delivering.wait(), 15)  # the table's history is coming
            before = len(seen)
            await table.stop(0)
            table = await start_table(env, table_port)
            # A move after the restart: the resumed stream must deliver it, once.
            mover, mine = await whose_turn(private.table_id, ann, bob)
            if mine.round.phase == table_pb2.ROUND_PHASE_TURNS and not mine.round.turn_drew:
                mine = (await mover.draw(private.table_id)).table
            moved.set()
            await mover.discard(private.table_id, mine.round.my_rack.tiles[0].id)
            await asyncio.wait_for(watcher, 20)
        stream = await redis.xrange(table_keys.events(private.table_id))
        all_ids = [i.decode() for i, _ in stream]
        assert len(seen) == len(set(seen)), "an event was delivered twice"
        assert seen == [i for i in all_ids if i in set(seen)], "events out of order"
        # The stream was followed across the restart up to the move made after it.
        assert len(seen) > before
        assert kinds[-1] == "discarded"
    finally:
        await mm.stop(0)
        await table.stop(0)


async def test_a_group_formed_while_the_table_service_is_down_is_seated_later(
    env: dict[str, Any], table_port: int, prefix: str, tables_made: set[str]
) -> None:
    mm = await start_mm(
        env,
        table_port,
        prefix,
        MatchmakingConfig(turn_seconds=600, stale_group_ms=100),
    )
    authority = TokenAuthority(env["token_secret"])
    table: TableServer | None = None
    try:
        async with (
            client_for(mm, table_port) as ann,
            client_for(mm, table_port) as bob,
        ):
            for client, name in ((ann, "ann"), (bob, "bob")):
                pid = f"{name}-{uuid.uuid4().hex[:8]}"
                issued = authority.issue_player_token(pid, name)
                client.use_token(issued.token)
            first = await ann.join_queue(seats=2)
            second = await bob.join_queue(seats=2)
            # The table service is down: the pair is popped but not seated, and not lost.
            assert second.state == mm_pb2.TICKET_STATE_WAITING
            with pytest.raises(KishpaError) as err:
                await ann.cancel_queue(first.ticket_id)
            assert err.value.reason == "TICKET_MATCHED"
            table = await start_table(env, table_port)
            a, b = await asyncio.wait_for(
                asyncio.gather(
                    ann.wait_for_table(first.ticket_id), bob.wait_for_table(second.ticket_id)
                ),
                30,
            )
            tables_made.add(a.table_id)
            assert a.table_id == b.table_id
            assert {a.seat, b.seat} == {0, 1}
    finally:
        await mm.stop(0)
        if table is not None:
            await table.stop(0)


# ---- the first deal of a matchmade table (docs/fairness.md, "The commitment order") -------


async def _stream(table: TableServer, table_id: str) -> list[Any]:
    return list(await table.tables.store.read_events(table_id, "0-0", count=2000))


async def test_a_matchmade_first_deal_waits_for_a_contribution_made_after_the_commitment(
    env: dict[str, Any], table_port: int, prefix: str, tables_made: set[str]
) -> None:
    """Ann's client declares it contributes; Bob's does not. The table fills and is not
    dealt: it waits for Ann, who contributes on seeing the commitment, and is dealt at once
    (Bob is not awaited). The stream shows the commitment, then her contribution, then the
    deal, and every verifier checks that order on the round's record."""
    async with (
        table_and_matchmaking(env, table_port, prefix) as (table, mm),
        ann_and_bob(mm, table_port, contribute=False) as (ann, bob),
    ):
        table_id = await quick_match(ann, bob, ann_declares=True, bob_declares=False)
        tables_made.add(table_id)
        view = await ann.get_table(table_id)
        assert view.round.round == 0  # not dealt: waiting for Ann
        assert view.next_deal == 1
        assert len(view.next_deal_commitment) == 64
        kinds = [e.event.type for e in await _stream(table, table_id)]
        assert "round_started" not in kinds
        assert kinds.index("seed_committed") < kinds.index("player_joined")
        text, after = await ann.contribute(table_id, 1)
        # Dealt in the same commit as the contribution, long before the deadline.
        assert after.round.round == 1, after
        events = await _stream(table, table_id)
        order = [
            (e.event.type, e.id)
            for e in events
            if e.event.type in ("seed_committed", "contribution_accepted", "round_started")
        ]
        assert [t for t, _ in order] == [
            "seed_committed",
            "contribution_accepted",
            "round_started",
        ]
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{table_port}")
        players = {
            c.player_id: BotPlayer(channel, c.session.token, bytes([n + 11]) * 80)
            for n, c in enumerate((ann, bob))
        }
        await play_until(
            players,
            table_id,
            lambda v: v.round.round >= 2 or v.round.phase == table_pb2.ROUND_PHASE_ENDED,
        )
        record = await ann.round_record(table_id, 1)
        await channel.close()
        mine = list(record.player_ids).index(ann.player_id)
        assert [(c.seat, c.contribution) for c in record.contributions] == [(mine, text)]
        result = verify_round(evidence_from_record(record, text))
        assert result.ok, result.summary()
        assert result.whole_table
        assert result.contributed
        # The order is what the verifiers check: the same record with the commitment
        # published after Ann's contribution fails everywhere.
        late = table_pb2.RoundRecord()
        late.CopyFrom(record)
        late.precommitment_event_id = record.deal_event_id
        bad = verify_round(evidence_from_record(late, text))
        assert "COMMITMENT_LATE" in {f.check for f in bad.failures}, bad.summary()
        web = web_verdict(record)
        if web is not None:
            assert web["ok"], web["summary"]
            web_late = web_verdict(late)
            assert web_late is not None
            assert "COMMITMENT_LATE" in web_late["checks"]


async def test_a_silent_seat_that_declared_holds_the_first_deal_no_longer_than_the_deadline(
    env: dict[str, Any], table_port: int, prefix: str, tables_made: set[str]
) -> None:
    """Both clients declare they contribute; Bob's never does. The first deal waits for
    him only until the 3 s contribution deadline, then is dealt with his default."""
    async with (
        table_and_matchmaking(env, table_port, prefix) as (table, mm),
        ann_and_bob(mm, table_port, contribute=False) as (ann, bob),
    ):
        table_id = await quick_match(ann, bob, ann_declares=True, bob_declares=True)
        tables_made.add(table_id)
        text, view = await ann.contribute(table_id, 1)
        assert view.round.round == 0  # still waiting for Bob
        async with asyncio.timeout(10):
            while view.round.round < 1:
                await asyncio.sleep(0.05)
                view = await ann.get_table(table_id)
        events = await _stream(table, table_id)
        (wait,) = [
            e
            for e in events
            if e.event.type == "deadline" and e.event.data["kind"] == "contributions"
        ]
        waited_ms = int(wait.event.data["at_ms"]) - int(wait.id.split("-")[0])
        assert 2_500 <= waited_ms <= 3_500
        (started,) = [e for e in events if e.event.type == "round_started"]
        assert int(started.id.split("-")[0]) >= int(wait.event.data["at_ms"])
        seats = list(started.event.data["players"])
        snapshot = await table.tables.store.load(table_id)
        assert snapshot is not None
        assert snapshot.state["fair"]["contributions"] == {ann.player_id: text}
        assert bob.player_id in seats


async def test_a_full_private_table_waits_for_the_declared_seats_then_deals(
    env: dict[str, Any], table_port: int, prefix: str, tables_made: set[str]
) -> None:
    """A private table starts the moment its last seat is taken (JoinByCode): with both
    clients declared, the first deal waits for both contributions and is dealt by the
    second, each accepted after the commitment."""
    async with (
        table_and_matchmaking(env, table_port, prefix) as (table, mm),
        ann_and_bob(mm, table_port, contribute=False) as (ann, bob),
    ):
        private = await ann.create_private_table(2, will_contribute=True)
        tables_made.add(private.table_id)
        await bob.join_by_code(private.invite_code, will_contribute=True)
        view = await bob.get_table(private.table_id)
        assert view.status == table_pb2.TABLE_STATUS_PLAYING
        assert view.round.round == 0  # full, started, not dealt: both are awaited
        _, view = await ann.contribute(private.table_id, 1)
        assert view.round.round == 0  # still waiting for Bob
        _, view = await bob.contribute(private.table_id, 1)
        assert view.round.round == 1  # dealt by the last awaited contribution
        order = [
            e.event.type
            for e in await _stream(table, private.table_id)
            if e.event.type in ("seed_committed", "contribution_accepted", "round_started")
        ]
        assert order == [
            "seed_committed",
            "contribution_accepted",
            "contribution_accepted",
            "round_started",
        ]
