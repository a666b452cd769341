"""WatchTable after ``table_closed``: the stream waits for the last settlement (real Redis).

The table service's ``watch`` and the workers' ``mark_settled`` script run as in production;
only the game is skipped: the table is committed already closed with one unsettled phase.
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections.abc import AsyncIterator
from urllib.parse import urlsplit, urlunsplit

import pytest

from services.common.redis_client import async_client, sync_client
from services.table.engine import Table, TableSettings
from services.table.engines import engines
from services.table.service import Tables
from services.table.store import TableStore, Transition
from shared import keys
from shared.phase_record import PhaseRecord, PhaseRef
from shared.stream import TableEvent
from tests.conftest import TEST_REDIS_URL
from tests.support.waiting import wait_until
from workers.outbox import mark_settled

pytestmark = pytest.mark.integration

REDIS_URL = os.environ.get("TEST_TABLE_REDIS_URL") or urlunsplit(
    urlsplit(TEST_REDIS_URL)._replace(path="/11")
)
SETTLE_POLL_MS = 200


@pytest.fixture
async def closed_table() -> AsyncIterator[tuple[Tables, str]]:
    client = async_client(REDIS_URL)
    table_id = f"t-watch-{uuid.uuid4().hex}"
    table = Table(
        table_id=table_id,
        game_name="kishpa",
        creator="p1",
        settings=TableSettings(seats=2),
        created_ms=0,
        players=["p1", "p2"],
        status="closed",
    )
    store = TableStore(client)
    await store.transact(
        table_id,
        lambda _: Transition(
            state=table.to_dict(),
            events=[TableEvent("table_closed", 1, -1, {})],
            phases=[PhaseRecord(table_id, "kishpa", 1, "end", {}, 0)],
        ),
        create=True,
    )
    tables = Tables(store, engines(), settlement_wait_ms=30_000)
    yield tables, table_id
    await tables.aclose()
    await client.delete(*(part(table_id) for part in (
        keys.state, keys.events, keys.requests, keys.outbox, keys.settled, keys.balances
    )))  # fmt: skip
    await client.aclose()


async def test_a_watcher_receives_the_settlement_that_lands_after_the_table_closed(
    closed_table: tuple[Tables, str],
) -> None:
    tables, table_id = closed_table

    seen: list[str] = []

    async def follow() -> list[str]:
        async for e in tables.watch("p1", table_id, settle_poll_ms=SETTLE_POLL_MS):
            seen.append(e.event.type)
        return seen

    watcher = asyncio.create_task(follow())
    await wait_until(lambda: "table_closed" in seen, timeout=10, message="table_closed")
    # Something that must not happen has no event to wait on: give the watch five settle
    # polls to (wrongly) end after table_closed.
    await asyncio.wait({watcher}, timeout=5 * SETTLE_POLL_MS / 1000)
    assert not watcher.done(), "the stream ended before the last phase was settled"
    settled = mark_settled(
        sync_client(REDIS_URL),
        PhaseRef(table_id, 1, "end"),
        batch_id="7",
        balances={"p1": 2010, "p2": 1990},
        settled_ms=int(time.time() * 1000),
    )
    assert settled
    assert await asyncio.wait_for(watcher, timeout=10) == ["table_closed", "settled"]
    # A watcher arriving later replays both and ends at once.
    assert await asyncio.wait_for(watcher, timeout=1) == [
        e.event.type async for e in tables.watch("p1", table_id, settle_poll_ms=200)
    ]
