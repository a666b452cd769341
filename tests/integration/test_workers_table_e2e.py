"""The whole settlement path with the real table service: bots play a two-round game through
``kishpa serve table``; the table service writes the outbox and enqueues with
``workers.enqueue``; a ``kishpa worker`` settles every phase into ``kishpa serve wallet``.

All three are real subprocesses on the settlement suites' Redis (``workers_support.SHARED``:
db 13, or the cluster under ``--redis-cluster``) and free ports; the bots are the table
service's own gRPC bot players.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path

import grpc
import pytest

from kishpa.table.v1 import table_pb2, table_pb2_grpc
from kishpa.wallet.v1 import wallet_pb2
from services.common.auth import TokenAuthority, bearer_metadata
from shared import keys
from tests.integration.workers_support import (
    STARTING_TOKENS,
    TableHistory,
    wait_for,
)
from tests.reference_settlement import kishpa_movements
from tests.support.settled_games import TOKEN_SECRET, play_two_round_game, settlement_stack
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


async def _watched_settlements(port: int, table_id: str, player: str) -> list[table_pb2.TableEvent]:
    """The settled events a seated player receives through WatchTable from the start."""
    token = TokenAuthority(TOKEN_SECRET).issue_player_token(player, player).token
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = table_pb2_grpc.TableServiceStub(channel)
        stream = stub.WatchTable(
            table_pb2.WatchTableRequest(table_id=table_id),
            metadata=bearer_metadata(token),
            timeout=180,
        )
        return [
            response.event
            async for response in stream
            if response.event.WhichOneof("event") == "settled"
        ]


async def test_a_game_played_through_the_table_service_is_settled_into_the_wallet(
    tmp_path: Path,
) -> None:
    with settlement_stack(tmp_path) as stack:
        client, port, wallet = stack.client, stack.port, stack.wallet
        suffix = uuid.uuid4().hex[:8]
        players = [f"{name}-{suffix}" for name in ("ann", "bob", "cat")]
        stack.creators.append(players[0])
        # Redis keeps only live play (a round's events leave once the next is under way):
        # the stream's settled events are followed while the game is played.
        history = TableHistory(client).start()
        game = asyncio.create_task(play_two_round_game(port, players, stack.tables))
        await wait_until(lambda: stack.tables, timeout=60, message="the table to exist")
        watching = asyncio.create_task(_watched_settlements(port, stack.tables[-1], players[0]))
        table_id = await game
        outbox = {
            k.decode(): json.loads(v) for k, v in client.hgetall(keys.outbox(table_id)).items()
        }
        assert sorted(outbox) == ["1:end", "1:start", "2:end", "2:start"]
        wait_for(
            lambda: all(client.hexists(keys.settled(table_id), f) for f in outbox),
            60,
            "every phase of the game to be settled",
        )

        expected = dict.fromkeys(players, STARTING_TOKENS)
        for field in ("1:start", "1:end", "2:start", "2:end"):
            phase = field.split(":")[1]
            for account, change in kishpa_movements(phase, outbox[field]["record"]).items():
                if account in expected:
                    expected[account] += change
        wallet_client = wallet.client()
        assert {p: wallet_client.balance(f"player:{p}") for p in players} == expected
        assert wallet_client.balance(f"bowl:{table_id}") == 0
        assert sum(expected.values()) == STARTING_TOKENS * len(players)

        stored = client.hgetall(keys.balances(table_id))
        assert {k.decode(): int(v) for k, v in stored.items()} == expected
        await wait_until(
            lambda: len(history.settled([table_id])) == 4, timeout=30, message="4 settled"
        )
        history.stop()
        phases = ["1:start", "1:end", "2:start", "2:end"]
        assert history.settled([table_id]) == [(table_id, p) for p in phases]
        assert history.settled_data(table_id)["2:end"]["balances"] == expected
        # A player following the table receives every settlement through WatchTable: the
        # stream goes on after table_closed until the last phase is settled.
        watched = await watching
        assert [(w.round, w.settled.phase) for w in watched] == [
            (1, table_pb2.SETTLEMENT_PHASE_START),
            (1, table_pb2.SETTLEMENT_PHASE_END),
            (2, table_pb2.SETTLEMENT_PHASE_START),
            (2, table_pb2.SETTLEMENT_PHASE_END),
        ]
        assert dict(watched[-1].settled.balances) == expected
        # Who paid whom and why: the payments of every settlement, applied to the starting
        # tokens, are the final balances (and every one names its reason).
        replayed = dict.fromkeys(players, STARTING_TOKENS)
        for w in watched:
            for p in w.settled.payments:
                assert p.reason != wallet_pb2.TRANSFER_REASON_UNSPECIFIED
                for account, sign in ((p.from_account, -1), (p.to_account, 1)):
                    if account.startswith("player:"):
                        replayed[account.removeprefix("player:")] += sign * p.amount
        assert replayed == expected
        # The table closed and everything is settled: its settlement keys expire with it.
        assert client.ttl(keys.outbox(table_id)) > 0
        assert client.ttl(keys.settled(table_id)) > 0
