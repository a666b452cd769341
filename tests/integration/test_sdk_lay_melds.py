"""The SDK's ``lay_melds`` sends each meld's kind when the caller gives one (the bots of
``kishpa play``/``kishpa bots`` do): ``J1 KH J2`` is the run Q K A only when it says so. A
real gRPC server on loopback records what arrives."""

from __future__ import annotations

import time
from typing import Any

import grpc
import pytest

from kishpa.common.v1 import common_pb2
from kishpa.table.v1 import table_pb2, table_pb2_grpc
from sdk.client import KishpaClient, Session

pytestmark = pytest.mark.integration


class RecordingTables(table_pb2_grpc.TableServiceServicer):
    def __init__(self) -> None:
        self.requests: list[table_pb2.LayMeldsRequest] = []

    async def LayMelds(self, request: Any, context: Any) -> Any:
        self.requests.append(request)
        return table_pb2.LayMeldsResponse()


async def test_lay_melds_sends_the_kinds_it_is_given() -> None:
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
            await client.lay_melds("t1", [[104, 12, 105], [1, 2, 3]], ["run", None])
            await client.lay_melds("t1", [[4, 5, 6]])
    finally:
        await server.stop(0)
    first, second = tables.requests
    assert [(list(m.tile_ids), m.kind) for m in first.melds] == [
        ([104, 12, 105], common_pb2.GROUP_KIND_RUN),
        ([1, 2, 3], common_pb2.GROUP_KIND_UNSPECIFIED),
    ]
    assert [m.kind for m in second.melds] == [common_pb2.GROUP_KIND_UNSPECIFIED]
    assert first.request_id != second.request_id
