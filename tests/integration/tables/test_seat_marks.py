"""A player alone with house bots (issue 32): his first deal waits for his contribution, and
the deal's record names its seats (record version 3: bots, declared, awaited, auto-play, the
contribution deadline) so that every verifier (the SDK, ``kishpa verify``, the browser's
check) names his contribution, says "bots only" when he sent none, and fails a record whose
seat marks were tampered with or a server that did not wait for a declared seat.
"""

from __future__ import annotations

import uuid
from typing import Any

import grpc
import pytest
from redis.asyncio import Redis

from cli.play.bot import BotPlayer
from cli.play.games import KISHPA
from games import contributions as fair_order
from games import table as games_table
from kishpa.common.v1 import common_pb2
from kishpa.table.v1 import table_pb2, table_pb2_grpc
from sdk.fairness import SEATS_MISMATCH, evidence_from_record, verify_round
from services.common.auth import TokenAuthority
from services.table.server import TableServer
from tests.integration.tables.conftest import cleanup
from tests.integration.tables.test_fair_order import (
    _contribute,
    _ended,
    _kishpa_verify,
    _record,
    _web_verdict,
)
from tests.integration.tables.test_table_service import _play_until

pytestmark = pytest.mark.integration


async def _bot_table(
    stub: table_pb2_grpc.TableServiceStub, md: Any, player: str, *, declares: bool
) -> str:
    """A three-seat Kishpa table: the player and two house bots; not started."""
    settings = table_pb2.TableSettings(game=common_pb2.GAME_KISHPA, seats=3, bots=2)
    settings.turn_time.FromSeconds(60)
    settings.reveal_window.FromSeconds(2)
    created = await stub.CreateTable(
        table_pb2.CreateTableRequest(
            settings=settings, request_id=uuid.uuid4().hex, will_contribute=declares
        ),
        metadata=md,
    )
    return str(created.table.table_id)


async def _start(stub: table_pb2_grpc.TableServiceStub, md: Any, table_id: str) -> Any:
    answer = await stub.StartGame(
        table_pb2.StartGameRequest(table_id=table_id, request_id=uuid.uuid4().hex), metadata=md
    )
    return answer.table


async def _play_deal_1(
    channel: grpc.aio.Channel, authority: TokenAuthority, player: str, table_id: str
) -> None:
    me = {
        player: BotPlayer(
            channel, authority.issue_player_token(player, player).token, b"\x0c" * 80, KISHPA
        )
    }
    await _play_until(
        me, table_id, lambda v: _ended(v) or v.status == table_pb2.TABLE_STATUS_CLOSED
    )


def _tampered(record: table_pb2.RoundRecord, **fields: list[int]) -> table_pb2.RoundRecord:
    changed = table_pb2.RoundRecord()
    changed.CopyFrom(record)
    for name, seats in fields.items():
        getattr(changed, name)[:] = seats
    return changed


async def test_a_player_alone_with_bots_is_awaited_and_his_contribution_named(
    stub: table_pb2_grpc.TableServiceStub,
    channel: grpc.aio.Channel,
    authority: TokenAuthority,
    md: dict[str, Any],
    players: list[str],
    redis: Redis,
    server: TableServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Ann's client does not declare (an older client): alone with two house bots she is
    still awaited for deal 1 (the lone-creator rule), so StartGame does not deal it; her
    contribution, sent after she saw the commitment, deals it at once."""
    monkeypatch.setattr(games_table, "AUTOPLAY_DELAY_MS", 50)
    ann = players[0]
    table_id = await _bot_table(stub, md[ann], ann, declares=False)
    try:
        started = await _start(stub, md[ann], table_id)
        assert started.round.round == 0  # waiting for Ann
        assert started.next_deal == 1
        dealt = await _contribute(stub, md[ann], table_id, 1, "ann-alone-1")
        assert dealt.round.round == 1  # dealt by her contribution, not at the deadline
        await _play_deal_1(channel, authority, ann, table_id)
        record = await _record(stub, md[ann], table_id, 1)
        assert record.record_version == 3
        assert list(record.bot_seats) == [1, 2]
        assert list(record.declared_seats) == []
        assert list(record.awaited_seats) == [0]
        assert list(record.autoplay_seats) == []
        assert record.awaited_until.seconds > 0  # StartGame opened a contribution wait

        result = verify_round(evidence_from_record(record, my_contribution="ann-alone-1"))
        assert result.ok, result.summary()
        assert result.my_contribution == "ann-alone-1"
        assert result.bots_only
        summary = result.summary()
        assert "your contribution 'ann-alone-1'" in summary
        assert "your contribution is in this deal" in summary
        assert "2 house bots (seat 2, 3)" in summary
        assert "the server alone chose" not in summary
        code, out = await _kishpa_verify(server, authority, ann, table_id)
        assert code == 0, out
        assert out["my_contribution"] == "ann-alone-1"
        assert out["bots_only"] is True
        web = _web_verdict(record)
        if web is not None:
            assert web["ok"], web["summary"]
            assert "your contribution is in this deal" in web["summary"]

        # A contribution the client made that the deal left out fails.
        other = verify_round(evidence_from_record(record, my_contribution="not-this-one"))
        assert "CONTRIBUTION_MISMATCH" in {f.check for f in other.failures}

        # Tampered seat marks fail every verifier (SEATS_MISMATCH).
        tampers = {
            "Ann's seat marked a bot": _tampered(record, bot_seats=[0, 1, 2]),
            "a bot marked declared": _tampered(record, declared_seats=[0, 1]),
            "a bot marked awaited": _tampered(record, awaited_seats=[0, 2]),
            "a declared seat not waited for": _tampered(
                record, declared_seats=[0], awaited_seats=[]
            ),
            "a bot flag dropped (two humans, one awaited without declaring)": _tampered(
                record, bot_seats=[2]
            ),
        }
        for name, changed in tampers.items():
            bad = verify_round(evidence_from_record(changed))
            assert SEATS_MISMATCH in {f.check for f in bad.failures}, (name, bad.summary())
            web_bad = _web_verdict(changed)
            if web_bad is not None:
                assert not web_bad["ok"], name
                assert SEATS_MISMATCH in web_bad["checks"], (name, web_bad["summary"])
    finally:
        await cleanup(redis, table_id)


async def test_without_the_lone_creator_rule_the_deal_says_bots_only(
    stub: table_pb2_grpc.TableServiceStub,
    channel: grpc.aio.Channel,
    authority: TokenAuthority,
    md: dict[str, Any],
    players: list[str],
    redis: Redis,
    server: TableServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``KISHPA_AWAIT_LONE_CREATOR=0``: a creator who did not declare is not awaited, the
    deal is dealt at StartGame, and the verdict says the server alone chose it."""
    monkeypatch.setattr(games_table, "AUTOPLAY_DELAY_MS", 50)
    monkeypatch.setattr(server.tables, "await_lone_creator", False)
    ann = players[0]
    table_id = await _bot_table(stub, md[ann], ann, declares=False)
    try:
        started = await _start(stub, md[ann], table_id)
        assert started.round.round == 1
        code, reason = grpc.StatusCode.OK, ""
        try:
            await _contribute(stub, md[ann], table_id, 1, "too late")
        except grpc.aio.AioRpcError as exc:
            code, reason = exc.code(), str(exc.details())
        assert code == grpc.StatusCode.FAILED_PRECONDITION, reason
        await _play_deal_1(channel, authority, ann, table_id)
        record = await _record(stub, md[ann], table_id, 1)
        assert list(record.awaited_seats) == []
        assert not record.HasField("awaited_until")
        result = verify_round(evidence_from_record(record))
        assert result.ok, result.summary()
        assert result.summary().endswith(
            "; bots only, no contribution: the server alone chose this deal)"
        )
        web = _web_verdict(record)
        if web is not None:
            assert web["ok"], web["summary"]
            assert web["summary"].endswith(
                "; bots only, no contribution: the server alone chose this deal)"
            )
    finally:
        await cleanup(redis, table_id)


async def test_a_server_that_does_not_wait_for_a_declared_seat_is_caught(
    stub: table_pb2_grpc.TableServiceStub,
    channel: grpc.aio.Channel,
    authority: TokenAuthority,
    md: dict[str, Any],
    players: list[str],
    redis: Redis,
    server: TableServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A dishonest service deals at once although Ann declared (it never waits), and says
    so truthfully in the seat marks: the SDK, ``kishpa verify`` and the browser each fail
    the deal (SEATS_MISMATCH: "declared seat 1 was not waited for")."""
    monkeypatch.setattr(games_table, "AUTOPLAY_DELAY_MS", 50)
    monkeypatch.setattr(fair_order, "awaited", lambda table: [])
    ann = players[0]
    table_id = await _bot_table(stub, md[ann], ann, declares=True)
    try:
        started = await _start(stub, md[ann], table_id)
        assert started.round.round == 1  # not waited for
        await _play_deal_1(channel, authority, ann, table_id)
        record = await _record(stub, md[ann], table_id, 1)
        assert list(record.declared_seats) == [0]
        assert list(record.awaited_seats) == [0]
        result = verify_round(evidence_from_record(record, i_declared=True))
        said = [f.message for f in result.failures if f.check == SEATS_MISMATCH]
        assert any("declared seat 1 was not waited for" in m for m in said), result.summary()
        code, out = await _kishpa_verify(server, authority, ann, table_id)
        assert code == 1, out
        assert SEATS_MISMATCH in {f["check"] for f in out["failures"]}
        web = _web_verdict(record)
        if web is not None:
            assert not web["ok"]
            assert "declared seat 1 was not waited for" in web["summary"]
    finally:
        await cleanup(redis, table_id)
