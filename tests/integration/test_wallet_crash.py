"""``kill -9`` of a real ``kishpa serve wallet`` process in the middle of a batch storm.

After a restart every batch the client saw acknowledged is present exactly once, none is
half-applied (reconciliation is clean), and the in-flight ones either committed whole or not
at all (resending them applies each exactly once).
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from sqlalchemy import func, select

from devkit.postgres import temporary_postgres_database
from kishpa.wallet.v1 import wallet_pb2, wallet_pb2_grpc
from services.common.auth import TokenAuthority, bearer_metadata
from services.wallet import schema
from services.wallet.batch import Posting, plan_batch
from services.wallet.database import create_wallet_engine
from services.wallet.migrate import upgrade
from services.wallet.reconcile import reconcile_url
from tests.conftest import TEST_DATABASE_URL
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.slow]

TOKEN_SECRET = "t" * 40
SERVICE_SECRET = "s" * 40
KISHPA = str(Path(sys.executable).parent / "kishpa")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(params=["postgres", "sqlite"])
def wallet_db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'wallet.sqlite3'}"
        upgrade(url)
        yield url
        return
    with temporary_postgres_database(TEST_DATABASE_URL) as url:
        upgrade(url)
        yield url


class WalletProcess:
    """``kishpa serve wallet`` as a real child process."""

    def __init__(self, url: str, log: Path) -> None:
        self.port = free_port()
        self.env = {
            **os.environ,
            "DATABASE_URL": url,
            "KISHPA_GRPC_HOST": "127.0.0.1",
            "KISHPA_GRPC_PORT": str(self.port),
            "KISHPA_METRICS_PORT": str(free_port()),
            "KISHPA_TOKEN_SECRET": TOKEN_SECRET,
            "KISHPA_SERVICE_SECRET": SERVICE_SECRET,
            "KISHPA_LOG_FORMAT": "json",
        }
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                [KISHPA, "serve", "wallet"], env=self.env, stdout=out, stderr=out
            )

    async def wait_serving(self, within: float = 30) -> None:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{self.port}") as channel:
            health = health_pb2_grpc.HealthStub(channel)

            async def serving() -> bool:
                assert self.proc is not None
                if self.proc.poll() is not None:
                    pytest.fail(
                        f"wallet exited with {self.proc.returncode}: {self.log.read_text()[-2000:]}"
                    )
                try:
                    reply = await health.Check(health_pb2.HealthCheckRequest(), timeout=1)
                except grpc.aio.AioRpcError:
                    return False
                return bool(reply.status == health_pb2.HealthCheckResponse.SERVING)

            await wait_until(serving, timeout=within, interval=0.1, message="the wallet to serve")

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)

    def terminate(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def request_for(key: str, postings: list[Posting]) -> wallet_pb2.ApplyBatchRequest:
    return wallet_pb2.ApplyBatchRequest(
        request_id=key,
        postings=[
            wallet_pb2.Posting(
                from_account=p.from_account,
                to_account=p.to_account,
                amount=p.amount,
                reason=wallet_pb2.TransferReason.Value("TRANSFER_REASON_" + p.reason.upper()),
            )
            for p in postings
        ],
    )


async def test_kill_9_mid_storm_loses_no_acknowledged_batch_and_half_applies_none(
    wallet_db: str, tmp_path: Path
) -> None:
    svc = bearer_metadata(
        TokenAuthority(TOKEN_SECRET, SERVICE_SECRET).issue_service_token("worker").token
    )
    wallet = WalletProcess(wallet_db, tmp_path / "wallet.log")
    wallet.start()
    try:
        await wallet.wait_serving()
        address = f"127.0.0.1:{wallet.port}"
        players = [f"crash{i}-{os.getpid()}" for i in range(8)]
        async with grpc.aio.insecure_channel(address) as channel:
            stub = wallet_pb2_grpc.WalletServiceStub(channel)
            for p in players:
                await stub.OpenWallet(wallet_pb2.OpenWalletRequest(player_id=p), metadata=svc)
        accounts = [f"player:{p}" for p in players] + ["bowl:crashtable"]
        sent: dict[str, list[Posting]] = {}
        acked: dict[str, int] = {}
        stop, enough = asyncio.Event(), asyncio.Event()
        failures: list[grpc.StatusCode] = []

        async def client(n: int) -> None:
            rng = random.Random(n)
            async with grpc.aio.insecure_channel(address) as channel:
                stub = wallet_pb2_grpc.WalletServiceStub(channel)
                i = 0
                while not stop.is_set():
                    postings = []
                    for _ in range(4):
                        src, dst = rng.sample(accounts[:-1], 2)
                        postings.append(
                            Posting(
                                src, rng.choice([dst, accounts[-1]]), rng.randint(1, 300), "win"
                            )
                        )
                    key = f"storm-{n}-{i}"
                    i += 1
                    sent[key] = postings
                    try:
                        reply = await stub.ApplyBatch(
                            request_for(key, postings), metadata=svc, timeout=5
                        )
                    except grpc.aio.AioRpcError as exc:
                        failures.append(exc.code())
                        return  # the server is gone: this key's fate is unknown
                    acked[key] = reply.batch_id
                    if len(acked) >= 60:
                        enough.set()

        clients = [asyncio.create_task(client(n)) for n in range(8)]
        await asyncio.wait_for(enough.wait(), 60)
        wallet.kill9()
        stop.set()
        await asyncio.gather(*clients)
        assert set(failures) <= {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED}
        unknown = set(sent) - set(acked)

        wallet.start()
        await wallet.wait_serving()
        async with grpc.aio.insecure_channel(address) as channel:
            stub = wallet_pb2_grpc.WalletServiceStub(channel)
            for key, batch_id in acked.items():
                again = await stub.ApplyBatch(request_for(key, sent[key]), metadata=svc)
                assert again.replayed, key
                assert again.batch_id == batch_id
            # In-flight batches committed whole or not at all; resending applies them once.
            results = {
                key: await stub.ApplyBatch(request_for(key, sent[key]), metadata=svc)
                for key in sorted(unknown)
            }
            final = {
                a: (
                    await stub.GetBalance(wallet_pb2.GetBalanceRequest(account=a), metadata=svc)
                ).balance.tokens
                for a in accounts
            }
    finally:
        wallet.terminate()

    engine = create_wallet_engine(wallet_db, pool_size=1)
    try:
        with engine.connect() as conn:
            b = schema.batches.c
            rows = conn.execute(
                select(b.idempotency_key, func.count())
                .where(b.idempotency_key.like("storm-%"))
                .group_by(b.idempotency_key)
            ).all()
    finally:
        engine.dispose()
    assert {key: n for key, n in rows} == dict.fromkeys(sent, 1)
    report = reconcile_url(wallet_db)
    assert report.ok, report.discrepancies

    order = sorted(
        [*acked.items(), *((k, r.batch_id) for k, r in results.items())], key=lambda kv: kv[1]
    )
    expected = {a: (2000 if a.startswith("player:") else 0) for a in accounts}
    for key, _ in order:
        expected = {
            a: v for a, v in plan_batch(sent[key], expected).balances.items() if a in expected
        }
    assert final == expected


def test_serve_refuses_a_postgres_database_that_is_not_migrated(tmp_path: Path) -> None:
    with temporary_postgres_database(TEST_DATABASE_URL) as url:
        wallet = WalletProcess(url, tmp_path / "wallet.log")
        wallet.start()
        assert wallet.proc is not None
        assert wallet.proc.wait(timeout=60) == 2
    assert "run `kishpa migrate` first" in wallet.log.read_text()
