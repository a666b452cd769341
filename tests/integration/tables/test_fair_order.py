"""The commitment order against a real table service (docs/fairness.md, protocol version 2).

An honest service commits to each deal's seed before it takes contributions, deals with
them, and its record of the deal verifies for the whole table. A service that changes its
seed after the contributions, or commits only once it has them, is caught by every verifier:
the SDK, ``kishpa verify`` and the browser's WebCrypto check (run in Node).
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
import uuid
from typing import Any

import grpc
import pytest
from redis.asyncio import Redis

from cli.play.bot import BotPlayer
from cli.play.games import HAND, KISHPA
from games import table as games_table
from games.table import Table
from kishpa.common.v1 import common_pb2
from kishpa.table.v1 import table_pb2, table_pb2_grpc
from sdk.fairness import (
    COMMITMENT_LATE,
    MOVE_MISMATCH,
    card_text,
    evidence_from_record,
    face,
    verify_round,
)
from services.common.auth import TokenAuthority
from services.common.errors import error_reason
from services.table.engine import Step
from services.table.server import TableServer
from tests.integration.tables.conftest import cleanup
from tests.support.fair_order import (
    contribute,
    kishpa_verify,
    round_ended,
    round_record,
    web_verdict,
)
from tests.support.table_play import open_table, play_until
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration


async def _refused(call: Any) -> tuple[grpc.StatusCode, str | None]:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call
    return caught.value.code(), error_reason(caught.value)


async def _events(server: TableServer, table_id: str) -> list[Any]:
    return list(await server.tables.store.read_events(table_id, "0-0", count=2000))


async def test_contributions_come_after_the_commitment_and_before_the_deal(
    stub: table_pb2_grpc.TableServiceStub,
    channel: grpc.aio.Channel,
    authority: TokenAuthority,
    md: dict[str, Any],
    players: list[str],
    redis: Redis,
    server: TableServer,
) -> None:
    ann, bob, outsider, dan = players[0], players[1], players[2], players[3]
    table_id = await open_table(stub, md, [ann, dan, bob], start=False)
    try:
        # Dan contributes, then leaves before the start: Bob moves up to seat 1, and Dan's
        # contribution is in no deal (nor in its record).
        await contribute(stub, md[dan], table_id, 1, "dan-gone")
        await stub.LeaveTable(
            table_pb2.LeaveTableRequest(table_id=table_id, request_id=uuid.uuid4().hex),
            metadata=md[dan],
        )
        view = (
            await stub.GetTable(table_pb2.GetTableRequest(table_id=table_id), metadata=md[ann])
        ).table
        assert view.next_deal == 1
        assert len(view.next_deal_commitment) == 64
        assert not view.contributed
        odd = 'b"\\🎲\x07'
        assert (await contribute(stub, md[ann], table_id, 1, "ann-deal-1")).contributed
        await contribute(stub, md[bob], table_id, 1, odd)
        again = await contribute(stub, md[ann], table_id, 1, "ann-deal-1")  # a repeat: no-op
        assert again.contributed
        refusals = [
            (contribute(stub, md[ann], table_id, 1, "changed my mind"), "ALREADY_CONTRIBUTED"),
            (contribute(stub, md[ann], table_id, 2, "too early"), "CONTRIBUTIONS_CLOSED"),
            (contribute(stub, md[ann], table_id, 1, ""), "BAD_CONTRIBUTION"),
            (contribute(stub, md[ann], table_id, 1, "x" * 65), "BAD_CONTRIBUTION"),
            (contribute(stub, md[outsider], table_id, 1, "not mine"), "NOT_SEATED"),
        ]
        for call, reason in refusals:
            code, got = await _refused(call)
            assert got == reason
            assert code in (
                grpc.StatusCode.FAILED_PRECONDITION,
                grpc.StatusCode.INVALID_ARGUMENT,
                grpc.StatusCode.PERMISSION_DENIED,
            )
        started = await stub.StartGame(
            table_pb2.StartGameRequest(table_id=table_id, request_id=uuid.uuid4().hex),
            metadata=md[ann],
        )
        # Everyone awaited had contributed: dealt at once, in the StartGame commit.
        assert started.table.round.round == 1
        assert started.table.next_deal == 0
        assert started.table.round.server_seed == ""
        code, reason = await _refused(contribute(stub, md[bob], table_id, 1, "late"))
        assert (code, reason) == (grpc.StatusCode.FAILED_PRECONDITION, "CONTRIBUTIONS_CLOSED")

        bots = {
            p: BotPlayer(channel, authority.issue_player_token(p, p).token, bytes([n + 3]) * 80)
            for n, p in enumerate([ann, bob])
        }
        await play_until(bots, table_id, round_ended)
        record = await round_record(stub, md[ann], table_id, 1)
        assert [(c.seat, c.contribution) for c in record.contributions] == [
            (0, "ann-deal-1"),
            (1, odd),
        ]
        assert list(record.client_seeds) == ["ann-deal-1", odd]
        assert list(record.seat_client_seeds) == ["creator-seed", ""]
        result = verify_round(evidence_from_record(record, "ann-deal-1"))
        assert result.ok, result.summary()
        assert result.whole_table
        assert result.contributed
        web = web_verdict(record)
        if web is not None:
            assert web["ok"], web["summary"]

        # The next deal's seed is committed but secret: in no event, no view, no record.
        snapshot = await server.tables.store.load(table_id)
        assert snapshot is not None
        secret = str(snapshot.state["fair"]["seed"])
        assert len(secret) == 160
        published = [
            json.dumps([e.event.data, e.event.private_data])
            for e in await _events(server, table_id)
        ]
        assert not any(secret in text for text in published)
        for player in (ann, bob, outsider):
            seen = await stub.GetTable(
                table_pb2.GetTableRequest(table_id=table_id), metadata=md[player]
            )
            assert secret not in str(seen)
        assert secret not in str(record)
        # Deal 2 is committed with deal 1's reveal. Both seats contributed before, so it
        # waits for them; once both are in, it is dealt at once, not at the deadline.
        view = (
            await stub.GetTable(table_pb2.GetTableRequest(table_id=table_id), metadata=md[ann])
        ).table
        assert view.next_deal == 2 or view.round.round >= 2
        if view.next_deal == 2:
            sent = time.monotonic()
            await contribute(stub, md[ann], table_id, 2, "ann-deal-2")
            await contribute(stub, md[bob], table_id, 2, "bob-deal-2")

            async def second_deal() -> table_pb2.TableView | None:
                request = table_pb2.GetTableRequest(table_id=table_id)
                seen = (await stub.GetTable(request, metadata=md[ann])).table
                return seen if seen.round.round >= 2 else None

            view = await wait_until(second_deal, timeout=10, interval=0.02, message="deal 2")
            assert view.round.round == 2
            assert time.monotonic() - sent < 2.5  # well before the 3 s contribution deadline
        # The stream shows the order: each deal's commitment before its contributions,
        # they before the deal; and the commitment of deal 2 came with deal 1's reveal.
        kinds = [
            (e.event.type, e.event.round)
            for e in await _events(server, table_id)
            if e.event.type
            in ("seed_committed", "contribution_accepted", "round_started", "round_ended")
        ]
        # (Between deals an event carries the round that ended, 0 before the first; the
        # deal it is for is in its data.)
        assert kinds[:5] == [
            ("seed_committed", 0),
            ("contribution_accepted", 0),  # Dan's, who left
            ("contribution_accepted", 0),
            ("contribution_accepted", 0),
            ("round_started", 1),
        ]
        at = kinds.index(("round_ended", 1))
        assert kinds[at + 1] == ("seed_committed", 1)
    finally:
        await cleanup(redis, table_id)


async def test_a_seat_that_contributed_is_awaited_then_dealt_its_default(
    stub: table_pb2_grpc.TableServiceStub,
    channel: grpc.aio.Channel,
    authority: TokenAuthority,
    md: dict[str, Any],
    players: list[str],
    redis: Redis,
    server: TableServer,
) -> None:
    """Ann contributed to deal 1, so deal 2 waits for her; she sends nothing, and after the
    short deadline deal 2 is dealt with her sit-down seed."""
    ann, bob = players[0], players[1]
    table_id = await open_table(stub, md, [ann, bob], start=False)
    try:
        await contribute(stub, md[ann], table_id, 1, "only-once")
        await stub.StartGame(
            table_pb2.StartGameRequest(table_id=table_id, request_id=uuid.uuid4().hex),
            metadata=md[ann],
        )
        bots = {
            p: BotPlayer(channel, authority.issue_player_token(p, p).token, bytes([n + 5]) * 80)
            for n, p in enumerate([ann, bob])
        }
        await play_until(bots, table_id, lambda v: v.round.round >= 2)
        events = await _events(server, table_id)
        waits = [
            e
            for e in events
            if e.event.type == "deadline" and e.event.data["kind"] == "contributions"
        ]
        assert [w.event.round for w in waits] == [1]  # waiting for deal 2, after round 1
        waited_ms = int(waits[0].event.data["at_ms"]) - int(waits[0].id.split("-")[0])
        assert 2_500 <= waited_ms <= 3_500
        (started,) = [e for e in events if e.event.type == "round_started" and e.event.round == 2]
        assert int(started.id.split("-")[0]) >= int(waits[0].event.data["at_ms"])
    finally:
        await cleanup(redis, table_id)


async def test_a_declared_creator_at_a_bot_table_is_awaited_from_the_first_deal(
    stub: table_pb2_grpc.TableServiceStub,
    md: dict[str, Any],
    players: list[str],
    redis: Redis,
    server: TableServer,
) -> None:
    """A table with house bots (what the web's and ``kishpa play``'s "play with bots"
    make): its creator's client declares it contributes, so StartGame does not deal
    deal 1 at once; his contribution, sent after he saw the commitment, deals it."""
    ann = players[0]
    settings = table_pb2.TableSettings(game=common_pb2.GAME_KISHPA, seats=3, bots=2)
    created = await stub.CreateTable(
        table_pb2.CreateTableRequest(
            settings=settings, request_id=uuid.uuid4().hex, will_contribute=True
        ),
        metadata=md[ann],
    )
    table_id = created.table.table_id
    try:
        started = await stub.StartGame(
            table_pb2.StartGameRequest(table_id=table_id, request_id=uuid.uuid4().hex),
            metadata=md[ann],
        )
        assert started.table.round.round == 0  # waiting for Ann's contribution
        assert started.table.next_deal == 1
        commitment = started.table.next_deal_commitment
        dealt = await contribute(stub, md[ann], table_id, 1, "ann-first")
        assert dealt.round.round == 1
        order = [
            (e.event.type, e.event.data.get("commitment"))
            for e in await _events(server, table_id)
            if e.event.type in ("seed_committed", "contribution_accepted", "round_started")
        ]
        assert order == [
            ("seed_committed", commitment),
            ("contribution_accepted", None),
            ("round_started", commitment),
        ]
    finally:
        await cleanup(redis, table_id)


def _swap_seed_after_contributions(server: TableServer) -> None:
    """A dishonest service: once the contributions are in, it deals from another seed (one
    it could have ground against them) and says nothing."""
    tables = server.tables
    real = tables._deal

    def swapped(table: Table, how: str) -> Step:
        if table.fair.get("contributions"):
            table.fair["seed"] = os.urandom(80).hex()
        return real(table, how)

    tables._deal = swapped  # type: ignore[method-assign]


def _commit_after_contributions(server: TableServer) -> None:
    """A dishonest service: it commits (again) only once it holds the contributions."""
    tables = server.tables
    real = tables._deal

    def late(table: Table, how: str) -> Step:
        given = dict(table.fair.get("contributions") or {})
        if not given:
            return real(table, how)
        event = tables._commit_event(table, int(table.fair["deal"]))
        table.fair["contributions"] = given
        step = real(table, how)
        step.events = [event, *step.events]
        return step

    tables._deal = late  # type: ignore[method-assign]


@pytest.mark.parametrize(
    "cheat", [_swap_seed_after_contributions, _commit_after_contributions], ids=["swap", "late"]
)
async def test_a_server_that_cheats_on_the_order_is_caught_by_every_verifier(
    cheat: Any,
    stub: table_pb2_grpc.TableServiceStub,
    channel: grpc.aio.Channel,
    authority: TokenAuthority,
    md: dict[str, Any],
    players: list[str],
    redis: Redis,
    server: TableServer,
) -> None:
    ann, bob = players[0], players[1]
    cheat(server)
    table_id = await open_table(stub, md, [ann, bob], start=False)
    try:
        await contribute(stub, md[ann], table_id, 1, "ann-honest")
        await stub.StartGame(
            table_pb2.StartGameRequest(table_id=table_id, request_id=uuid.uuid4().hex),
            metadata=md[ann],
        )
        bots = {
            p: BotPlayer(channel, authority.issue_player_token(p, p).token, bytes([n + 7]) * 80)
            for n, p in enumerate([ann, bob])
        }
        await play_until(bots, table_id, round_ended)
        record = await round_record(stub, md[ann], table_id, 1)
        # Everything else is consistent: the seed matches the deal's commitment, the hands
        # are the seed's. Only the order gives the cheat away.
        result = verify_round(evidence_from_record(record))
        assert not result.ok
        assert COMMITMENT_LATE in {f.check for f in result.failures}, result.summary()
        code, out = await kishpa_verify(server, authority, ann, table_id)
        assert code == 1, out
        assert COMMITMENT_LATE in {f["check"] for f in out["failures"]}
        web = web_verdict(record)
        if web is not None:
            assert not web["ok"]
            assert COMMITMENT_LATE in web["checks"], web["summary"]
    finally:
        await cleanup(redis, table_id)


def _bot_discards_a_tile_it_never_held(server: TableServer) -> list[tuple[int, int]]:
    """A dishonest service: the first time a house bot discards, the stream says it
    discarded a tile from the bottom of the pile (Hand: of the stock), never dealt, never
    drawn by anyone. Returns the (seat, tile) it announced, once it did."""
    tables = server.tables
    real = tables._transition
    announced: list[tuple[int, int]] = []

    def lying(table: Table, step: Step | None, answer: Any) -> Any:
        if step is not None and not announced:
            for at, event in enumerate(step.events):
                bot = (
                    0 <= event.seat < len(table.players) and table.players[event.seat] in table.bots
                )
                if event.type == "discarded" and bot:
                    if "card" in event.data:  # Hand: the stock is drawn from its start
                        never = int(table.game["deal"]["stock"][-1])
                        data = {"card": never, "text": card_text(never)}
                    else:
                        never = int(table.game["round"]["pile"][0])
                        data = {"tile": face(never), "tile_id": never}
                    step.events[at] = dataclasses.replace(event, data=data)
                    announced.append((event.seat, never))
                    break
        return real(table, step, answer)

    tables._transition = lying  # type: ignore[method-assign]
    return announced


@pytest.mark.parametrize("game", ["kishpa", "hand"])
async def test_a_bot_that_discards_a_tile_it_never_held_is_named_by_every_verifier(
    game: str,
    stub: table_pb2_grpc.TableServiceStub,
    channel: grpc.aio.Channel,
    authority: TokenAuthority,
    md: dict[str, Any],
    players: list[str],
    redis: Redis,
    server: TableServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every other fact of the deal is honest (the seed, every hand, every draw): only the
    bot's public discard is a tile it never held, and the SDK, ``kishpa verify`` and the
    browser's check each fail the deal with MOVE_MISMATCH naming the bot's seat."""
    # The house bot plays its turn after the auto-play delay: short here, so the round
    # ends in seconds (the delay only paces the table).
    monkeypatch.setattr(games_table, "AUTOPLAY_DELAY_MS", 50)
    ann = players[0]
    announced = _bot_discards_a_tile_it_never_held(server)
    hand = game == "hand"
    settings = table_pb2.TableSettings(
        game=common_pb2.GAME_HAND if hand else common_pb2.GAME_KISHPA, seats=2, bots=1
    )
    settings.turn_time.FromSeconds(60)
    settings.reveal_window.FromSeconds(2)
    created = await stub.CreateTable(
        table_pb2.CreateTableRequest(settings=settings, request_id=uuid.uuid4().hex),
        metadata=md[ann],
    )
    table_id = created.table.table_id
    try:
        await stub.StartGame(
            table_pb2.StartGameRequest(table_id=table_id, request_id=uuid.uuid4().hex),
            metadata=md[ann],
        )
        token = authority.issue_player_token(ann, ann).token
        me = {ann: BotPlayer(channel, token, b"\x0b" * 80, HAND if hand else KISHPA)}
        await play_until(
            me, table_id, lambda v: round_ended(v) or v.status == table_pb2.TABLE_STATUS_CLOSED
        )
        assert announced, "the bot never discarded"
        (seat, tile) = announced[0]
        record = await round_record(stub, md[ann], table_id, 1)
        named = f"seat {seat + 1}, discard"
        result = verify_round(evidence_from_record(record))
        moves = [f.message for f in result.failures if f.check == MOVE_MISMATCH]
        assert any(named in m and f"id {tile}" in m for m in moves), result.summary()
        # Nothing else was touched: the deal itself verifies.
        assert {f.check for f in result.failures} == {MOVE_MISMATCH}, result.summary()
        code, out = await kishpa_verify(server, authority, ann, table_id)
        assert code == 1, out
        said = [f["message"] for f in out["failures"] if f["check"] == MOVE_MISMATCH]
        assert any(named in m and f"id {tile}" in m for m in said), out
        web = web_verdict(record)
        if web is not None:
            assert not web["ok"]
            assert MOVE_MISMATCH in web["checks"], web["summary"]
            assert named in web["summary"], web["summary"]
            assert f"id {tile}" in web["summary"], web["summary"]
    finally:
        await cleanup(redis, table_id)
