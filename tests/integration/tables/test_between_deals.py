"""The pause between deals and leaving a table where only bots remain (issue 33), on a real
grpc.aio table server with its deadline loop over real Redis, for both games.

* After a deal (Kishpa: a round) ends, no turn clock runs: the table waits for every human
  seat to say ``Ready`` or for its pause to pass; the deal's summary does not change while
  it waits; the next deal is dealt by the last ``Ready``, or when the pause has passed.
* When the last human leaves and only the server plays the table, it ends with the round in
  progress (Hand: at once between deals), as docs/rules say.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import grpc
import pytest
from redis.asyncio import Redis

from cli.play.bot import BotPlayer
from cli.play.games import HAND, KISHPA, GameAdapter
from kishpa.common.v1 import common_pb2
from kishpa.table.v1 import table_pb2, table_pb2_grpc
from services.common.auth import TokenAuthority
from services.common.errors import error_reason
from shared import keys, stream
from tests.integration.tables.conftest import cleanup, versioned_state
from tests.support.first_deal import contribute_and_wait_for_deal
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration

WAIT_S = 90.0
"""The longest any condition here is waited for (a whole deal played by bots)."""
ENDED = table_pb2.ROUND_PHASE_ENDED
CLOSED = table_pb2.TABLE_STATUS_CLOSED
GAMES = {"kishpa": (common_pb2.GAME_KISHPA, KISHPA), "hand": (common_pb2.GAME_HAND, HAND)}


def _rid() -> str:
    return uuid.uuid4().hex


async def _open(
    stub: table_pb2_grpc.TableServiceStub,
    md: dict[str, Any],
    humans: list[str],
    game: int,
    *,
    bots: int = 0,
    pause_ms: int = 60_000,
) -> str:
    """A started table: ``humans`` seated in order, then ``bots`` house bots (instant)."""
    settings = table_pb2.TableSettings(
        game=game, seats=len(humans) + bots, stake=1, bots=bots, bot_level=0
    )
    settings.turn_time.FromSeconds(60)
    settings.next_round_pause.FromMilliseconds(pause_ms)
    settings.bot_pause.FromMilliseconds(0)
    created = await stub.CreateTable(
        table_pb2.CreateTableRequest(settings=settings, request_id=_rid()), metadata=md[humans[0]]
    )
    table_id = created.table.table_id
    for player in humans[1:]:
        await stub.JoinTable(
            table_pb2.JoinTableRequest(table_id=table_id, request_id=_rid()), metadata=md[player]
        )
    await stub.StartGame(
        table_pb2.StartGameRequest(table_id=table_id, request_id=_rid()), metadata=md[humans[0]]
    )
    if len(humans) == 1 and bots:
        await contribute_and_wait_for_deal(stub, md[humans[0]], table_id)
    return table_id


def _players(
    channel: grpc.aio.Channel, authority: TokenAuthority, humans: list[str], adapter: GameAdapter
) -> dict[str, BotPlayer]:
    """A client bot for each human seat (the house bots are played by the server)."""
    return {
        p: BotPlayer(
            channel, authority.issue_player_token(p, p).token, bytes([n + 1]) * 80, adapter
        )
        for n, p in enumerate(humans)
    }


async def _play_until_deal_ends(
    players: dict[str, BotPlayer], table_id: str, deal: int
) -> table_pb2.TableView:
    """The human seats play (the server plays the bots) until ``deal`` has ended."""

    async def step() -> table_pb2.TableView | None:
        for bot in players.values():
            view = await bot.view(table_id)
            if view.round.round == deal and view.round.phase == ENDED:
                return view
            if view.status == CLOSED:
                raise AssertionError("the table closed before the deal ended")
            await bot.play(table_id, view)
        return None

    return await wait_until(step, timeout=WAIT_S, message=f"deal {deal} to end")  # type: ignore[no-any-return]


async def _ready(
    stub: table_pb2_grpc.TableServiceStub, md: dict[str, Any], player: str, table_id: str, deal: int
) -> table_pb2.TableView:
    answer = await stub.Ready(
        table_pb2.ReadyRequest(table_id=table_id, round=deal, request_id=_rid()),
        metadata=md[player],
    )
    return answer.table


@pytest.mark.parametrize("game", ["kishpa", "hand"])
async def test_the_next_deal_waits_for_every_human_and_the_summary_stays(
    stub: table_pb2_grpc.TableServiceStub,
    channel: grpc.aio.Channel,
    authority: TokenAuthority,
    md: dict[str, Any],
    players: list[str],
    redis: Redis,
    game: str,
) -> None:
    game_enum, adapter = GAMES[game]
    humans = players[:2]
    table_id = await _open(stub, md, humans, game_enum, bots=1)
    try:
        started = time.time()
        await _play_until_deal_ends(_players(channel, authority, humans, adapter), table_id, 1)
        ended = (
            await stub.GetTable(
                table_pb2.GetTableRequest(table_id=table_id), metadata=md[humans[0]]
            )
        ).table
        # Between deals: no turn clock, nobody to act, the pause's end announced.
        assert ended.status == table_pb2.TABLE_STATUS_PLAYING
        assert not ended.round.HasField("deadline"), "no turn clock before the next deal"
        assert not ended.round.HasField("turn_seat")
        assert list(ended.ready_seats) == []
        assert table_pb2.PLAYER_ACTION_READY in ended.available_actions
        next_deal_ms = ended.next_deal_time.ToMilliseconds()
        assert started * 1000 + 60_000 <= next_deal_ms <= time.time() * 1000 + 60_000
        _, state = await versioned_state(redis, table_id)
        assert state["deadline"]["kind"] == "next_round"
        assert state["deadline"]["at_ms"] == next_deal_ms
        # The event announcing the pause carries its end (what a watching client counts down).
        announced = [
            e.data
            for e in (stream.decode(f) for _, f in await redis.xrange(keys.events(table_id)))
            if e.type == "deadline" and e.data["kind"] == "next_round"
        ]
        assert announced[-1]["at_ms"] == next_deal_ms

        # One human ready: the bots are always ready, the other human is awaited.
        first = await _ready(stub, md, humans[0], table_id, 1)
        assert list(first.ready_seats) == [0]
        assert first.version > ended.version
        assert first.round == ended.round, "the summary of deal 1 does not change"
        assert table_pb2.PLAYER_ACTION_READY not in first.available_actions
        again = await _ready(stub, md, humans[0], table_id, 1)
        assert (again.ready_seats, again.round) == (first.ready_seats, first.round), "no news"
        other = await stub.GetTable(
            table_pb2.GetTableRequest(table_id=table_id), metadata=md[humans[1]]
        )
        assert table_pb2.PLAYER_ACTION_READY in other.table.available_actions

        # The last human ready: the next deal is dealt by that very call, its clock running.
        dealt = await _ready(stub, md, humans[1], table_id, 1)
        assert dealt.round.round == 2
        assert dealt.round.phase != ENDED
        assert not dealt.HasField("next_deal_time")
        assert list(dealt.ready_seats) == []
        _, state = await versioned_state(redis, table_id)
        assert state["deadline"]["kind"] in ("turn", "window")

        # A late Ready for deal 1 changes nothing; one for the deal being played is refused.
        late = await _ready(stub, md, humans[0], table_id, 1)
        assert late.round.round == 2
        with pytest.raises(grpc.aio.AioRpcError) as playing:
            await _ready(stub, md, humans[0], table_id, 2)
        assert playing.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert error_reason(playing.value) == "NOT_BETWEEN_DEALS"
        with pytest.raises(grpc.aio.AioRpcError) as ahead:
            await _ready(stub, md, humans[0], table_id, 3)
        assert ahead.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert error_reason(ahead.value) == "BAD_ROUND"
        with pytest.raises(grpc.aio.AioRpcError) as stranger:
            await _ready(stub, md, players[3], table_id, 1)
        assert stranger.value.code() == grpc.StatusCode.PERMISSION_DENIED
    finally:
        await cleanup(redis, table_id)


@pytest.mark.parametrize("game", ["kishpa", "hand"])
async def test_without_ready_the_next_deal_comes_when_the_pause_has_passed(
    stub: table_pb2_grpc.TableServiceStub,
    channel: grpc.aio.Channel,
    authority: TokenAuthority,
    md: dict[str, Any],
    players: list[str],
    redis: Redis,
    game: str,
) -> None:
    game_enum, adapter = GAMES[game]
    humans = players[:1]
    table_id = await _open(stub, md, humans, game_enum, bots=1, pause_ms=1500)
    try:
        ended = await _play_until_deal_ends(
            _players(channel, authority, humans, adapter), table_id, 1
        )
        pause_end_ms = ended.next_deal_time.ToMilliseconds()

        async def dealt() -> table_pb2.TableView | None:
            answer = await stub.GetTable(
                table_pb2.GetTableRequest(table_id=table_id), metadata=md[humans[0]]
            )
            return answer.table if answer.table.round.round == 2 else None

        second = await wait_until(dealt, timeout=WAIT_S, message="the pause to pass")
        assert time.time() * 1000 >= pause_end_ms, "not dealt before the pause passed"
        assert second.round.HasField("deadline") or second.round.phase != ENDED
    finally:
        await cleanup(redis, table_id)


@pytest.mark.slow  # the server plays the round out at the bots' pace
@pytest.mark.parametrize("game", ["kishpa", "hand"])
async def test_the_last_human_leaving_ends_the_table_with_the_round_in_progress(
    stub: table_pb2_grpc.TableServiceStub,
    md: dict[str, Any],
    players: list[str],
    redis: Redis,
    game: str,
) -> None:
    game_enum, _ = GAMES[game]
    ann = players[0]
    table_id = await _open(stub, md, [ann], game_enum, bots=2)
    try:
        left = await stub.LeaveTable(
            table_pb2.LeaveTableRequest(table_id=table_id, request_id=_rid()), metadata=md[ann]
        )
        assert left.table.round.round == 1
        assert left.table.last_round_pressed or game == "hand"

        async def closed() -> table_pb2.TableView | None:
            answer = await stub.GetTable(
                table_pb2.GetTableRequest(table_id=table_id), metadata=md[ann]
            )
            return answer.table if answer.table.status == CLOSED else None

        final = await wait_until(closed, timeout=WAIT_S, message="the table to close")
        assert final.round.round == 1, "no round is dealt after the last human left"
        _, state = await versioned_state(redis, table_id)
        if game == "hand":
            assert state["game"]["game"]["ends_after"] == 1
            assert len(final.round.hand.payouts) == 3
            assert sum(final.round.hand.payouts) == 3, "the whole pot (3 seats at stake 1)"
        else:
            assert state["game"]["round"]["last_round"] is True
    finally:
        await cleanup(redis, table_id)


async def test_a_hand_table_left_between_deals_ends_at_once(
    stub: table_pb2_grpc.TableServiceStub,
    channel: grpc.aio.Channel,
    authority: TokenAuthority,
    md: dict[str, Any],
    players: list[str],
    redis: Redis,
) -> None:
    ann = players[0]
    table_id = await _open(stub, md, [ann], common_pb2.GAME_HAND, bots=1)
    try:
        await _play_until_deal_ends(_players(channel, authority, [ann], HAND), table_id, 1)
        left = await stub.LeaveTable(
            table_pb2.LeaveTableRequest(table_id=table_id, request_id=_rid()), metadata=md[ann]
        )
        assert left.table.status == CLOSED, "nothing is left to play: the game ends now"
        assert left.table.round.round == 1
        hand = left.table.round.hand
        assert hand.deals_per_game == 1, "the game had one deal"
        assert sum(hand.payouts) == 2, "the whole pot (2 seats at stake 1)"
        _, state = await versioned_state(redis, table_id)
        assert state["deadline"] is None
    finally:
        await cleanup(redis, table_id)


async def _closed_hand_table(
    stub: table_pb2_grpc.TableServiceStub,
    channel: grpc.aio.Channel,
    authority: TokenAuthority,
    md: dict[str, Any],
    humans: list[str],
    pause_ms: int,
) -> str:
    """A Hand table (the humans and one bot) whose game is over: one deal played, then
    every human left (the game ends at once between deals)."""
    table_id = await _open(stub, md, humans, common_pb2.GAME_HAND, bots=1, pause_ms=pause_ms)
    await _play_until_deal_ends(_players(channel, authority, humans, HAND), table_id, 1)
    for player in humans:
        left = await stub.LeaveTable(
            table_pb2.LeaveTableRequest(table_id=table_id, request_id=_rid()), metadata=md[player]
        )
    assert left.table.status == CLOSED
    return table_id


async def _play_again(
    stub: table_pb2_grpc.TableServiceStub, md: dict[str, Any], player: str, table_id: str
) -> table_pb2.TableView:
    answer = await stub.PlayAgain(
        table_pb2.PlayAgainRequest(table_id=table_id, request_id=_rid()), metadata=md[player]
    )
    return answer.table


async def test_play_again_seats_the_same_players_bots_and_stake(
    stub: table_pb2_grpc.TableServiceStub,
    channel: grpc.aio.Channel,
    authority: TokenAuthority,
    md: dict[str, Any],
    players: list[str],
    redis: Redis,
) -> None:
    ann, bob = players[:2]
    old = await _closed_hand_table(stub, channel, authority, md, [ann, bob], 60_000)
    new_id = ""
    try:
        first = await _play_again(stub, md, ann, old)
        new_id = first.table_id
        assert new_id != old
        assert first.status == table_pb2.TABLE_STATUS_WAITING
        assert first.rematch_of == old
        assert [s.player_id for s in first.seats] == [ann, "", ""]
        assert first.start_time.ToMilliseconds() > time.time() * 1000 + 50_000
        assert table_pb2.PLAYER_ACTION_START_GAME not in first.available_actions
        with pytest.raises(grpc.aio.AioRpcError) as early:
            await stub.StartGame(
                table_pb2.StartGameRequest(table_id=new_id, request_id=_rid()), metadata=md[ann]
            )
        assert early.value.code() == grpc.StatusCode.PERMISSION_DENIED, "it starts by itself"
        again = await _play_again(stub, md, ann, old)
        assert again.table_id == new_id, "every acceptance finds the same table"
        assert [s.player_id for s in again.seats] == [ann, "", ""]
        with pytest.raises(grpc.aio.AioRpcError) as stranger:
            await stub.JoinTable(
                table_pb2.JoinTableRequest(table_id=new_id, request_id=_rid()),
                metadata=md[players[2]],
            )
        assert stranger.value.code() == grpc.StatusCode.PERMISSION_DENIED
        with pytest.raises(grpc.aio.AioRpcError) as outsider:
            await _play_again(stub, md, players[2], old)
        assert outsider.value.code() == grpc.StatusCode.PERMISSION_DENIED
        # Bob accepts last: the bot sits down and the first deal is dealt at once.
        started = await _play_again(stub, md, bob, old)
        assert started.table_id == new_id
        assert started.status == table_pb2.TABLE_STATUS_PLAYING
        assert started.round.round == 1
        assert [s.player_id for s in started.seats[:2]] == [ann, bob]
        assert [s.bot for s in started.seats] == [False, False, True]
        assert started.settings.stake == 1
        assert started.settings.game == common_pb2.GAME_HAND
    finally:
        await cleanup(redis, old)
        if new_id:
            await cleanup(redis, new_id)


async def test_play_again_without_the_others_gives_their_seats_to_bots(
    stub: table_pb2_grpc.TableServiceStub,
    channel: grpc.aio.Channel,
    authority: TokenAuthority,
    md: dict[str, Any],
    players: list[str],
    redis: Redis,
) -> None:
    ann, bob = players[:2]
    old = await _closed_hand_table(stub, channel, authority, md, [ann, bob], 1500)
    new_id = ""
    try:
        live = await _open(stub, md, [players[2]], common_pb2.GAME_HAND, bots=1)
        with pytest.raises(grpc.aio.AioRpcError) as playing:
            await _play_again(stub, md, players[2], live)
        await cleanup(redis, live)
        assert playing.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert error_reason(playing.value) == "GAME_NOT_OVER"
        first = await _play_again(stub, md, ann, old)
        new_id = first.table_id

        async def started() -> table_pb2.TableView | None:
            answer = await stub.GetTable(
                table_pb2.GetTableRequest(table_id=new_id), metadata=md[ann]
            )
            return answer.table if answer.table.status == table_pb2.TABLE_STATUS_PLAYING else None

        view = await wait_until(
            started, timeout=WAIT_S, message="the pause to pass and the game to start"
        )
        assert time.time() * 1000 >= first.start_time.ToMilliseconds()
        assert view.seats[0].player_id == ann
        assert [s.bot for s in view.seats] == [False, True, True], "a bot in Bob's seat"
        assert bob not in [s.player_id for s in view.seats]
    finally:
        await cleanup(redis, old)
        if new_id:
            await cleanup(redis, new_id)
