"""Deadline waits on a table's event stream, instead of sleeping "long enough"."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence

from redis.asyncio import Redis

from shared import keys


def _id(entry_id: str) -> tuple[int, int]:
    ms, _, seq = entry_id.partition("-")
    return int(ms), int(seq or 0)


async def newest_public_entry(redis: Redis, table_id: str) -> str | None:
    """The id of the stream's newest entry every watcher sees (a ``private`` entry goes to
    one seat only), read from the raw stream."""
    for entry_id, fields in await redis.xrevrange(keys.events(table_id), count=500):
        if fields[b"type"] != b"private":
            return entry_id.decode() if isinstance(entry_id, bytes) else str(entry_id)
    return None


async def until_delivered(
    redis: Redis,
    table_id: str,
    delivered: Callable[[], Sequence[str]],
    *,
    within: float = 15.0,
) -> None:
    """Wait until a watch has delivered (``delivered()``: the event ids it received, in
    order) the table's newest public entry: everything committed so far has reached it."""
    target = await newest_public_entry(redis, table_id)
    if target is None:
        return
    deadline = time.monotonic() + within
    while True:
        ids = delivered()
        if ids and _id(ids[-1]) >= _id(target):
            return
        if time.monotonic() > deadline:
            last = ids[-1] if ids else None
            raise AssertionError(f"the watch stopped at {last}, the stream is at {target}")
        await asyncio.sleep(0.02)


async def until_new_entry(
    redis: Redis, table_id: str, after: int, kind: str, *, within: float = 30.0
) -> list[str]:
    """Wait until an entry of type ``kind`` follows the first ``after`` entries of the stream;
    the types of every entry after them, once it has."""
    deadline = time.monotonic() + within
    while True:
        entries = await redis.xrange(keys.events(table_id))
        types = [f[b"type"].decode() for _, f in entries[after:]]
        if kind in types:
            return types
        if time.monotonic() > deadline:
            raise AssertionError(f"no {kind} within {within} s; after {after}: {types}")
        await asyncio.sleep(0.05)
