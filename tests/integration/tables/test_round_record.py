"""GetRoundRecord and ``kishpa verify`` against a real table service that played a round.

The verdict comes from the SDK's own implementation of docs/fairness.md, independent of the
server's dealing code: a round the server really dealt from its seeds must verify for every
seat, and the record must hold no tile the caller was not given.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import sys
import uuid
from typing import Any

import grpc
import pytest
from redis.asyncio import Redis

from cli.play.bot import BotPlayer
from cli.play.games import HAND
from kishpa.common.v1 import common_pb2
from kishpa.table.v1 import table_pb2, table_pb2_grpc
from sdk import table_settings
from sdk.fairness import (
    DEALT_CARDS_MISMATCH,
    RoundWitness,
    Verification,
    evidence_from_record,
    verify_round,
)
from services.common.auth import TokenAuthority
from services.common.errors import error_reason
from services.table.server import TableServer
from tests.integration.tables.conftest import cleanup
from tests.support.table_play import open_table, play_until

pytestmark = pytest.mark.integration


async def _record(
    stub: table_pb2_grpc.TableServiceStub, md: Any, table_id: str, round_no: int
) -> table_pb2.RoundRecord:
    response = await stub.GetRoundRecord(
        table_pb2.GetRoundRecordRequest(table_id=table_id, round=round_no), metadata=md
    )
    return response.record


async def _run(argv: list[str], env: dict[str, str], token: str) -> tuple[int, str]:
    """Run a command without blocking the loop the in-process server answers on."""
    proc = await asyncio.create_subprocess_exec(
        *argv,
        env={**env, "KISHPA_TOKEN": token},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(proc.communicate(), timeout=60)
    return int(proc.returncode or 0), out.decode()


def _order(event_id: str) -> tuple[int, int]:
    ms, seq = event_id.split("-")
    return int(ms), int(seq)


async def _refused(
    stub: table_pb2_grpc.TableServiceStub, md: Any, table_id: str, round_no: int
) -> tuple[grpc.StatusCode, str | None]:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await _record(stub, md, table_id, round_no)
    return caught.value.code(), error_reason(caught.value)


async def test_every_player_of_an_ended_round_verifies_it_and_others_are_refused(
    stub: table_pb2_grpc.TableServiceStub,
    channel: grpc.aio.Channel,
    authority: TokenAuthority,
    md: dict[str, Any],
    players: list[str],
    redis: Redis,
    server: TableServer,
) -> None:
    seated, outsider = players[:2], players[2]
    table_id = await open_table(stub, md, seated)
    try:
        bots = {
            p: BotPlayer(channel, authority.issue_player_token(p, p).token, bytes([n + 1]) * 80)
            for n, p in enumerate(seated)
        }
        await play_until(bots, table_id, lambda v: v.round.round >= 2)

        for seat, player in enumerate(seated):
            record = await _record(stub, md[player], table_id, 1)
            assert record.my_seat == seat
            assert list(record.player_ids) == seated
            assert len(record.server_seed) == 160
            # Served only once the seed is public, the record holds every seat's deal (bots
            # included) and every draw, so the whole table can be checked; its own part is
            # exactly this player's.
            hands = {d.seat: list(d.tile_ids) for d in record.dealt_hands}
            assert sorted(hands) == [0, 1]
            assert list(record.dealt_tile_ids) == hands[seat]
            mine = set(record.dealt_tile_ids) | {d.tile_id for d in record.pile_draws}
            assert mine <= {t for h in hands.values() for t in h} | {
                d.tile_id for d in record.draws
            }
            assert {(d.tile_id, d.pile_left) for d in record.pile_draws} == {
                (d.tile_id, d.pile_left) for d in record.draws if d.seat == seat
            }
            assert len(record.dealt_tile_ids) == (15 if seat == record.starter_seat else 14)
            assert record.precommitment == record.shuffle_commitment
            assert _order(record.precommitment_event_id) < _order(record.deal_event_id)
            seed = "creator-seed" if seat == 0 else None
            result = verify_round(evidence_from_record(record, seed))
            assert result.ok, result.summary()
            assert result.whole_table
            # Every public move is in the record and was checked against its seat's tiles.
            assert {"draw", "discard"} <= {m.kind for m in record.moves}
            assert f"all {len(record.moves)} moves" in result.checked

        assert await _refused(stub, md[outsider], table_id, 1) == (
            grpc.StatusCode.PERMISSION_DENIED,
            "NOT_SEATED",
        )
        code, reason = await _refused(stub, md[seated[0]], table_id, 2)
        if reason != "ROUND_NOT_ENDED":  # a fast machine may have finished round 2 already
            assert (code, reason) == (grpc.StatusCode.OK, None)
        assert code == grpc.StatusCode.FAILED_PRECONDITION
        assert await _refused(stub, md[seated[0]], table_id, 99) == (
            grpc.StatusCode.NOT_FOUND,
            "ROUND_NOT_FOUND",
        )
        assert await _refused(stub, md[seated[0]], "no-such-table", 1) == (
            grpc.StatusCode.NOT_FOUND,
            "TABLE_NOT_FOUND",
        )

        # The command line, as the player (exit 0), and as somebody who was not there (2).
        env = {**os.environ, "KISHPA_TABLE_ADDR": f"127.0.0.1:{server.port}"}
        kishpa = [sys.executable, "-m", "cli.main", "verify", "--table", table_id, "--round", "1"]
        token = authority.issue_player_token(seated[0], "A").token
        code, out = await _run([*kishpa, "--client-seed", "creator-seed"], env, token)
        assert code == 0, out
        assert "seat 1: table verified (commitment, your client seed, your 15" in out
        token = authority.issue_player_token(outsider, "O").token
        code, out = await _run([*kishpa, "--json"], env, token)
        assert code == 2, out
        assert '"reason": "NOT_SEATED"' in out
    finally:
        await cleanup(redis, table_id)


async def _open_hand_table(
    stub: table_pb2_grpc.TableServiceStub, md: dict[str, Any], players: list[str]
) -> str:
    created = await stub.CreateTable(
        table_pb2.CreateTableRequest(
            settings=table_settings(
                common_pb2.GAME_HAND, len(players), turn_seconds=60, next_round_pause_ms=20
            ),
            request_id=uuid.uuid4().hex,
            client_seed="hand creator seed",
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


async def _witnessed(
    stub: table_pb2_grpc.TableServiceStub, md: Any, table_id: str, seed: str | None
) -> Verification:
    """Replay the table's stream as this player receives it, through a RoundWitness."""
    witness = RoundWitness(seed)
    call = stub.WatchTable(table_pb2.WatchTableRequest(table_id=table_id), metadata=md)
    try:
        async with asyncio.timeout(60):
            async for message in call:
                verdict = witness.observe_message(message.event)
                if verdict is not None:
                    assert message.event.WhichOneof("event") == "seed_revealed"
                    assert message.event.round == 1
                    return verdict
    finally:
        call.cancel()
    raise AssertionError("the stream ended before the first deal's seed was revealed")


def _fold(dealt: dict[int, list[int]], moves: Any) -> list[list[int]]:
    """Each seat's cards after the moves: draws, takes and released jokers in; discards and
    melded cards out; an undone turn back to before its take."""
    held = {seat: list(cards) for seat, cards in dealt.items()}
    before: dict[int, list[int]] = {}
    for m in moves:
        if m.kind == "take":
            before[m.seat] = list(held[m.seat])
        if m.kind in ("draw", "take", "release"):
            held[m.seat] += list(m.tile_ids)
        elif m.kind in ("discard", "meld"):
            for card in m.tile_ids:
                held[m.seat].remove(card)
        elif m.kind == "undo":
            held[m.seat] = before.pop(m.seat)
    return [sorted(held[seat]) for seat in sorted(held)]


async def test_a_hand_deal_verifies_for_each_player_from_the_stream_and_the_record(
    stub: table_pb2_grpc.TableServiceStub,
    channel: grpc.aio.Channel,
    authority: TokenAuthority,
    md: dict[str, Any],
    players: list[str],
    redis: Redis,
    server: TableServer,
) -> None:
    seated, outsider = players[:2], players[2]
    table_id = await _open_hand_table(stub, md, seated)
    try:
        bots = {
            p: BotPlayer(
                channel, authority.issue_player_token(p, p).token, bytes([n + 9]) * 80, HAND
            )
            for n, p in enumerate(seated)
        }
        await play_until(
            bots,
            table_id,
            lambda v: v.round.round >= 2 or v.status == table_pb2.TABLE_STATUS_CLOSED,
        )
        for seat, player in enumerate(seated):
            seed = "hand creator seed" if seat == 0 else None
            # What `kishpa play --game hand` says at the deal's end: the typed events.
            live = await _witnessed(stub, md[player], table_id, seed)
            assert live.ok, live.summary()
            # What `kishpa verify` says: the service's record of the deal.
            record = await _record(stub, md[player], table_id, 1)
            assert record.game == common_pb2.GAME_HAND
            assert record.my_seat == seat
            assert list(record.player_ids) == seated
            assert len(record.server_seed) == 160
            assert list(record.client_seeds) == ["hand creator seed", ""]
            hands = {d.seat: list(d.tile_ids) for d in record.dealt_hands}
            assert list(record.dealt_tile_ids) == hands[seat]
            assert record.HasField("top_discard_card_id")
            assert record.top_discard_card_id == record.top_discard_id
            assert {(d.tile_id, d.pile_left) for d in record.pile_draws} == {
                (d.tile_id, d.pile_left) for d in record.draws if d.seat == seat
            }
            assert len(record.dealt_tile_ids) == (15 if seat == record.starter_seat else 14)
            evidence = evidence_from_record(record, seed)
            assert evidence.game == "hand"
            result = verify_round(evidence)
            assert result.ok, result.summary()
            assert result.whole_table
            assert set(live.checked) <= set(result.checked)
            assert f"all {len(record.moves)} moves" in result.checked
            # The moves are complete: folded over the dealt hands (by hand, here) they leave
            # each seat the cards deal_ended showed.
            (ended,) = [
                e.event
                for e in await server.tables.store.read_events(table_id, "0-0", count=5000)
                if e.event.type == "deal_ended" and e.event.round == 1
            ]
            assert _fold(hands, record.moves) == [sorted(h) for h in ended.data["hands"]]
            assert [sorted(d.tile_ids) for d in record.cards_left] == [
                sorted(h) for h in ended.data["hands"]
            ]
            # A card swapped in the record is caught by name.
            tampered = dataclasses.replace(
                evidence, dealt=[(evidence.dealt[0] + 1) % 106, *evidence.dealt[1:]]
            )
            assert DEALT_CARDS_MISMATCH in {f.check for f in verify_round(tampered).failures}
        assert await _refused(stub, md[outsider], table_id, 1) == (
            grpc.StatusCode.PERMISSION_DENIED,
            "NOT_SEATED",
        )
        env = {**os.environ, "KISHPA_TABLE_ADDR": f"127.0.0.1:{server.port}"}
        kishpa = [sys.executable, "-m", "cli.main", "verify", "--table", table_id, "--round", "1"]
        token = authority.issue_player_token(seated[0], "A").token
        code, out = await _run([*kishpa, "--client-seed", "hand creator seed"], env, token)
        assert code == 0, out
        assert "seat 1: table verified (commitment, your client seed, your 1" in out
        assert "dealt cards, turned card" in out
    finally:
        await cleanup(redis, table_id)
