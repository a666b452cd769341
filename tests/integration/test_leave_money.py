"""Leaving a Kishpa table where only bots remain costs nothing after the round in progress
(docs/rules/kishpa.md, "leaving the table"), on the whole money path: a real
``kishpa serve table`` (with its house bots), a ``kishpa worker`` and ``kishpa serve wallet``.

Ann sits with two house bots at stake 100 and leaves during round 1. That round becomes the
last: it is played out by the server, its end splits the bowl, the table closes, and Ann's
wallet moved by round 1's two phases only, as the rules' amounts computed by the reference
(tests/reference_settlement.py, written from the rules page, not from the code) say.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import grpc
import pytest

from kishpa.common.v1 import common_pb2
from kishpa.table.v1 import table_pb2, table_pb2_grpc
from services.common.auth import TokenAuthority, bearer_metadata
from shared import keys, stream
from tests.integration.workers_support import (
    STARTING_TOKENS,
    wait_for,
)
from tests.reference_settlement import kishpa_movements
from tests.support.first_deal import contribute_and_wait_for_deal
from tests.support.settled_games import TOKEN_SECRET, settlement_stack

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

STAKE = 100
BANK_LOAD = 50
"""Tokens one automatic bank load brings (docs/rules/kishpa.md section 10)."""


async def _sit_with_bots_and_leave(port: int, ann: str, created: list[str]) -> str:
    """Ann opens a 3-seat table with two house bots at stake 100, and leaves in round 1."""
    md = bearer_metadata(TokenAuthority(TOKEN_SECRET).issue_player_token(ann, "Ann").token)
    settings = table_pb2.TableSettings(game=common_pb2.GAME_KISHPA, seats=3, stake=STAKE, bots=2)
    settings.turn_time.FromSeconds(60)
    settings.reveal_window.FromSeconds(1)
    settings.bot_pause.FromMilliseconds(0)
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = table_pb2_grpc.TableServiceStub(channel)
        answer = await stub.CreateTable(
            table_pb2.CreateTableRequest(settings=settings, request_id=uuid.uuid4().hex),
            metadata=md,
        )
        table_id = answer.table.table_id
        created.append(table_id)
        await stub.StartGame(
            table_pb2.StartGameRequest(table_id=table_id, request_id=uuid.uuid4().hex),
            metadata=md,
        )
        await contribute_and_wait_for_deal(stub, md, table_id)
        left = await stub.LeaveTable(
            table_pb2.LeaveTableRequest(table_id=table_id, request_id=uuid.uuid4().hex),
            metadata=md,
        )
        assert left.table.round.round == 1
        assert left.table.last_round_pressed
        return table_id


async def test_leaving_a_table_of_bots_costs_nothing_after_the_round_in_progress(
    tmp_path: Path,
) -> None:
    with settlement_stack(tmp_path) as stack:
        client, wallet = stack.client, stack.wallet
        ann = f"ann-{uuid.uuid4().hex[:8]}"
        stack.creators.append(ann)
        table_id = await _sit_with_bots_and_leave(stack.port, ann, stack.tables)
        wait_for(
            lambda: (
                json.loads(client.hget(keys.state(table_id), "state") or b"{}").get("status")
                == "closed"
            ),
            120,
            "the bots to finish round 1 and the table to close",
        )
        outbox = {
            k.decode(): json.loads(v) for k, v in client.hgetall(keys.outbox(table_id)).items()
        }
        assert sorted(outbox) == ["1:end", "1:start"], "no round after the one she left in"
        end = outbox["1:end"]["record"]
        assert end["last_round"] is True, "round 1 was made the last: its end splits the bowl"
        wait_for(
            lambda: all(client.hexists(keys.settled(table_id), f) for f in outbox),
            60,
            "both phases of round 1 to be settled",
        )
        players = end["players"]
        assert players[0] == ann
        assert len(players) == 3
        expected = dict.fromkeys(players, STARTING_TOKENS)
        for field in ("1:start", "1:end"):
            moves = kishpa_movements(field.split(":")[1], outbox[field]["record"])
            for account, change in moves.items():
                if account in expected:
                    expected[account] += change
        # A player short of tokens is loaded 50 from the bank (rarely, at stake 100).
        settled = [
            stream.decode(f)
            for _, f in client.xrange(keys.events(table_id))
            if f[b"type"] == b"settled"
        ]
        assert [(e.round, e.data["phase"]) for e in settled] == [(1, "start"), (1, "end")]
        for event in settled:
            for payment in event.data.get("postings", []):
                if str(payment["reason"]).endswith("bank_load"):
                    expected[payment["to"].removeprefix("player:")] += BANK_LOAD
        wallet_client = wallet.client()
        assert wallet_client.balance(f"player:{ann}") == expected[ann]
        assert {p: wallet_client.balance(f"player:{p}") for p in players} == expected
        assert wallet_client.balance(f"bowl:{table_id}") == 0, "the bowl was split"
