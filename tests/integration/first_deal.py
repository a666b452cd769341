"""A lone creator's first deal: a table he opened with house bots waits for his contribution
(docs/fairness.md, "The deal's seats"); these tests' raw-stub clients send it, as the SDK,
`kishpa play` and the web do, and wait until the deal is dealt."""

from __future__ import annotations

import asyncio
import secrets
import time
import uuid
from typing import Any

from kishpa.table.v1 import table_pb2, table_pb2_grpc


async def contribute_and_wait_for_deal(
    stub: table_pb2_grpc.TableServiceStub, metadata: Any, table_id: str, *, timeout_s: float = 15
) -> table_pb2.TableView:
    """Contribute to the table's open first deal, then wait (deadline) until it is dealt."""
    deadline = time.monotonic() + timeout_s
    while True:
        view = (
            await stub.GetTable(table_pb2.GetTableRequest(table_id=table_id), metadata=metadata)
        ).table
        if view.round.round >= 1:
            return view
        if view.next_deal and not view.contributed:
            await stub.Contribute(
                table_pb2.ContributeRequest(
                    table_id=table_id,
                    deal=view.next_deal,
                    contribution=secrets.token_hex(8),
                    request_id=uuid.uuid4().hex,
                ),
                metadata=metadata,
            )
        assert time.monotonic() < deadline, f"table {table_id} was never dealt"
        await asyncio.sleep(0.05)
