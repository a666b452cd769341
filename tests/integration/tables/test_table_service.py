"""The table service through a real grpc.aio server on loopback and the machine's Redis.

Whole games of bots, hidden information, concurrent and duplicated actions, resuming the
event stream, and bad input. Every table has a fresh id; nothing else in Redis is touched.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Sequence
from typing import Any

import grpc
import pytest
from google.protobuf.json_format import MessageToDict
from redis.asyncio import Redis

from cli.play.bot import BotPlayer
from games.kishpa import round as rnd
from kishpa.common.v1 import common_pb2
from kishpa.table.v1 import table_pb2, table_pb2_grpc
from services.common.auth import TokenAuthority, bearer_metadata
from services.common.errors import error_reason
from services.common.settings import Settings
from shared import keys
from shared.stream import decode
from tests.integration.stream_wait import until_delivered
from tests.integration.tables.conftest import cleanup, ids_in, private_part, versioned_state
from tests.reference_settlement import kishpa_movements
from tests.support.table_play import open_table, play_until
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration


async def _stream_len(redis: Redis, table_id: str) -> int:
    return int(await redis.xlen(keys.events(table_id)))


async def test_four_bots_play_rounds_until_the_last_round_empties_the_bowl(
    stub: table_pb2_grpc.TableServiceStub,
    channel: grpc.aio.Channel,
    authority: TokenAuthority,
    md: dict[str, Any],
    players: list[str],
    redis: Redis,
) -> None:
    table_id = await open_table(stub, md, players)
    try:
        bots = {
            p: BotPlayer(channel, authority.issue_player_token(p, p).token, bytes([n]) * 80)
            for n, p in enumerate(players)
        }
        view = await play_until(bots, table_id, lambda v: v.round.round >= 3)
        pressed = await stub.PressLastRound(
            table_pb2.PressLastRoundRequest(table_id=table_id, request_id="press"),
            metadata=md[players[0]],
        )
        assert pressed.table.last_round_pressed
        view = await play_until(bots, table_id, lambda v: v.status == table_pb2.TABLE_STATUS_CLOSED)
        last = view.round.round
        assert last in (3, 4), "the round after the press is the last"
        assert view.bowl == 0
        assert view.round.server_seed, "the seed is revealed once the round ended"

        # The outbox holds every phase of every round, and the rules settle them.
        outbox = await redis.hgetall(keys.outbox(table_id))  # type: ignore[misc]
        fields = sorted(k.decode() for k in outbox)
        assert fields == sorted(f"{r}:{p}" for r in range(1, last + 1) for p in ("start", "end"))
        bowl = 0
        for r in range(1, last + 1):
            for phase in ("start", "end"):
                value = json.loads(outbox[f"{r}:{phase}".encode()])
                assert value["table_id"] == table_id
                assert value["game"] == "kishpa"
                assert (value["round"], value["phase"]) == (r, phase)
                bowl += kishpa_movements(phase, value["record"]).get("bowl", 0)
        assert bowl == 0, "after the last round the bowl account is empty"
        final = json.loads(outbox[f"{last}:end".encode()])["record"]
        assert final["last_round"] is True

        # The bowl events tell the same story: only the last round split or took it for good.
        events = await redis.xrange(keys.events(table_id))
        outcomes = [json.loads(f[b"data"])["outcome"] for _, f in events if f[b"type"] == b"bowl"]
        assert len(outcomes) == last
        assert outcomes[-1] in ("taken", "split")
        assert events[-1][1][b"type"] == b"table_closed"
        assert await redis.zscore(keys.deadlines(table_id), table_id) is None
        assert await redis.ttl(keys.state(table_id)) > 0, "a closed table expires"
    finally:
        await cleanup(redis, table_id)


async def test_a_spying_player_never_sees_another_hand_or_the_pile(
    stub: table_pb2_grpc.TableServiceStub,
    channel: grpc.aio.Channel,
    authority: TokenAuthority,
    md: dict[str, Any],
    players: list[str],
    redis: Redis,
) -> None:
    table_id = await open_table(stub, md, players)
    spy = players[1]
    spy_seat = 1
    received: list[dict[str, Any]] = []
    watched: list[table_pb2.TableEvent] = []
    batches: list[table_pb2.WatchTableResponse] = []  # the same stream, batched
    # Everything the spy may legitimately know, accumulated from the hidden state.
    allowed: set[int] = set()

    async def watch() -> None:
        call = stub.WatchTable(table_pb2.WatchTableRequest(table_id=table_id), metadata=md[spy])
        async for item in call:
            watched.append(item.event)

    async def watch_batched() -> None:
        request = table_pb2.WatchTableRequest(table_id=table_id, batched=True)
        async for item in stub.WatchTable(request, metadata=md[spy]):
            batches.append(item)

    async def check_now(extra: Sequence[Any] = ()) -> None:
        """Call every read RPC as the spy; compare what came back (and ``extra``, answers the
        spy just received) with the hidden state."""
        _, state = await versioned_state(redis, table_id)
        round_state = rnd.RoundState.from_dict(state["game"]["round"])
        public = set(round_state.discards) | set(round_state.kishpa_tiles)
        # A doll turned as kishpa and put back is announced (a doll has one copy: its face
        # always named its id); that it is somewhere in the pile is public.
        public |= set(round_state.dolls_returned)
        if len(round_state.kishpa_tiles) > 1:  # the replacement and the dolls it turned back
            public |= set(round_state.replacement_dolls)
        public |= {t for g in round_state.winning_groups for t in g}
        if round_state.final_discard is not None:
            public.add(round_state.final_discard)
        mine = set(round_state.hands[spy_seat])
        allowed.update(public | mine)
        others = {t for s, h in enumerate(round_state.hands) if s != spy_seat for t in h}
        view = (
            await stub.GetTable(table_pb2.GetTableRequest(table_id=table_id), metadata=md[spy])
        ).table
        messages: list[Any] = [view, *extra]
        between_rounds = view.round.phase == table_pb2.ROUND_PHASE_ENDED
        if not between_rounds:  # between rounds there is no hand to advise
            messages.append(
                await stub.GetHint(table_pb2.GetHintRequest(table_id=table_id), metadata=md[spy])
            )
        for message in messages:
            as_dict = MessageToDict(message, preserving_proto_field_name=True)
            received.append(as_dict)
            ids = ids_in(as_dict)
            assert not (ids & (others - public)), "another player's tile leaked"
            assert not (ids & set(round_state.pile)), "a tile of the pile leaked"
        assert sorted(t.id for t in view.round.my_rack.tiles) == sorted(mine)
        for seat in view.seats:
            assert seat.tile_count == len(round_state.hands[seat.seat])

    watchers = [asyncio.create_task(watch()), asyncio.create_task(watch_batched())]
    try:
        bots = {
            p: BotPlayer(channel, authority.issue_player_token(p, p).token, bytes([n + 9]) * 80)
            for n, p in enumerate(players)
        }
        # Mutating RPCs of the spy (legal or not: he may hold the kishpa in an open window)
        # are refused cleanly or answered, and leak nothing either.
        for call, request in (
            (stub.SetRackOrder, table_pb2.SetRackOrderRequest(table_id=table_id, tile_ids=[0])),
            (stub.PressLastRound, table_pb2.PressLastRoundRequest(table_id=table_id)),
            (stub.DeclineReveal, table_pb2.DeclineRevealRequest(table_id=table_id)),
            (stub.RevealKishpa, table_pb2.RevealKishpaRequest(table_id=table_id)),
        ):
            response, error = await _outcome(call(request, metadata=md[spy]))
            if error is not None:
                assert error.code() != grpc.StatusCode.INTERNAL
            await check_now([] if response is None else [response])

        async def after_move(player: str, answer: table_pb2.TableView) -> None:
            await check_now([answer] if player == spy else [])

        await play_until(bots, table_id, lambda v: v.round.round >= 2, after_each=after_move)
        await check_now()  # the second round was dealt by the deadline loop, between moves
        # The spy sets his rack order and gets it back, reversed, on a fresh GetTable.
        view = (
            await stub.GetTable(table_pb2.GetTableRequest(table_id=table_id), metadata=md[spy])
        ).table
        if view.round.phase in (table_pb2.ROUND_PHASE_FIRST_DISCARD, table_pb2.ROUND_PHASE_TURNS):
            order = [t.id for t in view.round.my_rack.tiles][::-1]
            await stub.SetRackOrder(
                table_pb2.SetRackOrderRequest(table_id=table_id, tile_ids=order, request_id="r"),
                metadata=md[spy],
            )
            again = (
                await stub.GetTable(table_pb2.GetTableRequest(table_id=table_id), metadata=md[spy])
            ).table
            assert [t.id for t in again.round.my_rack.tiles] == order
        # Both watches have delivered everything committed before the checks below.
        await until_delivered(redis, table_id, lambda: [e.event_id for e in watched])
        await until_delivered(
            redis, table_id, lambda: [e.event_id for m in batches for e in m.events]
        )
    finally:
        for task in watchers:
            task.cancel()
        await asyncio.gather(*watchers, return_exceptions=True)
        await cleanup(redis, table_id)
    assert len(watched) > 50
    # Batched: the same events in the same order, fewer messages, each with its events only.
    in_batches = [e for message in batches for e in message.events]
    assert all(m.events and not m.HasField("event") for m in batches)
    assert max(len(m.events) for m in batches) > 1, "a commit's events travel together"
    shared = min(len(watched), len(in_batches))
    assert shared > 50
    assert in_batches[:shared] == watched[:shared]
    for event in watched:
        as_dict = MessageToDict(event, preserving_proto_field_name=True)
        ids = ids_in(as_dict)
        kind = event.WhichOneof("event")
        assert ids <= allowed, f"event {kind} shows tiles the spy never could know"
        if private_part(event):
            assert event.seat == spy_seat, f"another seat's private {kind}"
    dealt = [e for e in watched if e.WhichOneof("event") == "dealt"]
    assert [private_part(e) for e in dealt] == [e.seat == spy_seat for e in dealt]


async def test_fifty_concurrent_conflicting_or_duplicated_actions_apply_exactly_once(
    stub: table_pb2_grpc.TableServiceStub,
    md: dict[str, Any],
    players: list[str],
    redis: Redis,
    channel: grpc.aio.Channel,
    authority: TokenAuthority,
) -> None:
    table_id = await open_table(stub, md, players)
    try:
        bots = {
            p: BotPlayer(channel, authority.issue_player_token(p, p).token, bytes([n + 3]) * 80)
            for n, p in enumerate(players)
        }
        view = await play_until(
            bots,
            table_id,
            lambda v: v.round.phase == table_pb2.ROUND_PHASE_TURNS and not v.round.turn_drew,
        )
        turn = view.round.turn_seat
        mover = players[turn]
        version, before = await versioned_state(redis, table_id)
        length = await _stream_len(redis, table_id)

        def draw(player: str, rid: str) -> Any:
            return stub.Draw(
                table_pb2.DrawRequest(
                    table_id=table_id, source=table_pb2.DRAW_SOURCE_PILE, request_id=rid
                ),
                metadata=md[player],
            )

        calls = [draw(mover, "same") for _ in range(20)]
        calls += [draw(mover, f"other-{n}") for n in range(15)]
        calls += [draw(players[(turn + 1 + n % 3) % 4], f"x-{n}") for n in range(15)]
        results = await asyncio.gather(*calls, return_exceptions=True)
        ok = [r for r in results if isinstance(r, table_pb2.DrawResponse)]
        errors = [r for r in results if isinstance(r, grpc.aio.AioRpcError)]
        assert len(ok) + len(errors) == 50
        drawn = {r.tile.id for r in ok}
        assert len(drawn) == 1, "every success is the one draw (first answer replayed)"
        assert all(e.code() == grpc.StatusCode.FAILED_PRECONDITION for e in errors)
        assert {error_reason(e) for e in errors} <= {"ALREADY_DREW", "NOT_YOUR_TURN"}
        assert sum(error_reason(e) == "NOT_YOUR_TURN" for e in errors) == 15
        # Exactly one draw applied: one version, one event, one tile moved.
        version_after, after = await versioned_state(redis, table_id)
        assert version_after == version + 1
        assert await _stream_len(redis, table_id) == length + 1
        b = before["game"]["round"]
        a = after["game"]["round"]
        assert len(a["pile"]) == len(b["pile"]) - 1
        assert a["hands"][turn] == [*b["hands"][turn], drawn.pop()]
        assert (
            a["hands"][:turn] + a["hands"][turn + 1 :] == b["hands"][:turn] + b["hands"][turn + 1 :]
        )
        # A retry after the first attempt succeeded (the answer was lost) replays that answer,
        # although the move would now be illegal.
        discard = table_pb2.DiscardRequest(
            table_id=table_id, tile_id=a["hands"][turn][0], request_id="discard-once"
        )
        first = await stub.Discard(discard, metadata=md[mover])
        version_discarded, _ = await versioned_state(redis, table_id)
        retried = await stub.Discard(discard, metadata=md[mover])
        assert retried == first
        assert (await versioned_state(redis, table_id))[0] == version_discarded
    finally:
        await cleanup(redis, table_id)


async def test_a_watcher_resumes_after_its_last_event_and_misses_nothing(
    stub: table_pb2_grpc.TableServiceStub,
    channel: grpc.aio.Channel,
    authority: TokenAuthority,
    md: dict[str, Any],
    players: list[str],
    redis: Redis,
) -> None:
    table_id = await open_table(stub, md, players)
    watcher = players[2]
    try:
        bots = {
            p: BotPlayer(channel, authority.issue_player_token(p, p).token, bytes([n + 5]) * 80)
            for n, p in enumerate(players)
        }
        seen: list[table_pb2.TableEvent] = []
        call = stub.WatchTable(table_pb2.WatchTableRequest(table_id=table_id), metadata=md[watcher])
        async for item in call:
            seen.append(item.event)
            if len(seen) == 12:
                break
        call.cancel()  # the client disconnects
        await play_until(bots, table_id, lambda v: v.round.phase == table_pb2.ROUND_PHASE_TURNS)

        # A dozen more rounds of moves while it is away, and more until the stream holds a
        # private fact of his since he left (a pile draw of his; a discard taken is public).
        async def private_of_his_since_he_left() -> bool:
            entries = await redis.xrange(keys.events(table_id), min=f"({seen[-1].event_id}")
            # A tile of his (a contribution's receipt is private to him too, but no tile).
            return any(
                e.private_seat == 2 and e.type in ("dealt", "drew")
                for e in (decode(fields) for _, fields in entries)
            )

        # Counted in moves made, not in loops: between deals nobody can move for a while.
        moves = 0

        async def enough_played() -> bool:
            nonlocal moves
            if moves >= 12 and await private_of_his_since_he_left():
                return True
            for player in bots.values():
                if await player.play(table_id, await player.view(table_id)) is not None:
                    moves += 1
            return False

        await wait_until(enough_played, timeout=60, interval=0.01, message="his private facts")
        # What the watcher may see of the whole stream, from Redis itself (seat 2's view).
        expected = [
            entry_id.decode()
            for entry_id, fields in await redis.xrange(keys.events(table_id))
            if decode(fields).for_viewer(2) is not None
        ]
        # He resumes asking for batches (the SDK does): the same events, fewer messages.
        resumed: list[table_pb2.TableEvent] = []
        call = stub.WatchTable(
            table_pb2.WatchTableRequest(
                table_id=table_id, after_event_id=seen[-1].event_id, batched=True
            ),
            metadata=md[watcher],
        )
        async with asyncio.timeout(20):
            async for item in call:
                assert item.events
                assert not item.HasField("event")
                resumed.extend(item.events)
                if expected[-1] in (e.event_id for e in item.events):
                    break
        call.cancel()
        ids = [e.event_id for e in seen + resumed]
        assert len(ids) == len(set(ids)), "no event twice"
        assert ids == expected, "every event once, in order, none hidden from him missing"
        private = [e for e in resumed if private_part(e)]
        assert private, "his own private facts (the tiles he drew) come with the resumed events"
    finally:
        await cleanup(redis, table_id)


async def test_bad_input_gets_a_clear_status_and_changes_nothing(
    stub: table_pb2_grpc.TableServiceStub,
    md: dict[str, Any],
    players: list[str],
    redis: Redis,
    settings: Settings,
    channel: grpc.aio.Channel,
    authority: TokenAuthority,
) -> None:
    table_id = await open_table(stub, md, players)
    try:
        bots = {
            p: BotPlayer(channel, authority.issue_player_token(p, p).token, bytes([n + 7]) * 80)
            for n, p in enumerate(players)
        }
        view = await play_until(
            bots,
            table_id,
            lambda v: v.round.phase == table_pb2.ROUND_PHASE_TURNS and not v.round.turn_drew,
        )
        turn = view.round.turn_seat
        mover, idler = players[turn], players[(turn + 1) % 4]
        _, state = await versioned_state(redis, table_id)
        hands = state["game"]["round"]["hands"]
        not_mine = hands[(turn + 1) % 4][0]
        stranger = bearer_metadata(authority.issue_player_token("stranger", "S").token)
        expired = TokenAuthority(
            settings.token_secret.get_secret_value() if settings.token_secret else None,
            token_ttl_seconds=1,
            clock=lambda: 1_000_000.0,
        ).issue_player_token(mover, "M")
        pile = table_pb2.DRAW_SOURCE_PILE
        cases: list[tuple[Any, Any, Any, grpc.StatusCode, str | None]] = [
            (
                stub.GetTable,
                table_pb2.GetTableRequest(table_id="no-such-table"),
                md[mover],
                grpc.StatusCode.NOT_FOUND,
                "TABLE_NOT_FOUND",
            ),
            (
                stub.Draw,
                table_pb2.DrawRequest(table_id="no-such-table", source=pile),
                md[mover],
                grpc.StatusCode.NOT_FOUND,
                "TABLE_NOT_FOUND",
            ),
            (
                stub.Draw,
                table_pb2.DrawRequest(table_id=table_id, source=pile),
                md[idler],
                grpc.StatusCode.FAILED_PRECONDITION,
                "NOT_YOUR_TURN",
            ),
            (
                stub.Discard,
                table_pb2.DiscardRequest(table_id=table_id, tile_id=not_mine),
                md[mover],
                grpc.StatusCode.FAILED_PRECONDITION,
                "MUST_DRAW_FIRST",
            ),
            (
                stub.Draw,
                table_pb2.DrawRequest(table_id=table_id),
                md[mover],
                grpc.StatusCode.INVALID_ARGUMENT,
                "BAD_SOURCE",
            ),
            (
                stub.Discard,
                table_pb2.DiscardRequest(table_id=table_id, tile_id=999),
                md[mover],
                grpc.StatusCode.INVALID_ARGUMENT,
                "MALFORMED_TILE",
            ),
            (
                stub.Draw,
                table_pb2.DrawRequest(table_id=table_id, source=pile),
                stranger,
                grpc.StatusCode.PERMISSION_DENIED,
                "NOT_SEATED",
            ),
            (
                stub.PressLastRound,
                table_pb2.PressLastRoundRequest(table_id=table_id),
                md[idler],
                grpc.StatusCode.PERMISSION_DENIED,
                "NOT_CREATOR",
            ),
            (
                stub.Draw,
                table_pb2.DrawRequest(table_id=table_id, source=pile),
                bearer_metadata(expired.token),
                grpc.StatusCode.UNAUTHENTICATED,
                "TOKEN_EXPIRED",
            ),
            (
                stub.Draw,
                table_pb2.DrawRequest(table_id=table_id, source=pile),
                (),
                grpc.StatusCode.UNAUTHENTICATED,
                "TOKEN_MISSING",
            ),
            (
                stub.GetTable,
                table_pb2.GetTableRequest(table_id=""),
                md[mover],
                grpc.StatusCode.INVALID_ARGUMENT,
                "BAD_TABLE_ID",
            ),
            (
                stub.JoinTable,
                table_pb2.JoinTableRequest(table_id=table_id),
                stranger,
                grpc.StatusCode.FAILED_PRECONDITION,
                "GAME_STARTED",
            ),
        ]
        await _refused_without_change(redis, table_id, cases)

        # After drawing: a tile not in hand, a malformed arrangement, a hand that does not win.
        await stub.Draw(
            table_pb2.DrawRequest(table_id=table_id, source=pile, request_id="d"),
            metadata=md[mover],
        )
        _, state = await versioned_state(redis, table_id)
        mine = state["game"]["round"]["hands"][turn]
        cases = [
            (
                stub.Discard,
                table_pb2.DiscardRequest(table_id=table_id, tile_id=not_mine),
                md[mover],
                grpc.StatusCode.FAILED_PRECONDITION,
                "TILE_NOT_IN_HAND",
            ),
            (
                stub.Win,
                table_pb2.WinRequest(
                    table_id=table_id,
                    discard_tile_id=mine[0],
                    arrangement=[table_pb2.ProposedGroup(tile_ids=[1000, 2])],
                ),
                md[mover],
                grpc.StatusCode.INVALID_ARGUMENT,
                "MALFORMED_TILE",
            ),
            (
                stub.SetRackOrder,
                table_pb2.SetRackOrderRequest(table_id=table_id, tile_ids=mine[:-1]),
                md[mover],
                grpc.StatusCode.INVALID_ARGUMENT,
                "BAD_RACK_ORDER",
            ),
            (
                stub.WatchTable,
                table_pb2.WatchTableRequest(table_id=table_id, after_event_id="x"),
                md[mover],
                grpc.StatusCode.INVALID_ARGUMENT,
                "BAD_EVENT_ID",
            ),
        ]
        if not _wins(state, turn):
            cases.append(
                (
                    stub.Win,
                    table_pb2.WinRequest(
                        table_id=table_id,
                        discard_tile_id=mine[0],
                        arrangement=[table_pb2.ProposedGroup(tile_ids=mine[1:])],
                    ),
                    md[mover],
                    grpc.StatusCode.FAILED_PRECONDITION,
                    "NOT_A_WINNING_HAND",
                )
            )
        await _refused_without_change(redis, table_id, cases)
    finally:
        await cleanup(redis, table_id)


def _wins(state: dict[str, Any], seat: int) -> bool:
    from games.kishpa.solver import winning_discards
    from games.kishpa.tiles import face_of

    round_state = rnd.RoundState.from_dict(state["game"]["round"])
    faces = [face_of(t) for t in round_state.hands[seat]]
    return any(w.position == 0 for w in winning_discards(faces, round_state.kishpa))


async def _outcome(call: Any) -> tuple[Any, grpc.aio.AioRpcError | None]:
    """The response of a unary call, or the error it ended with."""
    try:
        return await call, None
    except grpc.aio.AioRpcError as error:
        return None, error


async def _complete(result: Any) -> None:
    """Await a unary call, or read a streaming one to its end."""
    if isinstance(result, grpc.aio.UnaryStreamCall):
        async for _ in result:
            pass
    else:
        await result


async def _refused_without_change(
    redis: Redis,
    table_id: str,
    cases: list[tuple[Any, Any, Any, grpc.StatusCode, str | None]],
) -> None:
    for call, request, metadata, code, reason in cases:
        version, state = await versioned_state(redis, table_id)
        length = await _stream_len(redis, table_id)
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await _complete(call(request, metadata=metadata))
        err = refused.value
        assert err.code() == code, (request, err.details())
        assert err.details(), "a clear message"
        if reason is not None:
            assert error_reason(err) == reason, (request, err.details())
        assert await versioned_state(redis, table_id) == (version, state), "bad input changed state"
        assert await _stream_len(redis, table_id) == length


async def test_timers_play_late_turns_and_put_an_absent_seat_on_autoplay(
    stub: table_pb2_grpc.TableServiceStub,
    md: dict[str, Any],
    players: list[str],
    redis: Redis,
) -> None:
    pair = players[:2]
    table_id = await open_table(stub, md, pair, turn_seconds=1, window_seconds=1)
    try:
        for _ in range(150):  # nobody plays: the deadline loop plays every turn
            types = [f[b"type"] for _, f in await redis.xrange(keys.events(table_id))]
            if b"autoplay_on" in types:
                break
            await asyncio.sleep(0.1)
        events = [
            (f[b"type"].decode(), int(f[b"seat"]), json.loads(f[b"data"]))
            for _, f in await redis.xrange(keys.events(table_id))
        ]
        timed_out = [(seat, data["in_a_row"]) for t, seat, data in events if t == "turn_timed_out"]
        autoplay = [seat for t, seat, _ in events if t == "autoplay_on"]
        assert autoplay, f"three missed turns in a row put the seat on auto-play: {events}"
        first = autoplay[0]
        assert [n for s, n in timed_out if s == first][:3] == [1, 2, 3]
        _, state = await versioned_state(redis, table_id)
        assert first in state["autoplay"]
        # Its player comes back: acting takes the seat off auto-play.
        me = pair[first]
        tries: list[str] = []
        for n in range(100):
            view = (
                await stub.GetTable(table_pb2.GetTableRequest(table_id=table_id), metadata=md[me])
            ).table
            if table_pb2.PLAYER_ACTION_DRAW_PILE in view.available_actions:
                draw = table_pb2.DrawRequest(
                    table_id=table_id, source=table_pb2.DRAW_SOURCE_PILE, request_id=f"back-{n}"
                )
                _, error = await _outcome(stub.Draw(draw, metadata=md[me]))
                tries.append("drew" if error is None else str(error_reason(error)))
                if error is None:
                    break
            await asyncio.sleep(0.05)  # the timer played the turn first: try again
        _, state = await versioned_state(redis, table_id)
        assert first not in state["autoplay"], (tries, state["autoplay"], state["timeouts"])
        assert str(first) not in state["timeouts"]
    finally:
        await cleanup(redis, table_id)


async def test_a_service_seats_a_whole_table_that_starts_when_full(
    stub: table_pb2_grpc.TableServiceStub,
    authority: TokenAuthority,
    md: dict[str, Any],
    players: list[str],
    redis: Redis,
) -> None:
    service = bearer_metadata(authority.issue_service_token("matchmaking").token)
    request = table_pb2.CreateTableRequest(
        settings=table_pb2.TableSettings(
            game=common_pb2.GAME_KISHPA,
            seats=3,
            kishpa=table_pb2.KishpaOptions(allow_high_wrap=True),
        ),
        players=[
            table_pb2.SeatedPlayer(player_id=players[0], display_name="Ann", client_seed="a-seed"),
            table_pb2.SeatedPlayer(player_id=players[1], display_name="Bob"),
        ],
        auto_start=True,
        request_id=uuid.uuid4().hex,
    )
    created = await stub.CreateTable(request, metadata=service)
    table_id = created.table.table_id
    try:
        replayed = await stub.CreateTable(request, metadata=service)
        assert replayed.table.table_id == table_id, "a retried create finds its table"
        assert replayed.table.version == created.table.version
        assert created.table.settings.kishpa.allow_high_wrap
        _, state = await versioned_state(redis, table_id)
        assert state["settings"]["options"] == {"allow_high_wrap": True}
        assert created.table.status == table_pb2.TABLE_STATUS_WAITING
        assert created.table.creator_player_id == players[0]
        assert not created.table.HasField("my_seat"), "the service sits nowhere, sees no hand"
        joined = await stub.JoinTable(
            table_pb2.JoinTableRequest(
                table_id=table_id,
                player_id=players[2],
                display_name="Cat",
                client_seed="c-seed",
                request_id=uuid.uuid4().hex,
            ),
            metadata=service,
        )
        # Names and client seeds a service gives reach the seats and the shuffle.
        assert [s.display_name for s in joined.table.seats] == ["Ann", "Bob", "Cat"]
        assert list(joined.table.round.client_seeds) == ["a-seed", "", "c-seed"]
        assert joined.table.status == table_pb2.TABLE_STATUS_PLAYING
        assert joined.table.round.round == 1
        assert not joined.table.round.my_rack.tiles
        mine = await stub.GetTable(
            table_pb2.GetTableRequest(table_id=table_id), metadata=md[players[2]]
        )
        assert mine.table.my_seat == 2
        assert len(mine.table.round.my_rack.tiles) in (14, 15)
        # Matchmaking reads a table through GetTable with its credential: a spectator's view.
        read = await stub.GetTable(table_pb2.GetTableRequest(table_id=table_id), metadata=service)
        assert not read.table.HasField("my_seat")
        assert [s.player_id for s in read.table.seats] == players[:3]
        assert read.table.status == table_pb2.TABLE_STATUS_PLAYING
        assert not read.table.round.my_rack.tiles, "a service never sees a hand"
        kishpa = read.table.round.kishpa
        public = {t.id for t in read.table.round.discards}
        public |= {kishpa.kishpa.id, kishpa.replaced_kishpa.id}
        assert ids_in(MessageToDict(read.table.round)) <= public
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await stub.CreateTable(
                table_pb2.CreateTableRequest(
                    settings=table_pb2.TableSettings(game=common_pb2.GAME_KISHPA),
                    players=[table_pb2.SeatedPlayer(player_id=p) for p in players[:2]],
                ),
                metadata=md[players[0]],
            )
        assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED
    finally:
        await cleanup(redis, table_id)


async def test_a_table_that_never_starts_expires_and_a_started_one_is_kept(
    stub: table_pb2_grpc.TableServiceStub,
    md: dict[str, Any],
    players: list[str],
    redis: Redis,
) -> None:
    table_id = await open_table(stub, md, players, start=False)
    try:
        assert 0 < await redis.ttl(keys.state(table_id)) <= 24 * 3600
        await stub.StartGame(
            table_pb2.StartGameRequest(table_id=table_id, request_id=uuid.uuid4().hex),
            metadata=md[players[0]],
        )
        assert await redis.ttl(keys.state(table_id)) == -1
    finally:
        await cleanup(redis, table_id)


async def test_watching_from_the_answer_of_the_join_that_dealt_delivers_the_joiners_hand(
    stub: table_pb2_grpc.TableServiceStub,
    authority: TokenAuthority,
    md: dict[str, Any],
    players: list[str],
    redis: Redis,
) -> None:
    """A mutation's view points just before its own events: the client that watches from
    its JoinTable answer (the join that filled an auto-start table and dealt round 1) gets
    its own `dealt`, hand included, and nothing of the other seat's hand."""
    service = bearer_metadata(authority.issue_service_token("matchmaking").token)
    created = await stub.CreateTable(
        table_pb2.CreateTableRequest(
            settings=table_pb2.TableSettings(game=common_pb2.GAME_KISHPA, seats=2),
            players=[table_pb2.SeatedPlayer(player_id=players[0])],
            auto_start=True,
            request_id=uuid.uuid4().hex,
        ),
        metadata=service,
    )
    table_id = created.table.table_id
    joiner = players[1]
    try:
        joined = await stub.JoinTable(
            table_pb2.JoinTableRequest(table_id=table_id, request_id=uuid.uuid4().hex),
            metadata=md[joiner],
        )
        view = joined.table
        assert view.round.round == 1
        assert view.my_seat == 1
        call = stub.WatchTable(
            table_pb2.WatchTableRequest(table_id=table_id, after_event_id=view.last_event_id),
            metadata=md[joiner],
        )
        kinds: list[str] = []
        dealt: list[table_pb2.TableEvent] = []
        async with asyncio.timeout(20):
            async for item in call:
                kind = item.event.WhichOneof("event")
                kinds.append(str(kind))
                if kind == "dealt":
                    dealt.append(item.event)
                if kind == "turn_started" or kind == "reveal_window_opened":
                    break
        call.cancel()
        assert kinds[0] == "player_joined", "the stream starts with the join itself"
        assert "round_started" in kinds
        assert [e.seat for e in dealt] == [0, 1]
        mine = sorted(t.id for t in dealt[1].dealt.tiles)
        assert mine == sorted(t.id for t in view.round.my_rack.tiles)
        assert not dealt[0].dealt.tiles
        assert dealt[0].dealt.tile_count in (14, 15)
        # A GetTable view's id is the last event it includes: nothing of it comes again.
        again = (
            await stub.GetTable(table_pb2.GetTableRequest(table_id=table_id), metadata=md[joiner])
        ).table
        last = await redis.xrevrange(keys.events(table_id), count=1)
        assert again.last_event_id == last[0][0].decode()
    finally:
        await cleanup(redis, table_id)
