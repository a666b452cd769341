"""The settlement hand-off end to end through real processes: ``kishpa serve table`` writes
the phase records and enqueues, a ``kishpa worker`` settles them on ``kishpa serve wallet``,
and the players see their new balances in the table's view and its ``settled`` events.

Isolation: a Redis database of our own for the tables and the broker (db 12 unless
``TEST_TABLE_E2E_REDIS_URL`` says otherwise), a unique queue, a wallet on SQLite in a temp dir.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import socket
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import grpc
import pytest
from redis.asyncio import Redis

from cli.play.bot import BotPlayer
from kishpa.common.v1 import common_pb2
from kishpa.table.v1 import table_pb2, table_pb2_grpc
from sdk import table_settings
from services.common.auth import TokenAuthority, bearer_metadata
from services.common.redis_client import async_client
from shared import keys
from tests.child_env import TEST_LIMITS_PREFIX
from tests.reference_settlement import kishpa_movements

pytestmark = [pytest.mark.integration, pytest.mark.slow]

REDIS_URL = os.environ.get("TEST_TABLE_E2E_REDIS_URL", "redis://127.0.0.1:6379/12")
# Celery's Redis broker does not speak Cluster: under ``--redis-cluster`` it stays on a node.
BROKER_URL = os.environ.get("TEST_BROKER_URL") or REDIS_URL
KISHPA = str(Path(sys.executable).with_name("kishpa"))
STARTING_TOKENS = 2000


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _tail(log: Path) -> str:
    """The end of a child's log, for the failure message."""
    return log.read_text(errors="replace")[-3000:]


async def _listening(port: int, log: Path) -> None:
    for _ in range(300):
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        await asyncio.sleep(0.1)
    raise AssertionError(f"{log.name} did not listen:\n{_tail(log)}")


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[dict[str, str]]:
    """Wallet, worker and table service processes sharing secrets, Redis and a queue."""
    base = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("KISHPA_", "REDIS_")) or k.startswith(TEST_LIMITS_PREFIX)
    }
    base.pop("DATABASE_URL", None)
    wallet_port, table_port = _free_port(), _free_port()
    base.update(
        REDIS_URL=REDIS_URL,
        KISHPA_BROKER_URL=BROKER_URL,
        KISHPA_TOKEN_SECRET=secrets.token_urlsafe(48),
        KISHPA_SERVICE_SECRET=secrets.token_urlsafe(48),
        KISHPA_WORKER_QUEUE=f"ftest-{uuid.uuid4().hex[:10]}",
        KISHPA_WALLET_ADDR=f"127.0.0.1:{wallet_port}",
        KISHPA_GRPC_HOST="127.0.0.1",
        KISHPA_LOG_FORMAT="json",
        KISHPA_RECONCILE_INTERVAL="0",
    )
    commands = {
        "wallet": (
            ["serve", "wallet"],
            {
                "DATABASE_URL": f"sqlite:///{tmp_path / 'wallet.sqlite3'}",
                "KISHPA_GRPC_PORT": str(wallet_port),
            },
        ),
        "worker": (["worker", "--concurrency=2"], {}),
        "table": (["serve", "table"], {"KISHPA_GRPC_PORT": str(table_port)}),
    }
    processes: list[subprocess.Popen[bytes]] = []
    try:
        for name, (argv, extra) in commands.items():
            env = {**base, **extra, "KISHPA_METRICS_PORT": str(_free_port())}
            with (tmp_path / f"{name}.log").open("wb") as log:
                processes.append(
                    subprocess.Popen(
                        [KISHPA, *argv], env=env, stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path
                    )
                )
        yield {
            **base,
            "wallet_port": str(wallet_port),
            "table_port": str(table_port),
            "logs": str(tmp_path),
        }
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)


@pytest.fixture
async def redis() -> AsyncIterator[Redis]:
    client = async_client(REDIS_URL)
    yield client
    await client.aclose()


async def test_a_round_is_settled_and_its_balances_reach_the_table(
    stack: dict[str, str], redis: Redis
) -> None:
    logs = Path(stack["logs"])
    table_port = int(stack["table_port"])
    # Both servers must listen before the game; the worker connects to the broker itself.
    await _listening(int(stack["wallet_port"]), logs / "wallet.log")
    await _listening(table_port, logs / "table.log")
    authority = TokenAuthority(stack["KISHPA_TOKEN_SECRET"])
    suffix = uuid.uuid4().hex[:8]
    players = [f"settle-{suffix}-a", f"settle-{suffix}-b"]
    tokens = {p: authority.issue_player_token(p, p).token for p in players}
    table_id = ""
    async with grpc.aio.insecure_channel(f"127.0.0.1:{table_port}") as channel:
        stub = table_pb2_grpc.TableServiceStub(channel)
        try:
            created = await stub.CreateTable(
                table_pb2.CreateTableRequest(
                    settings=table_settings(
                        common_pb2.GAME_KISHPA,
                        2,
                        turn_seconds=60,
                        reveal_window_seconds=60,
                        next_round_pause_ms=60_000,  # stay between rounds while we look
                    ),
                    request_id=uuid.uuid4().hex,
                ),
                metadata=bearer_metadata(tokens[players[0]]),
            )
            table_id = created.table.table_id
            await stub.JoinTable(
                table_pb2.JoinTableRequest(table_id=table_id, request_id="join"),
                metadata=bearer_metadata(tokens[players[1]]),
            )
            await stub.StartGame(
                table_pb2.StartGameRequest(table_id=table_id, request_id="start"),
                metadata=bearer_metadata(tokens[players[0]]),
            )
            bots = [
                BotPlayer(channel, tokens[p], bytes([n + 1]) * 80) for n, p in enumerate(players)
            ]
            for _ in range(400):  # play round 1 to its end
                view = await bots[0].view(table_id)
                if view.round.phase == table_pb2.ROUND_PHASE_ENDED:
                    break
                for bot in bots:
                    await bot.play(table_id, await bot.view(table_id))
            else:
                raise AssertionError("round 1 did not end")

            # The worker settles both phases; the settled events and balances come back.
            settled: dict[bytes, bytes] = {}
            for _ in range(600):
                settled = await redis.hgetall(keys.settled(table_id))  # type: ignore[misc]
                if {b"1:start", b"1:end"} <= set(settled):
                    break
                await asyncio.sleep(0.1)
            else:
                queued = await redis.llen(stack["KISHPA_WORKER_QUEUE"])  # type: ignore[misc]
                outbox_fields = await redis.hkeys(keys.outbox(table_id))  # type: ignore[misc]
                raise AssertionError(
                    f"round 1 was not settled (outbox {outbox_fields}, {queued} queued); "
                    f"worker log:\n{_tail(logs / 'worker.log')}\n"
                    f"table log:\n{_tail(logs / 'table.log')}"
                )
            outbox = await redis.hgetall(keys.outbox(table_id))  # type: ignore[misc]
            expected = dict.fromkeys(players, STARTING_TOKENS)
            for phase in ("start", "end"):
                record = json.loads(outbox[f"1:{phase}".encode()])["record"]
                for account, change in kishpa_movements(phase, record).items():
                    if account in expected:
                        expected[account] += change
            view = (
                await stub.GetTable(
                    table_pb2.GetTableRequest(table_id=table_id),
                    metadata=bearer_metadata(tokens[players[0]]),
                )
            ).table
            assert {s.player_id: s.balance for s in view.seats} == expected
            types = []
            call = stub.WatchTable(
                table_pb2.WatchTableRequest(table_id=table_id),
                metadata=bearer_metadata(tokens[players[1]]),
            )
            async for item in call:
                types.append(item.event.WhichOneof("event"))
                if types.count("settled") == 2:
                    break
            call.cancel()
            assert types.count("settled") == 2
        finally:
            if table_id:
                await redis.delete(
                    keys.state(table_id),
                    keys.events(table_id),
                    keys.requests(table_id),
                    keys.outbox(table_id),
                    keys.settled(table_id),
                    keys.balances(table_id),
                )
                await redis.zrem(keys.deadlines(table_id), table_id)
                await redis.zrem(keys.unsettled(table_id), table_id)
