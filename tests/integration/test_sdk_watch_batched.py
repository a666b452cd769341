"""The shipped Python clients watch tables batched: the SDK's ``watch_table`` (which
``kishpa play`` and ``kishpa bots`` use) asks for ``batched`` events and reads every event of
every message. A real gRPC server on loopback records what arrives."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest

from kishpa.table.v1 import table_pb2, table_pb2_grpc
from sdk.client import KishpaClient, Session

pytestmark = pytest.mark.integration


class RecordingTables(table_pb2_grpc.TableServiceServicer):
    """Answers WatchTable with two batched messages, the last closing the table."""

    def __init__(self) -> None:
        self.requests: list[table_pb2.WatchTableRequest] = []

    async def WatchTable(self, request: Any, context: Any) -> AsyncIterator[Any]:
        self.requests.append(request)
        yield table_pb2.WatchTableResponse(
            events=[
                table_pb2.TableEvent(event_id="1-0", round=1),
                table_pb2.TableEvent(event_id="1-1", round=1),
            ]
        )
        yield table_pb2.WatchTableResponse(
            events=[table_pb2.TableEvent(event_id="2-0", table_closed=table_pb2.TableClosed())]
        )


async def test_the_sdk_watches_batched_and_reads_every_event_of_a_message() -> None:
    tables = RecordingTables()
    server = grpc.aio.server()
    table_pb2_grpc.add_TableServiceServicer_to_server(tables, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            client = KishpaClient.over_channel(channel)
            now = time.time()
            client._session = Session("p1", "ann", "token", now, now + 3600)
            seen = [e.event_id async for e in client.watch_table("t1", "0-5")]
    finally:
        await server.stop(0)
    assert seen == ["1-0", "1-1", "2-0"]
    assert [(r.table_id, r.after_event_id, r.batched) for r in tables.requests] == [
        ("t1", "0-5", True)
    ]
