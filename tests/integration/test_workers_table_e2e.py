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
import secrets
import time
import uuid
from pathlib import Path

import grpc
import pytest

from cli.play.bot import BotPlayer
from kishpa.common.v1 import common_pb2
from kishpa.table.v1 import table_pb2, table_pb2_grpc
from kishpa.wallet.v1 import wallet_pb2
from sdk import table_settings
from services.common.auth import TokenAuthority, bearer_metadata
from shared import keys, stream
from tests.integration.workers_support import (
    SHARED,
    STARTING_TOKENS,
    Wallet,
    Worker,
    free_port,
    start_table_service,
    wait_for,
)
from tests.reference_settlement import kishpa_movements

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

TOKEN_SECRET = secrets.token_urlsafe(48)


async def _play_two_round_game(
    port: int, players: list[str], created_ids: list[str], stake: int = 1
) -> str:
    authority = TokenAuthority(TOKEN_SECRET)
    md = {p: bearer_metadata(authority.issue_player_token(p, p).token) for p in players}
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = table_pb2_grpc.TableServiceStub(channel)
        created = await stub.CreateTable(
            table_pb2.CreateTableRequest(
                settings=table_settings(
                    common_pb2.GAME_KISHPA,
                    len(players),
                    stake=stake,
                    turn_seconds=60,
                    reveal_window_seconds=1,  # a window nobody acts in closes soon
                    next_round_pause_ms=30,
                ),
                request_id=uuid.uuid4().hex,
            ),
            metadata=md[players[0]],
        )
        table_id = created.table.table_id
        created_ids.append(table_id)  # cleaned up even if the game fails
        for p in players[1:]:
            await stub.JoinTable(
                table_pb2.JoinTableRequest(table_id=table_id, request_id=uuid.uuid4().hex),
                metadata=md[p],
            )
        await stub.StartGame(
            table_pb2.StartGameRequest(table_id=table_id, request_id=uuid.uuid4().hex),
            metadata=md[players[0]],
        )
        # Pressed during round 1: round 2 is the last, and its end empties the bowl.
        await stub.PressLastRound(
            table_pb2.PressLastRoundRequest(table_id=table_id, request_id=uuid.uuid4().hex),
            metadata=md[players[0]],
        )
        bots = [
            BotPlayer(channel, authority.issue_player_token(p, p).token, bytes([n + 40]) * 80)
            for n, p in enumerate(players)
        ]
        idle_since = time.monotonic()
        while time.monotonic() - idle_since < 60:
            view = await bots[0].view(table_id)
            if view.status == table_pb2.TABLE_STATUS_CLOSED:
                return table_id
            moved = False
            for bot in bots:
                if await bot.play(table_id, await bot.view(table_id)) is not None:
                    moved = True
            if moved:
                idle_since = time.monotonic()
            else:
                await asyncio.sleep(0.05)  # the table's deadline loop closes windows, starts rounds
    raise AssertionError(f"the game stalled: {view}")


async def _watched_settlements(port: int, table_id: str, player: str) -> list[table_pb2.TableEvent]:
    """The settled events a seated player receives through WatchTable from the start."""
    token = TokenAuthority(TOKEN_SECRET).issue_player_token(player, player).token
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = table_pb2_grpc.TableServiceStub(channel)
        stream = stub.WatchTable(
            table_pb2.WatchTableRequest(table_id=table_id),
            metadata=bearer_metadata(token),
            timeout=30,
        )
        return [
            response.event
            async for response in stream
            if response.event.WhichOneof("event") == "settled"
        ]


async def test_a_game_played_through_the_table_service_is_settled_into_the_wallet(
    tmp_path: Path,
) -> None:
    wallet = Wallet(free_port(), tmp_path / "wallet.sqlite3", SHARED).start(tmp_path / "wallet.log")
    worker = Worker(wallet.addr, tmp_path / "worker.log", SHARED).start(concurrency=2)
    table_process, port = start_table_service(tmp_path, worker, wallet, TOKEN_SECRET)
    client = SHARED.client()
    suffix = uuid.uuid4().hex[:8]
    players = [f"{name}-{suffix}" for name in ("ann", "bob", "cat")]
    created_ids: list[str] = []
    try:
        table_id = await _play_two_round_game(port, players, created_ids)
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
        settled = [
            stream.decode(f)
            for _, f in client.xrange(keys.events(table_id))
            if f[b"type"] == b"settled"
        ]
        assert [(e.round, e.data["phase"]) for e in settled] == [
            (1, "start"),
            (1, "end"),
            (2, "start"),
            (2, "end"),
        ]
        assert settled[-1].data["balances"] == expected
        # A player following the table receives every settlement through WatchTable: the
        # stream goes on after table_closed until the last phase is settled.
        watched = await _watched_settlements(port, table_id, players[0])
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
    finally:
        for process in (table_process, wallet.process):
            if process is not None:
                process.stop()
        worker.stop()
        for table in created_ids:
            for key in (
                keys.state,
                keys.events,
                keys.requests,
                keys.outbox,
                keys.settled,
                keys.balances,
            ):
                client.delete(key(table))
            client.zrem(keys.deadlines(table), table)
            client.zrem(keys.unsettled(table), table)
        for key in client.scan_iter(match=f"kishpa:create:{players[0]}:*"):
            client.delete(key)
        client.close()
