"""A lone creator's first deal: a table he opened with house bots waits for his contribution
(docs/fairness.md, "The deal's seats"); these tests' raw-stub clients send it, as the SDK,
`kishpa play` and the web do, and wait until the deal is dealt."""

from __future__ import annotations

import secrets
from typing import Any

from kishpa.table.v1 import table_pb2, table_pb2_grpc
from tests.support.fair_order import contribute
from tests.support.waiting import wait_until


async def contribute_and_wait_for_deal(
    stub: table_pb2_grpc.TableServiceStub, metadata: Any, table_id: str, *, timeout_s: float = 15
) -> table_pb2.TableView:
    """Contribute to the table's open first deal, then wait (deadline) until it is dealt."""

    async def dealt() -> table_pb2.TableView | None:
        request = table_pb2.GetTableRequest(table_id=table_id)
        view = (await stub.GetTable(request, metadata=metadata)).table
        if view.round.round >= 1:
            return view
        if view.next_deal and not view.contributed:
            await contribute(stub, metadata, table_id, view.next_deal, secrets.token_hex(8))
        return None

    view: table_pb2.TableView = await wait_until(
        dealt, timeout=timeout_s, message=f"table {table_id}'s first deal"
    )
    return view
