"""Shared WatchTable fan-out: one reader per process serves every local watcher.

Before, every watcher held its own blocked ``XREAD`` on its own Redis connection and woke
every 5 s to re-issue it. Now a watcher is an in-process :class:`Subscription` (a bounded
buffer) and costs memory only:

* Every commit that appends to a table's stream also ``PUBLISH``-es the table's wake-up
  channel (``commit.lua``, ``settle.lua``; :func:`shared.keys.notify`). The hub holds
  one pub/sub connection and subscribes only the channels of tables with a local watcher,
  so an idle watcher costs Redis nothing but a subscription entry.
* One reader task reads the new entries of the tables that were woken, many tables per
  round trip (a pipeline of ``XRANGE <stream> (<position> +``, one per table; on a Redis
  Cluster one command per table, a few at a time, since the tables live in different
  slots), from the position up to which the hub has read each table, and hands each batch
  to the table's subscribers.
* The hub moves stream entries and does not care about their payload: ``decode`` turns an
  entry into whatever the watchers consume, once per entry for all of its watchers.

Ordering and exactly-once: a stream id only grows. A watcher first subscribes (from then on
every entry the hub reads reaches it), then catches up from its own resume id with plain
reads, then consumes its buffer, dropping ids it already has. An entry is therefore seen
at least once by the subscription or the catch-up, and delivered once by the id check.

Entries this process committed itself need no read: the commit hands them to
:meth:`StreamHub.offer` with the id of the stream's entry before them, and when the hub has
read the table exactly up to that id it delivers them at once. A wake-up names the last id
it announces; one the hub has already delivered up to is not read again. Only entries
committed by other processes (or an offer that did not fit) cost a read.

A lost notification (the pub/sub connection dropped) is repaired by re-subscribing and
re-reading every table from the hub's position. A subscriber that does not keep up (its
buffer holds ``limit`` entries) is cut off: it receives :class:`WatchCutOffError` and its
client resumes from the last id it received.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import uuid
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import structlog
from redis.asyncio import Redis
from redis.asyncio.client import PubSub

from services.common.errors import ResourceExhausted
from services.common.outage import REDIS
from services.common.tasks import cancel_and_wait
from services.table.metrics import (
    FANOUT_OFFERS,
    FANOUT_READS,
    WATCH_CUTOFFS,
    WATCHED_TABLES,
    WATCHERS,
)

log = structlog.get_logger("kishpa.table.fanout")

T = TypeVar("T")
StreamId = tuple[int, int]

DEFAULT_LIMIT = 2048
"""Entries a subscriber may have waiting before it is cut off as too slow."""
READ_COUNT = 200
"""Entries read per table per read; a table with more is read again at once."""
TABLES_PER_READ = 256
"""Tables read in one pipelined round trip."""
PING_SECONDS = 30.0
"""An idle pub/sub connection is pinged this often (a dead one is noticed and replaced)."""
RECONNECT_SECONDS = 0.5
CLUSTER_READS = 16
"""Concurrent single-table reads on a Redis Cluster (below each node's connection limit)."""
READ_TIMEOUT_S = 5.0
"""A read not answered by then is given up and retried (its node is slow or down)."""


UNKNOWN_END: StreamId = (sys.maxsize, sys.maxsize)
"""What a table's stream may hold when no wake-up said: only a read tells."""


def parse_id(entry_id: str) -> StreamId:
    """A stream id ``"<ms>-<seq>"`` as a comparable pair."""
    ms, _, seq = entry_id.partition("-")
    return int(ms), int(seq or 0)


def _announced(data: bytes | str) -> StreamId:
    """The last id a wake-up announces (commit.lua and settle.lua publish it)."""
    try:
        return parse_id(_text(data))
    except ValueError:
        return UNKNOWN_END


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


class WatchCutOffError(ResourceExhausted):
    """The watcher fell too far behind; it resumes from the last event id it received."""

    def __init__(self, table_id: str, limit: int) -> None:
        super().__init__(
            "WATCH_TOO_SLOW",
            f"the watch of table {table_id} fell {limit} events behind and was cut off; "
            "watch again with after_event_id = the last event id received (nothing is lost)",
        )


@dataclass(frozen=True, slots=True)
class Entry(Generic[T]):
    """One stream entry: its id, the id as a pair, and what ``decode`` made of it."""

    id: str
    key: StreamId
    value: T


class Subscription(Generic[T]):
    """One watcher's bounded buffer of a table's new entries (memory, no connection)."""

    __slots__ = ("_buffer", "_cut", "_limit", "_waiter", "table_id")

    def __init__(self, table_id: str, limit: int) -> None:
        self.table_id = table_id
        self._buffer: deque[Entry[T]] = deque()
        self._limit = limit
        self._waiter: asyncio.Future[None] | None = None
        self._cut = False

    @property
    def cut_off(self) -> bool:
        """Whether the hub dropped this subscriber for falling behind."""
        return self._cut

    def _push(self, entries: Sequence[Entry[T]]) -> bool:
        """Buffer entries; False (and cut off) when that would exceed the limit."""
        if self._cut:
            return False
        if len(self._buffer) + len(entries) > self._limit:
            self._cut = True
            self._buffer.clear()
        else:
            self._buffer.extend(entries)
        self._wake()
        return not self._cut

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def next_batch(self, wait_s: float | None = None) -> list[Entry[T]]:
        """Every buffered entry (waiting for one up to ``wait_s`` seconds; [] when it passed).

        Raises :class:`WatchCutOffError` once the hub cut this subscriber off.
        """
        if not self._buffer and not self._cut:
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                if wait_s is None:
                    await self._waiter
                else:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._waiter, wait_s)
            finally:
                self._waiter = None
        if self._cut:
            raise WatchCutOffError(self.table_id, self._limit)
        batch = list(self._buffer)
        self._buffer.clear()
        return batch


class _Table(Generic[T]):
    """The hub's state for one table with local watchers."""

    __slots__ = ("announced", "position", "ready", "subscribers")

    def __init__(self, ready: asyncio.Future[None]) -> None:
        self.subscribers: set[Subscription[T]] = set()
        self.position: str | None = None
        self.announced: StreamId = UNKNOWN_END
        """The highest id woken for since the last read: a position there needs no read."""
        self.ready = ready


class StreamHub(Generic[T]):
    """Reads the streams of the tables watched in this process and fans them out.

    ``redis`` runs the reads (a standalone or cluster client; reads never block, so they
    share the command pool); ``pubsub_redis`` is a standalone client whose one connection
    receives the wake-ups, or a function giving one per (re)connection (on a cluster: any
    node, since a plain ``PUBLISH`` reaches every node; the function moves on to another
    node when one is down).
    """

    def __init__(
        self,
        redis: Any,
        pubsub_redis: Redis | Callable[[], Redis],
        *,
        stream_key: Callable[[str], str],
        channel: Callable[[str], str],
        decode: Callable[[str, Mapping[Any, Any]], T],
        limit: int = DEFAULT_LIMIT,
    ) -> None:
        self.redis = redis
        self.pubsub_redis = pubsub_redis
        self.stream_key = stream_key
        self.channel = channel
        self.decode = decode
        self.limit = limit
        self._tables: dict[str, _Table[T]] = {}
        self._by_channel: dict[bytes, str] = {}
        self._outstanding: dict[bytes, int] = {}
        self._dirty: dict[str, None] = {}
        self._failed: dict[str, None] = {}
        self._inflight: set[str] = set()
        self._cluster = hasattr(redis, "get_node_from_key")
        self._cluster_reads = asyncio.Semaphore(CLUSTER_READS)
        self._reads: set[asyncio.Task[None]] = set()
        self._retry: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._pubsub: PubSub | None = None
        self._control = f"kishpa:fanout:{uuid.uuid4().hex}"
        self._tasks: list[asyncio.Task[None]] = []
        self._connected = asyncio.Event()
        self.on_read: Callable[[str], None] | None = None
        """Called with a table's id when entries of it were read, not offered: another
        writer moved that table on (the table service forgets the state it kept)."""

    # ---- lifecycle ---------------------------------------------------------------------

    async def start(self) -> None:
        """Start the pub/sub listener and the reader."""
        if self._tasks:
            return
        self._tasks = [
            asyncio.create_task(self._listen(), name="fanout-listen"),
            asyncio.create_task(self._read_loop(), name="fanout-read"),
        ]

    async def stop(self) -> None:
        """Stop both tasks and close the pub/sub connection."""
        for task in self._tasks:
            await cancel_and_wait(task)
        self._tasks = []  # the listener closed its pub/sub connection on the way out
        if self._retry is not None:
            self._retry.cancel()
        for read in list(self._reads):
            read.cancel()

    def stats(self) -> dict[str, int]:
        """Tables watched and watchers in this process."""
        return {
            "tables": len(self._tables),
            "watchers": sum(len(t.subscribers) for t in self._tables.values()),
        }

    # ---- watchers ----------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def subscribe(self, table_id: str) -> AsyncIterator[Subscription[T]]:
        """Receive every entry of ``table_id`` read after this returns, until exit.

        The caller then catches up from its own resume id (entries before the subscription
        are in the stream) and drops the ids it already has.
        """
        if not self._tasks:
            raise RuntimeError("the stream hub is not started")
        sub: Subscription[T] = Subscription(table_id, self.limit)
        table = self._tables.get(table_id)
        if table is None:
            table = _Table(asyncio.get_running_loop().create_future())
            self._tables[table_id] = table
            WATCHED_TABLES.inc()
            await self._send_subscribe(table_id)
        table.subscribers.add(sub)
        WATCHERS.inc()
        try:
            await asyncio.shield(table.ready)
            if table.position is None:
                # The first watcher fixes where the hub starts: the stream's end after the
                # subscription was confirmed, so no later entry can go unnoticed.
                entries: Any = await self.redis.xrevrange(self.stream_key(table_id), count=1)
                if table.position is None:
                    table.position = _text(entries[0][0]) if entries else "0-0"
                    self._mark(table_id)  # entries appended during the lookup
            yield sub
        finally:
            table.subscribers.discard(sub)
            WATCHERS.dec()
            if not table.subscribers and self._tables.get(table_id) is table:
                del self._tables[table_id]
                WATCHED_TABLES.dec()
                self._dirty.pop(table_id, None)
                await self._send_unsubscribe(table_id)

    async def _send_subscribe(self, table_id: str) -> None:
        name = self.channel(table_id).encode()
        self._by_channel[name] = table_id
        pubsub = self._pubsub
        if pubsub is None:
            return  # the listener subscribes every watched table once it is connected
        self._outstanding[name] = self._outstanding.get(name, 0) + 1
        try:
            await pubsub.subscribe(name)
        except Exception as exc:  # the listener notices the broken connection, redoes it all
            if not REDIS.absorbs(exc, where="table_fanout"):
                log.warning("fanout_subscribe_failed", table_id=table_id)

    async def _send_unsubscribe(self, table_id: str) -> None:
        name = self.channel(table_id).encode()
        pubsub = self._pubsub
        if pubsub is None or table_id in self._tables:
            return
        with contextlib.suppress(Exception):
            await pubsub.unsubscribe(name)

    # ---- pub/sub -----------------------------------------------------------------------

    def _mark(self, table_id: str, announced: StreamId = UNKNOWN_END) -> None:
        table = self._tables.get(table_id)
        if table is not None and announced > table.announced:
            table.announced = announced
        self._dirty[table_id] = None
        self._wake.set()

    def _confirmed(self, name: bytes) -> None:
        left = self._outstanding.get(name, 0) - 1
        if left > 0:
            self._outstanding[name] = left
            return
        self._outstanding.pop(name, None)
        table_id = self._by_channel.get(name)
        table = None if table_id is None else self._tables.get(table_id)
        if table is not None and not table.ready.done():
            table.ready.set_result(None)

    async def _listen(self) -> None:
        while True:
            source = self.pubsub_redis
            client: Redis | None = None
            pubsub: PubSub | None = None
            try:
                client = source if isinstance(source, Redis) else source()
                pubsub = client.pubsub()
                await pubsub.subscribe(self._control)
                # From here on, every newly watched table subscribes itself.
                self._pubsub = pubsub
                self._outstanding = {}
                names = [self.channel(t).encode() for t in self._tables]
                for start in range(0, len(names), 500):
                    chunk = names[start : start + 500]
                    for name in chunk:
                        self._outstanding[name] = self._outstanding.get(name, 0) + 1
                    await pubsub.subscribe(*chunk)
                # Whatever was published while we were away is in the streams.
                for table_id, table in self._tables.items():
                    if table.position is not None:
                        self._mark(table_id)
                self._connected.set()
                await self._pump(pubsub)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if not REDIS.absorbs(exc, where="table_fanout"):
                    log.warning("fanout_pubsub_lost", error=repr(exc))
            finally:
                self._connected.clear()
                if self._pubsub is pubsub:
                    self._pubsub = None
                if pubsub is not None:
                    with contextlib.suppress(Exception):
                        await pubsub.aclose()
                if client is not None and client is not source:
                    with contextlib.suppress(Exception):
                        await client.aclose()
            await asyncio.sleep(RECONNECT_SECONDS)

    async def _pump(self, pubsub: PubSub) -> None:
        while True:
            message = await pubsub.get_message(timeout=PING_SECONDS)
            if message is None:
                await pubsub.ping()
                continue
            kind = message["type"]
            if kind == "message":
                table_id = self._by_channel.get(message["channel"])
                if table_id is not None and table_id in self._tables:
                    self._mark(table_id, _announced(message["data"]))
            elif kind == "subscribe":
                self._confirmed(message["channel"])

    # ---- reading -----------------------------------------------------------------------

    async def _read_loop(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            # Tables being read are left for later: one read per table at a time keeps
            # its entries in order and its position exact.
            ready = [t for t in self._dirty if t not in self._inflight]
            while ready:
                batch: list[tuple[str, _Table[T], str]] = []
                for table_id in ready[:TABLES_PER_READ]:
                    del self._dirty[table_id]
                    table = self._tables.get(table_id)
                    if table is None or table.position is None:
                        continue
                    if parse_id(table.position) >= table.announced:
                        continue  # delivered already (an offer of this process's commit)
                    table.announced = (0, 0)  # this read finds what is there; wake-ups raise it
                    batch.append((table_id, table, table.position))
                ready = ready[TABLES_PER_READ:]
                # Each batch is read on its own task: a slow read (a node that is down)
                # delays only its own tables (they are read again when it answers).
                self._inflight.update(t for t, _, _ in batch)
                task = asyncio.create_task(self._read_group(batch))
                self._reads.add(task)
                task.add_done_callback(self._reads.discard)

    async def _read_group(self, group: list[tuple[str, _Table[T], str]]) -> None:
        try:
            await asyncio.wait_for(self._read(group), READ_TIMEOUT_S)
        except asyncio.CancelledError:
            raise
        except TimeoutError as exc:  # the read's own deadline: Redis does not answer
            REDIS.failed(exc, where="table_fanout")
            for table_id, _, _ in group:
                self._failed[table_id] = None
            self._retry_later()
        except Exception as exc:
            if not REDIS.absorbs(exc, where="table_fanout"):
                log.warning("fanout_read_failed", error=repr(exc), tables=len(group))
            for table_id, _, _ in group:
                self._failed[table_id] = None
            self._retry_later()
        finally:
            for table_id, _, _ in group:
                self._inflight.discard(table_id)
            if self._dirty:
                self._wake.set()

    def _retry_later(self) -> None:
        if self._retry is None or self._retry.done():
            self._retry = asyncio.create_task(self._requeue_failed())

    async def _requeue_failed(self) -> None:
        await asyncio.sleep(RECONNECT_SECONDS)
        failed, self._failed = self._failed, {}
        for table_id in failed:
            if table_id in self._tables:
                self._mark(table_id)

    async def _read(self, batch: Sequence[tuple[str, _Table[T], str]]) -> None:
        FANOUT_READS.inc()
        replies: list[Any]
        if self._cluster:
            # One XRANGE per table, a few at a time (redis-py's cluster pipeline stalled
            # every node's reads while one master was down); a table whose node fails is
            # read again later, the others are delivered now.
            replies = await asyncio.gather(
                *(self._read_one(table_id, position) for table_id, _, position in batch),
                return_exceptions=True,
            )
        else:
            async with self.redis.pipeline(transaction=False) as pipe:
                for table_id, _, position in batch:
                    pipe.xrange(self.stream_key(table_id), f"({position}", count=READ_COUNT)
                replies = await pipe.execute()
        failed: BaseException | None = None
        for (table_id, table, position), reply in zip(batch, replies, strict=True):
            if isinstance(reply, BaseException):
                if isinstance(reply, asyncio.CancelledError):
                    raise reply
                self._failed[table_id] = None
                failed = reply
                continue
            if table.position != position:
                continue  # re-subscribed meanwhile: a fresher read decides
            entries: list[Entry[T]] = []
            for entry_id, fields in reply or []:
                text = _text(entry_id)
                entries.append(Entry(text, parse_id(text), self.decode(text, fields)))
            if not entries:
                continue
            if len(entries) >= READ_COUNT:
                self._mark(table_id)
            if self.on_read is not None:
                self.on_read(table_id)
            self._deliver(table_id, table, entries)
        if failed is not None and not REDIS.absorbs(failed, where="table_fanout"):
            log.warning(
                "fanout_read_failed",
                error=repr(failed),
                tables=sum(t in self._failed for t, _, _ in batch),
            )
            self._retry_later()

    def _deliver(self, table_id: str, table: _Table[T], entries: list[Entry[T]]) -> None:
        """Hand the table's next entries (just after its position) to its subscribers."""
        table.position = entries[-1].id
        for sub in list(table.subscribers):
            if not sub._push(entries):
                table.subscribers.discard(sub)
                WATCH_CUTOFFS.inc()
                log.info("watch_cut_off", table_id=table_id, limit=self.limit)

    def offer(
        self, table_id: str, previous: str, entries: Sequence[tuple[str, Mapping[str, str]]]
    ) -> bool:
        """Entries this process just appended to ``table_id``'s stream right after the entry
        ``previous``: delivered at once, with no read, when the hub has read that table
        exactly up to ``previous`` and is not reading it now. Otherwise nothing happens and
        the commit's wake-up reads them, as for any other process's commit."""
        table = self._tables.get(table_id)
        if table is None or not entries or table.position != previous or table_id in self._inflight:
            return False
        FANOUT_OFFERS.inc()
        decoded = [Entry(i, parse_id(i), self.decode(i, fields)) for i, fields in entries]
        self._deliver(table_id, table, decoded)
        return True

    async def _read_one(self, table_id: str, position: str) -> Any:
        async with self._cluster_reads:
            return await asyncio.wait_for(
                self.redis.xrange(self.stream_key(table_id), f"({position}", count=READ_COUNT),
                READ_TIMEOUT_S,
            )
