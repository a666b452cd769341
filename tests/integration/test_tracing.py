"""One round phase's settlement is one trace: table service -> Celery -> worker -> wallet.

Everything real and in this process, so one in-memory exporter sees every span: the table
service (grpc.aio, Redis db 11), a Celery worker thread (``start_worker``) consuming a queue
of this test's own on that Redis, running the real ``kishpa.settle_phase`` task, and the
wallet (grpc.aio, SQLite). The only thing configured differently from production is where
spans go (memory instead of OTLP).
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import grpc
import pytest
import redis as sync_redis
from celery.contrib.testing.worker import start_worker
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from kishpa.common.v1 import common_pb2
from kishpa.table.v1 import table_pb2, table_pb2_grpc
from sdk import table_settings
from services.common.auth import TokenAuthority, bearer_metadata
from services.common.settings import load_settings
from services.common.tracing import configure_tracing, shutdown_tracing, trace_id_of
from services.table.server import create_table_server
from services.wallet.migrate import upgrade
from services.wallet.server import create_wallet_server
from shared import keys
from shared.celery_enqueue import CeleryEnqueue
from shared.phase_record import parse_phase_record
from shared.tasks import SETTLE_TASK
from tests.conftest import TEST_REDIS_URL
from tests.support.waiting import wait_until
from workers import config as worker_config_module
from workers import settlement
from workers.celery_app import celery_settings

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SECRETS = {"token_secret": "t" * 40, "service_secret": "s" * 40}
REDIS_URL = os.environ.get("TEST_TABLE_REDIS_URL") or urlunsplit(
    urlsplit(TEST_REDIS_URL)._replace(path="/11")
)


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    spans = InMemorySpanExporter()
    configure_tracing("test", exporter=spans)
    try:
        yield spans
    finally:
        shutdown_tracing()


def _clear_worker_caches() -> None:
    worker_config_module.worker_config.cache_clear()
    settlement.redis_client.cache_clear()
    settlement.wallet_client.cache_clear()


async def test_a_settlement_is_one_trace_from_the_action_to_the_wallet_commit(
    exporter: InMemorySpanExporter,
    tmp_path: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    queue = f"trace-{uuid.uuid4().hex[:8]}"
    database_url = f"sqlite:///{tmp_path / 'wallet.sqlite3'}"
    upgrade(database_url)
    wallet = create_wallet_server(
        load_settings("wallet", database_url=database_url, grpc_port=0, **SECRETS),
        address="127.0.0.1:0",
    )
    await wallet.start()
    table = create_table_server(
        load_settings("table", redis_url=REDIS_URL, grpc_port=0, **SECRETS),
        address="127.0.0.1:0",
        enqueue=CeleryEnqueue(REDIS_URL, queue=queue),
        timers=False,
    )
    await table.start()
    # The worker reads its configuration from the environment, as `kishpa worker` does.
    for name, value in {
        "REDIS_URL": REDIS_URL,
        "KISHPA_BROKER_URL": REDIS_URL,
        "KISHPA_WALLET_ADDR": f"127.0.0.1:{wallet.port}",
        "KISHPA_SERVICE_SECRET": SECRETS["service_secret"],
        "KISHPA_WORKER_QUEUE": queue,
    }.items():
        monkeypatch.setenv(name, value)
    _clear_worker_caches()
    from celery import Celery

    worker_app = Celery("kishpa-trace-test", set_as_current=False)
    worker_app.conf.update(celery_settings(worker_config_module.worker_config()))
    worker_app.task(name=SETTLE_TASK, acks_late=True)(settlement.settle_phase.run)
    sync = sync_redis.Redis.from_url(REDIS_URL)
    authority = TokenAuthority(SECRETS["token_secret"], SECRETS["service_secret"])
    players = [f"tr{i}-{uuid.uuid4().hex[:6]}" for i in range(2)]
    md = {p: bearer_metadata(authority.issue_player_token(p, p).token) for p in players}
    table_id = ""
    try:
        with start_worker(worker_app, pool="solo", perform_ping_check=False, queues=[queue]):
            async with grpc.aio.insecure_channel(f"127.0.0.1:{table.port}") as channel:
                stub = table_pb2_grpc.TableServiceStub(channel)
                created = await stub.CreateTable(
                    table_pb2.CreateTableRequest(
                        settings=table_settings(
                            common_pb2.GAME_KISHPA, 2, reveal_window_seconds=600
                        ),
                        request_id=uuid.uuid4().hex,
                    ),
                    metadata=md[players[0]],
                )
                table_id = created.table.table_id
                await stub.JoinTable(
                    table_pb2.JoinTableRequest(table_id=table_id, request_id="join"),
                    metadata=md[players[1]],
                )
                view = (
                    await stub.StartGame(
                        table_pb2.StartGameRequest(table_id=table_id, request_id="start"),
                        metadata=md[players[0]],
                    )
                ).table
                if view.round.phase == table_pb2.ROUND_PHASE_START_REVEAL:
                    for p in players:  # the last pass closes the window: the start phase
                        with contextlib.suppress(grpc.aio.AioRpcError):
                            await stub.DeclineReveal(
                                table_pb2.DeclineRevealRequest(table_id=table_id, request_id="d"),
                                metadata=md[p],
                            )
            await wait_until(
                lambda: sync.hexists(keys.settled(table_id), "1:start"),
                timeout=60,
                message="the worker to settle the start phase",
            )
        record = parse_phase_record(sync.hget(keys.outbox(table_id), "1:start") or b"")
    finally:
        _clear_worker_caches()
        await table.stop(0)
        await wallet.stop(1)
        if table_id:
            sync.delete(
                *(f(table_id) for f in (keys.state, keys.events, keys.requests, keys.outbox)),
                keys.settled(table_id),
                keys.balances(table_id),
            )
            sync.zrem(keys.unsettled(table_id), table_id)
        sync.close()

    trace_id = trace_id_of(record.trace)
    assert trace_id, "the phase record names the trace of the commit that wrote it"
    spans = [s for s in exporter.get_finished_spans() if _trace(s) == trace_id]
    by_id = {s.context.span_id: s for s in spans if s.context is not None}
    names = [(s.name, s.kind) for s in spans]

    def one(match: Any) -> ReadableSpan:
        found = [s for s in spans if match(s)]
        assert found, f"no such span in the trace; it has {names}"
        return found[0]

    action = one(
        lambda s: s.kind == SpanKind.SERVER and s.name.startswith("/kishpa.table.v1.TableService/")
    )
    publish = one(lambda s: s.kind == SpanKind.PRODUCER and SETTLE_TASK in s.name)
    task = one(lambda s: s.kind == SpanKind.CONSUMER and SETTLE_TASK in s.name)
    wallet_call = one(
        lambda s: (
            s.kind == SpanKind.SERVER and s.name == "/kishpa.wallet.v1.WalletService/ApplyBatch"
        )
    )
    one(lambda s: s.kind == SpanKind.CLIENT and "redis" in str(s.attributes.get("db.system")))
    sql = [s for s in spans if str((s.attributes or {}).get("db.system", "")) == "sqlite"]
    assert sql, f"no SQL span under the wallet call; the trace has {names}"

    def ancestors(span: ReadableSpan) -> list[ReadableSpan]:
        chain = []
        while span.parent is not None and span.parent.span_id in by_id:
            span = by_id[span.parent.span_id]
            chain.append(span)
        return chain

    # The root is the player's own call (the client is instrumented too), then the service.
    assert [(s.kind, s.name) for s in ancestors(action)] == [(SpanKind.CLIENT, action.name)]
    assert action in ancestors(publish)
    assert publish in ancestors(task)
    assert task in ancestors(wallet_call)
    assert any(wallet_call in ancestors(s) for s in sql), "the ledger's SQL runs in the wallet call"


def _trace(span: ReadableSpan) -> str:
    return format(span.context.trace_id, "032x") if span.context is not None else ""
