"""Who may watch a table (TableSettings.watch_policy), and that a spectator sees no rack.

A real table service on Redis; bots play while a spectator follows. The spectator check is
the spy check of test_table_service.py with no seat: every id a spectator receives must be
public (discards, kishpas, a winning hand) according to the hidden state read from Redis.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import grpc
import pytest
from google.protobuf.json_format import MessageToDict
from redis.asyncio import Redis

from cli.play.bot import BotPlayer
from games.kishpa import round as rnd
from kishpa.common.v1 import common_pb2
from kishpa.table.v1 import table_pb2, table_pb2_grpc
from sdk import table_settings
from services.common.auth import TokenAuthority
from services.common.errors import error_reason
from tests.integration.stream_wait import until_delivered
from tests.integration.tables.conftest import cleanup, ids_in, private_part, versioned_state
from tests.support.table_play import play_until

pytestmark = pytest.mark.integration


def _settings(
    seats: int, policy: table_pb2.WatchPolicy.ValueType, invited: list[str]
) -> table_pb2.TableSettings:
    settings = table_settings(
        common_pb2.GAME_KISHPA,
        seats,
        turn_seconds=60,
        reveal_window_seconds=30,
        next_round_pause_ms=30,
    )
    settings.watch_policy = policy
    settings.invited_watchers.extend(invited)
    return settings


async def _table(
    stub: table_pb2_grpc.TableServiceStub,
    md: dict[str, Any],
    seated: list[str],
    policy: table_pb2.WatchPolicy.ValueType,
    invited: list[str] | None = None,
) -> str:
    created = await stub.CreateTable(
        table_pb2.CreateTableRequest(
            settings=_settings(len(seated), policy, invited or []),
            request_id=uuid.uuid4().hex,
        ),
        metadata=md[seated[0]],
    )
    table_id = created.table.table_id
    for p in seated[1:]:
        await stub.JoinTable(
            table_pb2.JoinTableRequest(table_id=table_id, request_id=uuid.uuid4().hex),
            metadata=md[p],
        )
    await stub.StartGame(
        table_pb2.StartGameRequest(table_id=table_id, request_id=uuid.uuid4().hex),
        metadata=md[seated[0]],
    )
    return table_id


def _refusal(exc: grpc.aio.AioRpcError) -> str | None:
    if exc.code() != grpc.StatusCode.PERMISSION_DENIED:
        return f"unexpected {exc.code().name}"
    return error_reason(exc)


async def _may_watch(
    stub: table_pb2_grpc.TableServiceStub, md: Any, table_id: str
) -> tuple[bool, str | None]:
    """Whether GetTable and WatchTable both let this caller in (they must agree)."""
    outcomes = []
    try:
        await stub.GetTable(table_pb2.GetTableRequest(table_id=table_id), metadata=md)
        outcomes.append((True, None))
    except grpc.aio.AioRpcError as exc:
        outcomes.append((False, _refusal(exc)))
    call = stub.WatchTable(table_pb2.WatchTableRequest(table_id=table_id), metadata=md)
    try:
        await asyncio.wait_for(call.read(), timeout=30)
        outcomes.append((True, None))
    except grpc.aio.AioRpcError as exc:
        outcomes.append((False, _refusal(exc)))
    finally:
        call.cancel()
    assert outcomes[0] == outcomes[1]
    return outcomes[0]


async def test_players_only_and_invitee_tables_refuse_other_watchers(
    stub: table_pb2_grpc.TableServiceStub, md: dict[str, Any], players: list[str], redis: Redis
) -> None:
    seated, guest, stranger = players[:2], players[2], players[3]
    private = await _table(stub, md, seated, table_pb2.WATCH_POLICY_PLAYERS)
    invitees = await _table(stub, md, seated, table_pb2.WATCH_POLICY_INVITEES, [guest])
    try:
        refused = (False, "NOT_ALLOWED_TO_WATCH")
        assert await _may_watch(stub, md[guest], private) == refused
        assert await _may_watch(stub, md[stranger], private) == refused
        assert await _may_watch(stub, md[seated[1]], private) == (True, None)
        assert await _may_watch(stub, md[guest], invitees) == (True, None)
        assert await _may_watch(stub, md[stranger], invitees) == refused
        view = (
            await stub.GetTable(table_pb2.GetTableRequest(table_id=invitees), metadata=md[guest])
        ).table
        assert view.settings.watch_policy == table_pb2.WATCH_POLICY_INVITEES
        assert list(view.settings.invited_watchers) == [guest]
        with pytest.raises(grpc.aio.AioRpcError) as bad:
            await _table(stub, md, seated, table_pb2.WATCH_POLICY_PLAYERS, [guest])
        assert bad.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert error_reason(bad.value) == "BAD_WATCHERS"
    finally:
        await cleanup(redis, private)
        await cleanup(redis, invitees)


async def test_an_allowed_spectator_never_sees_a_rack_or_the_pile(
    stub: table_pb2_grpc.TableServiceStub,
    channel: grpc.aio.Channel,
    authority: TokenAuthority,
    md: dict[str, Any],
    players: list[str],
    redis: Redis,
) -> None:
    seated, spectator = players[:3], players[3]
    table_id = await _table(stub, md, seated, table_pb2.WATCH_POLICY_UNSPECIFIED)
    watched: list[table_pb2.TableEvent] = []
    allowed: set[int] = set()

    async def watch() -> None:
        call = stub.WatchTable(
            table_pb2.WatchTableRequest(table_id=table_id), metadata=md[spectator]
        )
        async for item in call:
            watched.append(item.event)

    async def check_now(*_: Any) -> None:
        # The view and the hidden state it is checked against must be of one version: a
        # turn timer may move the table between the two reads (a tile discarded in between
        # would look leaked), so read both again until they agree.
        for _attempt in range(50):
            view = (
                await stub.GetTable(
                    table_pb2.GetTableRequest(table_id=table_id), metadata=md[spectator]
                )
            ).table
            version, state = await versioned_state(redis, table_id)
            if version == view.version:
                break
        else:
            raise AssertionError("the table never held still for one GetTable")
        round_state = rnd.RoundState.from_dict(state["game"]["round"])
        public = set(round_state.discards) | set(round_state.kishpa_tiles)
        public |= set(round_state.dolls_returned)  # announced by face (one copy each)
        public |= {t for g in round_state.winning_groups for t in g}
        if round_state.final_discard is not None:
            public.add(round_state.final_discard)
        allowed.update(public)
        hidden = {t for h in round_state.hands for t in h} | set(round_state.pile)
        assert view.settings.watch_policy == table_pb2.WATCH_POLICY_ANYONE
        assert not view.HasField("my_seat")
        assert not view.round.my_rack.tiles
        leaked = ids_in(MessageToDict(view, preserving_proto_field_name=True)) & (hidden - public)
        assert not leaked, f"the spectator's view shows hidden tiles {leaked}"
        with pytest.raises(grpc.aio.AioRpcError) as no_hint:
            await stub.GetHint(table_pb2.GetHintRequest(table_id=table_id), metadata=md[spectator])
        assert no_hint.value.code() == grpc.StatusCode.PERMISSION_DENIED

    watcher = asyncio.create_task(watch())
    try:
        bots = {
            p: BotPlayer(channel, authority.issue_player_token(p, p).token, bytes([n + 3]) * 80)
            for n, p in enumerate(seated)
        }
        await check_now()
        await play_until(bots, table_id, lambda v: v.round.round >= 2, after_each=check_now)
        await check_now()
        await until_delivered(redis, table_id, lambda: [e.event_id for e in watched])
    finally:
        watcher.cancel()
        await asyncio.gather(watcher, return_exceptions=True)
        await cleanup(redis, table_id)
    assert len(watched) > 20
    for event in watched:
        kind = event.WhichOneof("event")
        assert not private_part(event), f"a spectator got private {kind}"
        ids = ids_in(MessageToDict(event, preserving_proto_field_name=True))
        assert ids <= allowed, f"event {kind} shows tiles a spectator never could know"
