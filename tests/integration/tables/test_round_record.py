"""GetRoundRecord and ``kishpa verify`` against a real table service that played a round.

The verdict comes from the SDK's own implementation of docs/fairness.md, independent of the
server's dealing code: a round the server really dealt from its seeds must verify for every
seat, and the record must hold no tile the caller was not given.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

import grpc
import pytest
from google.protobuf.json_format import MessageToDict
from redis.asyncio import Redis

from cli.play.bot import BotPlayer
from kishpa.table.v1 import table_pb2, table_pb2_grpc
from sdk.fairness import evidence_from_record, verify_round
from services.common.auth import TokenAuthority
from services.common.errors import error_reason
from services.table.server import TableServer
from tests.integration.tables.conftest import cleanup, ids_in
from tests.integration.tables.test_table_service import _open_table, _play_until

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
    table_id = await _open_table(stub, md, seated)
    try:
        bots = {
            p: BotPlayer(channel, authority.issue_player_token(p, p).token, bytes([n + 1]) * 80)
            for n, p in enumerate(seated)
        }
        await _play_until(bots, table_id, lambda v: v.round.round >= 2)

        for seat, player in enumerate(seated):
            record = await _record(stub, md[player], table_id, 1)
            assert record.my_seat == seat
            assert list(record.player_ids) == seated
            assert len(record.server_seed) == 160
            mine = set(record.dealt_tile_ids) | {d.tile_id for d in record.pile_draws}
            assert ids_in(MessageToDict(record, preserving_proto_field_name=True)) <= mine
            assert len(record.dealt_tile_ids) == (15 if seat == record.starter_seat else 14)
            seed = "creator-seed" if seat == 0 else None
            result = verify_round(evidence_from_record(record, seed))
            assert result.ok, result.summary()

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
        assert "seat 1: deal verified (commitment, your client seed, your 15" in out
        token = authority.issue_player_token(outsider, "O").token
        code, out = await _run([*kishpa, "--json"], env, token)
        assert code == 2, out
        assert '"reason": "NOT_SEATED"' in out
    finally:
        await cleanup(redis, table_id)
