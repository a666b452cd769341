"""Hand (Rummy 51) tables through a real grpc.aio table server on loopback and real Redis.

Four bots play a whole game of 7 deals over gRPC; melds show in every player's view; no view
or event gives away another hand or the stock; a turn that times out is played by the server
(draw from the stock, discard that card). Every table has a fresh id; nothing else in Redis
is touched.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from typing import Any

import grpc
import pytest
from google.protobuf.json_format import MessageToDict
from redis.asyncio import Redis

from cli.play.bot import BotPlayer
from cli.play.games import HAND
from games.hand.cards import card_text
from games.hand.game import GameState
from kishpa.common.v1 import common_pb2
from kishpa.table.v1 import table_pb2, table_pb2_grpc
from sdk import table_settings
from services.common.auth import TokenAuthority
from services.common.errors import error_reason
from shared import keys
from tests.integration.tables.conftest import cleanup, ids_in, private_part, versioned_state
from tests.reference_settlement import add_movements, hand_movements

pytestmark = pytest.mark.integration

IDLE_LIMIT_S = 60.0


async def open_hand_table(
    stub: table_pb2_grpc.TableServiceStub,
    md: dict[str, Any],
    players: list[str],
    *,
    turn_seconds: int = 60,
    pause_ms: int = 20,
) -> str:
    """A started Hand table with ``players`` seated in order."""
    created = await stub.CreateTable(
        table_pb2.CreateTableRequest(
            settings=table_settings(
                common_pb2.GAME_HAND,
                len(players),
                turn_seconds=turn_seconds,
                next_round_pause_ms=pause_ms,
            ),
            request_id=uuid.uuid4().hex,
        ),
        metadata=md[players[0]],
    )
    table_id = created.table.table_id
    for p in players[1:]:
        await stub.JoinTable(
            table_pb2.JoinTableRequest(table_id=table_id, request_id=uuid.uuid4().hex),
            metadata=md[p],
        )
    await stub.StartGame(
        table_pb2.StartGameRequest(table_id=table_id, request_id=uuid.uuid4().hex),
        metadata=md[players[0]],
    )
    return table_id


async def hidden_state(redis: Redis, table_id: str) -> dict[str, Any]:
    return (await versioned_state(redis, table_id))[1]


async def play_until_closed(
    bots: dict[str, BotPlayer], table_id: str, redis: Redis, *, check: bool = True
) -> tuple[table_pb2.TableView, int]:
    """Every bot moves in turn until the table closes; returns the last view, melds seen.

    With ``check``, after every move each player's view is compared with the hidden state.
    """
    most_melds = 0
    idle_since = time.monotonic()
    for _ in range(20_000):
        moved = False
        views = {p: await b.view(table_id) for p, b in bots.items()}
        first = next(iter(views.values()))
        if first.status == table_pb2.TABLE_STATUS_CLOSED:
            return first, most_melds
        if check:
            most_melds = max(most_melds, await check_views(views, table_id, redis))
        for player, bot in bots.items():
            if await bot.play(table_id, views[player]) is not None:
                moved = True
                break
        if moved:
            idle_since = time.monotonic()
        else:
            # The deadline loop deals the next deal (any replica on this Redis may claim it).
            assert time.monotonic() - idle_since < IDLE_LIMIT_S, "nobody could move for too long"
            await asyncio.sleep(0.01)
    raise AssertionError("the game did not finish")


async def check_views(views: dict[str, table_pb2.TableView], table_id: str, redis: Redis) -> int:
    """Each view: own cards only, the same melds for all; returns the number of melds.

    Checked only when every view shows the state's version (the deadline loop may deal the
    next deal in between).
    """
    version, state = await versioned_state(redis, table_id)
    if any(v.version != version for v in views.values()):
        return 0
    deal = state["game"]["deal"]
    melds = None
    for view in views.values():
        seat = view.my_seat
        assert view.round.HasField("hand")
        shown = [[t.id for t in m.cards] for m in view.round.hand.melds]
        assert shown == [m["cards"] for m in deal["melds"]]
        if melds is None:
            melds = shown
        assert shown == melds, "every player sees the same melds"
        assert [t.id for t in view.round.my_rack.tiles] == deal["hands"][seat]
        hidden = set(deal["stock"])
        for other, hand in enumerate(deal["hands"]):
            # Once the deal ended the hands left are shown to all (they justify the scores).
            if other != seat and deal["phase"] != "ended":
                hidden |= set(hand)
        leaked = ids_in(MessageToDict(view)) & hidden
        assert not leaked, f"seat {seat} sees hidden cards {sorted(leaked)}"
        if view.round.phase == table_pb2.ROUND_PHASE_TURNS:
            assert view.round.server_seed == "", "the seed stays secret during the deal"
    return len(melds or [])


async def watch_all(
    stub: table_pb2_grpc.TableServiceStub, md: dict[str, Any], player: str, table_id: str
) -> list[table_pb2.TableEvent]:
    events = []
    async for response in stub.WatchTable(
        table_pb2.WatchTableRequest(table_id=table_id), metadata=md[player], timeout=30
    ):
        events.append(response.event)
    return events


async def test_four_bots_play_a_hand_game_of_seven_deals(
    stub: table_pb2_grpc.TableServiceStub,
    channel: grpc.aio.Channel,
    authority: TokenAuthority,
    md: dict[str, Any],
    players: list[str],
    redis: Redis,
) -> None:
    table_id = await open_hand_table(stub, md, players)
    try:
        bots = {
            p: BotPlayer(channel, authority.issue_player_token(p, p).token, bytes([n]) * 80, HAND)
            for n, p in enumerate(players)
        }
        view, most_melds = await play_until_closed(bots, table_id, redis)
        assert most_melds > 0, "melds were laid and shown"
        assert view.round.round == 7
        assert view.settings.game == common_pb2.GAME_HAND
        state = await hidden_state(redis, table_id)
        game = GameState.from_dict(state["game"]["game"])
        assert game.deals_played == 7
        assert [s.score for s in view.seats] == game.totals
        assert list(view.round.hand.payouts) == game.payouts()
        assert view.round.hand.pot == 0, "paid out"
        # The last deal ended: every hand left is shown, each card with its face.
        left = state["game"]["deal"]["hands"]
        assert [[c.id for c in h.tiles] for h in view.round.hand.end_hands] == left
        for shown in view.round.hand.end_hands:
            assert [c.face for c in shown.tiles] == [card_text(c.id) for c in shown.tiles]

        # The outbox: the buy-in before the first deal and the payout after the seventh.
        outbox = await redis.hgetall(keys.outbox(table_id))  # type: ignore[misc]
        assert sorted(k.decode() for k in outbox) == ["0:buy_in", "7:payout"]
        moved: dict[str, int] = {}
        for field, phase in ((b"0:buy_in", "buy_in"), (b"7:payout", "payout")):
            value = json.loads(outbox[field])
            assert (value["table_id"], value["game"], value["phase"]) == (table_id, "hand", phase)
            add_movements(moved, hand_movements(phase, value["record"]))
        assert moved.get("pot", 0) == 0, "the pot ends empty"
        assert [moved.get(p, 0) + 1 for p in players] == game.payouts()

        # Every player's event stream: his own private facts only, never another's.
        for seat, player in enumerate(players):
            events = await watch_all(stub, md, player, table_id)
            kinds = [e.WhichOneof("event") for e in events]
            assert kinds[-1] == "table_closed"
            assert kinds.count("deal_started") == 7
            assert kinds.count("dealt") == 7, "only his own deals"
            assert None not in kinds, "every event is a known typed message"
            for event in events:
                kind = event.WhichOneof("event")
                if private_part(event):
                    assert event.seat == seat
                if kind == "drew" and event.drew.source == table_pb2.DRAW_SOURCE_PILE:
                    assert not event.drew.HasField("tile"), "a stock draw shows no card"
                if kind in ("dealt", "card_drawn"):
                    assert event.seat == seat
                if kind == "deal_ended":
                    for hand in event.deal_ended.hands:
                        assert [c.face for c in hand.tiles] == [card_text(c.id) for c in hand.tiles]
            ended = [e.deal_ended for e in events if e.WhichOneof("event") == "deal_ended"]
            assert [[c.id for c in h.tiles] for h in ended[-1].hands] == left
    finally:
        await cleanup(redis, table_id)


async def test_a_timed_out_turn_draws_from_the_stock_and_discards_that_card(
    stub: table_pb2_grpc.TableServiceStub,
    md: dict[str, Any],
    players: list[str],
    redis: Redis,
) -> None:
    two = players[:2]
    table_id = await open_hand_table(stub, md, two, turn_seconds=1)
    try:
        state = await hidden_state(redis, table_id)
        starter = state["game"]["deal"]["turn"]
        other = 1 - starter
        before = list(state["game"]["deal"]["hands"][other])
        top_of_stock = state["game"]["deal"]["stock"][0]
        # The starter's turn runs out (he discards), then the other seat's (draw, discard).
        for _ in range(100):
            await asyncio.sleep(0.1)
            state = await hidden_state(redis, table_id)
            if state["game"]["deal"]["turn_no"] >= 2:
                break
        deal = state["game"]["deal"]
        assert deal["turn_no"] >= 2
        assert deal["hands"][other] == before, "the drawn card was discarded again"
        assert top_of_stock in deal["discard_pile"]
        events = await redis.xrange(keys.events(table_id))
        timed_out = [json.loads(f[b"data"]) for _, f in events if f[b"type"] == b"timed_out"]
        assert len(timed_out) >= 2
        view = (
            await stub.GetTable(table_pb2.GetTableRequest(table_id=table_id), metadata=md[two[0]])
        ).table
        assert view.status == table_pb2.TABLE_STATUS_PLAYING
    finally:
        await cleanup(redis, table_id)


async def test_hand_moves_are_checked_and_refused_with_reasons(
    stub: table_pb2_grpc.TableServiceStub,
    md: dict[str, Any],
    players: list[str],
    redis: Redis,
) -> None:
    two = players[:2]
    table_id = await open_hand_table(stub, md, two)
    try:
        state = await hidden_state(redis, table_id)
        starter = two[state["game"]["deal"]["turn"]]
        waiting = two[1 - state["game"]["deal"]["turn"]]
        hand = state["game"]["deal"]["hands"][two.index(starter)]
        version = int(await redis.hget(keys.state(table_id), "version"))  # type: ignore[misc]

        async def refused(call: Any, request: Any, player: str) -> tuple[grpc.StatusCode, str]:
            with pytest.raises(grpc.aio.AioRpcError) as info:
                await call(request, metadata=md[player])
            return info.value.code(), str(error_reason(info.value))

        assert await refused(
            stub.LayOff,
            table_pb2.LayOffRequest(table_id=table_id, meld_id=0, tile_id=hand[0]),
            starter,
        ) == (grpc.StatusCode.FAILED_PRECONDITION, "NOT_OPENED")
        assert await refused(
            stub.LayMelds,
            table_pb2.LayMeldsRequest(
                table_id=table_id, melds=[table_pb2.ProposedMeld(tile_ids=[500, 1, 2])]
            ),
            starter,
        ) == (grpc.StatusCode.INVALID_ARGUMENT, "MALFORMED_TILE")
        assert await refused(
            stub.Draw,
            table_pb2.DrawRequest(table_id=table_id, source=table_pb2.DRAW_SOURCE_PILE),
            waiting,
        ) == (grpc.StatusCode.FAILED_PRECONDITION, "NOT_YOUR_TURN")
        assert await refused(
            stub.Win, table_pb2.WinRequest(table_id=table_id, discard_tile_id=hand[0]), starter
        ) == (grpc.StatusCode.INVALID_ARGUMENT, "UNKNOWN_ACTION")
        assert await refused(
            stub.PressLastRound, table_pb2.PressLastRoundRequest(table_id=table_id), two[0]
        ) == (grpc.StatusCode.FAILED_PRECONDITION, "NOT_SUPPORTED")
        after = int(await redis.hget(keys.state(table_id), "version"))  # type: ignore[misc]
        assert after == version, "refused moves change nothing"

        # The starter (15 cards, no draw) discards; the view shows it and offers no "last round".
        request = table_pb2.DiscardRequest(table_id=table_id, tile_id=hand[0], request_id="d1")
        first = await stub.Discard(request, metadata=md[starter])
        assert [t.id for t in first.table.round.discards][-1] == hand[0]
        assert first.table.round.HasField("turn_seat")
        assert first.table.round.turn_seat == two.index(waiting)
        assert table_pb2.PLAYER_ACTION_PRESS_LAST_ROUND not in first.table.available_actions
    finally:
        await cleanup(redis, table_id)
