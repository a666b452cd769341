"""Two real ``kishpa serve table`` processes serve one table; one dies by kill -9 and the game
goes on through the other, its timers included."""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from redis.asyncio import Redis

from cli.play.bot import BotPlayer
from games.kishpa import round as rnd
from kishpa.common.v1 import common_pb2
from kishpa.table.v1 import table_pb2, table_pb2_grpc
from sdk import KishpaError, table_settings
from services.common.auth import TokenAuthority, bearer_metadata
from services.common.redis_client import async_client
from shared import keys
from tests.conftest import TEST_REDIS_URL
from tests.integration.stream_wait import until_new_entry

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture(scope="session")
def redis_url() -> str:
    """A Redis database of the table tests' own (db 11 of the test server unless
    ``TEST_TABLE_REDIS_URL`` says otherwise): the deadline index is per database, and table
    services of other tests on the shared machine must not claim these tables' timers."""
    own = os.environ.get("TEST_TABLE_REDIS_URL")
    return own or urlunsplit(urlsplit(TEST_REDIS_URL)._replace(path="/11"))


ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Replica:
    """One ``kishpa serve table`` subprocess."""

    def __init__(self, env: dict[str, str]) -> None:
        self.port = _free_port()
        self.env = {
            **env,
            "KISHPA_GRPC_HOST": "127.0.0.1",
            "KISHPA_GRPC_PORT": str(self.port),
            "KISHPA_METRICS_PORT": str(_free_port()),
        }
        self.process = subprocess.Popen(
            [sys.executable, "-m", "cli.main", "serve", "table"],
            cwd=ROOT,
            env=self.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def wait_serving(self, within: float = 30.0) -> None:
        loop = asyncio.get_running_loop()
        until = loop.time() + within
        async with grpc.aio.insecure_channel(self.address) as channel:
            health = health_pb2_grpc.HealthStub(channel)
            while loop.time() < until:
                if self.process.poll() is not None:
                    err = self.process.stderr.read().decode() if self.process.stderr else ""
                    raise AssertionError(f"replica exited: {err[-2000:]}")
                try:
                    reply = await health.Check(health_pb2.HealthCheckRequest(), timeout=1)
                    if reply.status == health_pb2.HealthCheckResponse.SERVING:
                        return
                except grpc.aio.AioRpcError:
                    pass
                await asyncio.sleep(0.2)
        raise AssertionError("replica did not start serving")

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)


@pytest.fixture
def secrets_env(redis_url: str) -> dict[str, str]:
    return {
        **os.environ,
        "REDIS_URL": redis_url,
        # Celery's Redis broker does not speak Cluster: under --redis-cluster it is a node.
        "KISHPA_BROKER_URL": os.environ.get("TEST_BROKER_URL") or redis_url,
        "KISHPA_TOKEN_SECRET": secrets.token_urlsafe(48),
        "KISHPA_SERVICE_SECRET": secrets.token_urlsafe(48),
        "KISHPA_TABLE_ENQUEUE": "0",
        "KISHPA_LOG_FORMAT": "json",
    }


@pytest.fixture
def replicas(secrets_env: dict[str, str]) -> Iterator[list[Replica]]:
    started = [Replica(secrets_env), Replica(secrets_env)]
    try:
        yield started
    finally:
        for replica in started:
            replica.kill()
            if replica.process.stderr:
                replica.process.stderr.close()


@pytest.fixture
async def redis(redis_url: str) -> AsyncIterator[Redis]:
    client = async_client(redis_url)
    yield client
    await client.aclose()


async def _events(redis: Redis, table_id: str) -> list[tuple[str, dict[str, Any]]]:
    entries = await redis.xrange(keys.events(table_id))
    return [(f[b"type"].decode(), json.loads(f[b"data"])) for _, f in entries]


async def _try_play(player: BotPlayer, table_id: str) -> bool:
    """The bot's move if it has one; a replica's timer may have moved the table first."""
    try:
        return await player.play(table_id, await player.view(table_id)) is not None
    except KishpaError as raced:
        if raced.code != grpc.StatusCode.FAILED_PRECONDITION:
            raise
        return False


async def test_two_replicas_serve_one_table_and_one_dies_mid_game(
    replicas: list[Replica], secrets_env: dict[str, str], redis: Redis
) -> None:
    await asyncio.gather(*(r.wait_serving() for r in replicas))
    authority = TokenAuthority(secrets_env["KISHPA_TOKEN_SECRET"])
    suffix = uuid.uuid4().hex[:8]
    players = [f"{p}-{suffix}" for p in ("ann", "bob", "cat", "dan")]
    tokens = {p: authority.issue_player_token(p, p).token for p in players}
    channels = [grpc.aio.insecure_channel(r.address) for r in replicas]
    stubs = [table_pb2_grpc.TableServiceStub(c) for c in channels]
    table_id = ""
    try:
        # Every call goes to the other replica than the one before.
        created = await stubs[0].CreateTable(
            table_pb2.CreateTableRequest(
                settings=table_settings(
                    common_pb2.GAME_KISHPA,
                    4,
                    turn_seconds=1,
                    reveal_window_seconds=1,
                    next_round_pause_ms=100,
                ),
                request_id=uuid.uuid4().hex,
            ),
            metadata=bearer_metadata(tokens[players[0]]),
        )
        table_id = created.table.table_id
        for n, p in enumerate(players[1:]):
            await stubs[(n + 1) % 2].JoinTable(
                table_pb2.JoinTableRequest(table_id=table_id, request_id=uuid.uuid4().hex),
                metadata=bearer_metadata(tokens[p]),
            )
        await stubs[0].StartGame(
            table_pb2.StartGameRequest(table_id=table_id, request_id=uuid.uuid4().hex),
            metadata=bearer_metadata(tokens[players[0]]),
        )
        bots = [
            [BotPlayer(channels[k], tokens[p], bytes([n + 1]) * 80) for n, p in enumerate(players)]
            for k in range(2)
        ]
        moves = 0
        for step in range(40):  # the two replicas alternately take the bots' moves
            for seat in range(4):
                moves += await _try_play(bots[step % 2][seat], table_id)
        assert moves >= 20

        # Nobody moves: the replicas' timers play the turns (and seats go on auto-play).
        # (A deadline wait: fails if no timer fires within 30 s; turns last 1 s here.)
        before = await _events(redis, table_id)
        await until_new_entry(redis, table_id, len(before), "turn_timed_out")

        replicas[0].kill()  # kill -9 mid-game
        killed_at = len(await _events(redis, table_id))
        # The survivor's timers go on.
        await until_new_entry(redis, table_id, killed_at, "turn_timed_out")

        # The survivor still takes moves, and the table is whole.
        for _ in range(30):
            for seat in range(4):
                await _try_play(bots[1][seat], table_id)
        _, raw = await redis.hmget(keys.state(table_id), ["version", "state"])  # type: ignore[misc]
        state = json.loads(raw)
        rnd.tile_places(rnd.RoundState.from_dict(state["game"]["round"]))
        with pytest.raises(grpc.aio.AioRpcError) as dead:
            await stubs[0].GetTable(
                table_pb2.GetTableRequest(table_id=table_id),
                metadata=bearer_metadata(tokens[players[0]]),
                timeout=2,
            )
        assert dead.value.code() in (
            grpc.StatusCode.UNAVAILABLE,
            grpc.StatusCode.DEADLINE_EXCEEDED,
        )
        view = await bots[1][0].view(table_id)
        assert view.status == table_pb2.TABLE_STATUS_PLAYING
        assert replicas[1].process.poll() is None
    finally:
        for channel in channels:
            await channel.close()
        if table_id:
            await redis.delete(
                keys.state(table_id),
                keys.events(table_id),
                keys.requests(table_id),
                keys.outbox(table_id),
            )
            await redis.zrem(keys.deadlines(table_id), table_id)
            await redis.zrem(keys.unsettled(table_id), table_id)
