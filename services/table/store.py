"""The Redis table store: load a table's state and version, commit a transition atomically.

An action reads the state and its version, the game engine (pure Python) computes the next
state and its events, and ``commit.lua`` writes them only if the version is unchanged:
state, stream events, the request id's answer and the settlement outbox records, all or
nothing. A version conflict recomputes on the state the refusal returns, a bounded number of
times. The read is skipped when this process committed the table's last state itself
(:mod:`services.table.state_cache`).
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

import orjson
import structlog
from redis.exceptions import NoScriptError, RedisError

from services.common.errors import Aborted, AlreadyExists, FailedPrecondition
from services.table.durability import (
    Durability,
    DurabilityWatch,
    NotDurableError,
    refuse_unless_durable,
    refusing,
)
from services.table.metrics import COMMITS, STATE_CACHE
from services.table.settings import FINISHED_TABLE_TTL_S
from services.table.state_cache import STATE_CACHE_TABLES, KeptState, StateCache
from shared import keys
from shared.phase_record import PhaseRecord
from shared.stream import StoredEvent, TableEvent, decode, encode, flat_fields

log = structlog.get_logger("kishpa.table.store")

COMMIT_MAX_ATTEMPTS = 16
"""Conflicting commits on one table retried this many times before giving up (busy)."""


EVENTS_FROM_FIELD = "_events_from"
"""Field of the settled hash: the oldest event the stream keeps since its last trim
(written by workers/settle.lua, the workers' ``outbox.EVENTS_FROM_FIELD``)."""

REQUEST_MEMORY_MS = 0
"""Answers older than this are dropped too, every 64th commit (0, the default: no time
bound; the per-player bound below keeps the answers few, and drops no answer a client may
still retry however slowly it does)."""

REQUEST_ANSWERS_PER_PLAYER = 4
"""A player's last answers replayed to retries (older ones go as he sends new requests): a
client retries only what it has not seen answered, its one or few requests in flight, so
a seat keeps at most this many answers however long the table plays."""


class TableBusyError(Aborted):
    """Too many concurrent writers on one table: the caller may try again later."""

    def __init__(self, message: str) -> None:
        super().__init__("TABLE_BUSY", message)


class EventsTrimmedError(FailedPrecondition):
    """A watcher asked for events after one the table no longer keeps: it reloads the view."""

    def __init__(self, table_id: str, oldest_event_id: str) -> None:
        super().__init__(
            "EVENTS_TRIMMED",
            f"table {table_id} no longer keeps the events after the one asked for (it keeps "
            f"the current round, from event {oldest_event_id}): load the "
            "view again (GetTable) and watch from its last_event_id",
            {"table_id": table_id, "oldest_event_id": oldest_event_id},
        )


def _stream_id(entry_id: str) -> tuple[int, int]:
    ms, _, seq = entry_id.partition("-")
    return int(ms or 0), int(seq or 0)


class TableExistsError(AlreadyExists):
    """A table with this id already exists."""

    def __init__(self, message: str) -> None:
        super().__init__("TABLE_EXISTS", message)


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A table's state as loaded, with the version a commit must still find."""

    table_id: str
    version: int
    state: dict[str, Any]
    deadline_ms: int | None = None


@dataclass(slots=True)
class Transition:
    """What a pure computation decided: the next state and what to publish with it."""

    state: dict[str, Any]
    events: list[TableEvent] = field(default_factory=list)
    phases: list[PhaseRecord] = field(default_factory=list)
    answer: str = ""
    deadline_ms: int | None = None
    finished: bool = False
    idle_ttl_s: int = 0
    """Expire the table this long after this commit unless another comes (a table still
    waiting for players); 0 keeps it. A finished table uses the store's ``finished_ttl_s``."""


@dataclass(frozen=True, slots=True)
class Committed:
    """The result of a commit (or of a replayed request id)."""

    version: int
    event_ids: tuple[str, ...]
    answer: str
    replayed: bool
    transition: Transition | None
    balances: dict[str, int] | None = None
    """The table's balances as of the commit (None for a replayed answer)."""
    first_event_id: str = ""
    """The id of the first event the request's commit appended (also for a replay; "" when
    it appended none)."""
    previous_event_id: str = ""
    """The stream's last entry before this commit's events ("0-0": none; "" without events)."""
    appended: tuple[tuple[str, dict[str, str]], ...] = ()
    """This commit's stream entries as written: (id, fields)."""


@dataclass(frozen=True, slots=True)
class Conflict:
    """A commit refused because the table moved on: its state now (None: no such table)."""

    snapshot: Snapshot | None


def _snapshot(table_id: str, version: Any, raw: Any, deadline: Any) -> Snapshot | None:
    """A snapshot from a script's reply (absent fields come back as None)."""
    if version is None or raw is None:
        return None
    return Snapshot(
        table_id, int(version), orjson.loads(raw), None if deadline is None else int(deadline)
    )


def _load_script(name: str) -> str:
    return resources.files("services.table").joinpath(name).read_text()


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


class Script:
    """A Lua script run by ``EVALSHA``, falling back to ``EVAL`` on the node that lacks it.

    Unlike redis-py's registered scripts, the fallback never broadcasts ``SCRIPT LOAD`` to
    every master of a cluster: a node restarted with an empty script cache gets the script
    with the first call routed to it, and a master that is down fails only its own keys.
    """

    def __init__(self, redis: Any, source: str) -> None:
        self.redis = redis
        self.source = source
        self.sha = hashlib.sha1(source.encode(), usedforsecurity=False).hexdigest()

    async def __call__(
        self, *, keys: Sequence[str], args: Sequence[str | int | bytes] = (), client: Any = None
    ) -> Any:
        if client is not None:
            # Queued on a pipeline: EVAL, so that a node without the script cannot fail
            # the whole pipeline (Redis caches an EVAL'd script by its SHA all the same).
            return client.eval(self.source, len(keys), *keys, *args)
        try:
            return await self.redis.evalsha(self.sha, len(keys), *keys, *args)
        except NoScriptError:
            return await self.redis.eval(self.source, len(keys), *keys, *args)


def request_field(player_id: str, request_id: str) -> str:
    """Request ids are scoped per player so nobody can read another player's answers."""
    return f"{player_id}:{request_id}" if request_id else ""


class TableStore:
    """Reads and atomically writes tables in Redis (redis-py asyncio, EVALSHA scripts).

    ``redis`` is a standalone ``redis.asyncio.Redis`` or a ``RedisCluster``
    (:func:`services.common.redis_client.async_client`): every command and script touches
    one table's keys (one slot) or one index shard.
    """

    def __init__(
        self,
        redis: Any,
        *,
        finished_ttl_s: int = FINISHED_TABLE_TTL_S,
        version: int = keys.STATE_VERSION,
        readable_versions: tuple[int, ...] = keys.READABLE_VERSIONS,
        state_cache_tables: int = STATE_CACHE_TABLES,
        request_memory_ms: int = REQUEST_MEMORY_MS,
        answers_per_player: int = REQUEST_ANSWERS_PER_PLAYER,
    ) -> None:
        self.redis = redis
        self.request_memory_ms = request_memory_ms
        """How long a request's first answer is replayed (0: for the table's life)."""
        self.answers_per_player = answers_per_player
        """How many of a player's latest answers are replayed (0: no bound)."""
        self.cache = StateCache(state_cache_tables)
        """The state of each table as this process last committed it (state_cache.py)."""
        self.version = version
        self.readable_versions = readable_versions
        self._shard_warned: dict[str, float] = {}
        self.cluster = hasattr(redis, "get_node_from_key")
        self.finished_ttl_s = finished_ttl_s
        self.durability = Durability()
        """The barrier after a commit that writes a phase record (the server sets it at start
        from :func:`services.table.durability.probe`)."""
        self.watch: DurabilityWatch | None = None
        """Asks the server again before a commit is refused for want of durability."""
        self._commit = Script(redis, _load_script("commit.lua"))
        self._claim = Script(redis, _load_script("claim.lua"))
        self._view = Script(redis, _load_script("view.lua"))
        self._load = Script(redis, _load_script("load.lua"))
        self._seed = Script(redis, _load_script("seed_balances.lua"))

    async def load(self, table_id: str) -> Snapshot | None:
        """The table's state and version, or None when there is no such table."""
        fields: Any = await self.redis.hmget(keys.state(table_id), ["version", "state", "deadline"])
        return _snapshot(table_id, *fields)

    async def load_for(
        self, table_id: str, request: str
    ) -> tuple[tuple[str, str] | None, Snapshot | None]:
        """The first answer of ``request`` if it was answered, else the table (one round trip).

        Returns ``((answer, first event id), None)`` for a replay, ``(None, snapshot or
        None)`` otherwise.
        """
        reply: Any = await self._load(
            keys=[keys.state(table_id), keys.requests(table_id)], args=[request]
        )
        if int(reply[0]) == 1:
            return (_text(reply[1]), _text(reply[2])), None
        return None, _snapshot(table_id, *reply[1:])

    async def load_view(self, table_id: str) -> tuple[Snapshot | None, str, dict[str, int]]:
        """The state, the id of the last event it includes and the balances (atomically)."""
        version, raw, last_id, flat = await self._view(
            keys=[keys.state(table_id), keys.events(table_id), keys.balances(table_id)]
        )
        if version is None or raw is None:
            return None, _text(last_id), {}
        snapshot = Snapshot(table_id, int(version), orjson.loads(raw))
        balances = {_text(flat[i]): int(flat[i + 1]) for i in range(0, len(flat), 2)}
        return snapshot, _text(last_id), balances

    async def answer(self, table_id: str, field_name: str) -> str | None:
        """The remembered answer of a request, if it was already answered."""
        if not field_name:
            return None
        raw = await self.redis.hget(keys.requests(table_id), field_name)
        return None if raw is None else _text(raw)

    async def commit(
        self,
        table_id: str,
        expected_version: int,
        transition: Transition,
        *,
        request: str = "",
        index_deadline: bool = True,
    ) -> Committed | None:
        """Commit a transition if the version is unchanged; None on a version conflict.

        ``index_deadline`` false skips updating the deadline index (it did not change). A
        transition that writes phase records also puts the table in the unsettled index the
        settlement sweeper reads (:func:`shared.keys.unsettled`).
        """
        outcome = await self._commit_once(
            table_id, expected_version, transition, request=request, index_deadline=index_deadline
        )
        return outcome if isinstance(outcome, Committed) else None

    async def _commit_once(
        self,
        table_id: str,
        expected_version: int,
        transition: Transition,
        *,
        request: str = "",
        index_deadline: bool = True,
        expected_rev: str = "",
    ) -> Committed | Conflict:
        """:meth:`commit`, or the table's state when it refuses (``expected_rev``: the
        revision a kept state must still find, see state_cache.py)."""
        try:
            outcome = await self._run_commit(
                table_id, expected_version, transition, request, index_deadline, expected_rev
            )
        except BaseException:
            self.cache.forget(table_id)  # committed or not: the next action reads
            raise
        if isinstance(outcome, Conflict) or (outcome.replayed and expected_rev):
            self.cache.forget(table_id)
        return outcome

    async def _run_commit(
        self,
        table_id: str,
        expected_version: int,
        transition: Transition,
        request: str,
        index_deadline: bool,
        expected_rev: str,
    ) -> Committed | Conflict:
        earliest: int | str = min((p.created_ms for p in transition.phases), default="")
        # Compact JSON as json.dumps(separators=(",", ":")) writes it, non-ASCII as UTF-8
        # (both read it back alike); integer keys become strings, as with json.
        raw = orjson.dumps(transition.state, option=orjson.OPT_NON_STR_KEYS)
        rev = os.urandom(8).hex()
        args: list[str | int | bytes] = [
            expected_version,
            raw,
            request,
            transition.answer,
            "" if transition.deadline_ms is None else transition.deadline_ms,
            self.finished_ttl_s if transition.finished else transition.idle_ttl_s,
            len(transition.events),
            len(transition.phases),
            table_id,
            earliest,
            rev,
            expected_rev,
            int(time.time() * 1000),
            self.request_memory_ms,
            self.answers_per_player,
        ]
        entries = [encode(event) for event in transition.events]
        for fields in entries:
            args += flat_fields(fields)
        for phase in transition.phases:
            args += [phase.field, phase.to_json()]
        commit_keys = [
            keys.state(table_id),
            keys.events(table_id),
            keys.requests(table_id),
            keys.outbox(table_id),
            keys.balances(table_id),
        ]
        if not self.cluster:
            # One node: the script indexes the table in the same atomic step (its phases
            # and, when it changed, its deadline); a cluster keeps the indexes in other slots.
            commit_keys.append(keys.unsettled(table_id))
            if index_deadline:
                commit_keys += self._deadline_keys(table_id)
        if transition.phases:
            if refusing(self.durability) and self.watch is not None:
                await self.watch.recheck()  # fixed meanwhile? then this action goes through
            refuse_unless_durable(self.durability)
        barrier = self.durability.commands() if transition.phases else []
        try:
            if barrier:
                result = await self._commit_durably(table_id, commit_keys, args, barrier)
            else:
                result = await self._commit(keys=commit_keys, args=args)
        except NotDurableError:
            await self._index_after_commit(table_id, transition)  # committed all the same
            raise
        code = int(result[0])
        if code == 0:
            COMMITS.labels("conflict").inc()
            return Conflict(_snapshot(table_id, result[1], *result[2:4]))
        if code == 2:
            COMMITS.labels("replayed").inc()
            return Committed(
                expected_version, (), _text(result[1]), True, None, first_event_id=_text(result[2])
            )
        COMMITS.labels("committed").inc()
        await self._index_after_commit(table_id, transition)
        # On a cluster the deadline index is in other slots (one node: the script moved it)
        # and rebuildable (the timers re-index every minute): the commit stands even if its
        # shard is unreachable.
        if index_deadline and self.cluster:
            try:
                await self.set_deadline(table_id, transition.deadline_ms)
            except RedisError as exc:
                log.warning("deadline_index_unavailable", table_id=table_id, error=repr(exc))
        if transition.finished:
            self.cache.forget(table_id)
        else:
            self.cache.keep(table_id, KeptState(int(result[1]), raw, transition.deadline_ms, rev))
        flat = result[2]
        balances = {_text(flat[i]): int(flat[i + 1]) for i in range(0, len(flat), 2)}
        event_ids = tuple(_text(i) for i in result[4:])
        return Committed(
            int(result[1]),
            event_ids,
            transition.answer,
            False,
            transition,
            balances,
            first_event_id=event_ids[0] if event_ids else "",
            previous_event_id=_text(result[3]),
            appended=tuple(zip(event_ids, entries, strict=True)),
        )

    async def _commit_durably(
        self,
        table_id: str,
        commit_keys: list[str],
        args: list[str | int | bytes],
        barrier: list[Any],
    ) -> Any:
        """The commit script and the durability barrier on ONE connection (WAIT and WAITAOF
        count the writes of their own connection), in one round trip."""
        async with self.redis.pipeline(transaction=False) as pipe:
            await self._commit(keys=commit_keys, args=args, client=pipe)
            for command in barrier:
                pipe.execute_command(*command)
            result, *replies = await pipe.execute()
        if int(result[0]) == 1 and not self.durability.met(replies):
            raise NotDurableError(
                f"table {table_id}: the action was committed but Redis did not confirm it "
                f"durable within {self.durability.timeout_ms} ms; retry with the same request id"
            )
        return result

    async def durable_replay(self, table_id: str, request: str, answer: str) -> None:
        """Before a replayed answer is given again, wait for the barrier (a first attempt
        may have ended NOT_DURABLE). The barrier counts only its own connection's writes, so
        the answer is written again first (the same value: nothing changes)."""
        barrier = self.durability.commands()
        if not barrier or not request:
            return
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.hset(keys.requests(table_id), request, answer)
            for command in barrier:
                pipe.execute_command(*command)
            _written, *replies = await pipe.execute()
        if not self.durability.met(replies):
            raise NotDurableError(f"table {table_id}: Redis did not confirm the answer durable")

    async def transact(
        self,
        table_id: str,
        compute: Callable[[Snapshot], Transition | Awaitable[Transition]],
        *,
        request: str = "",
        create: bool = False,
    ) -> Committed:
        """Compute and commit, on a fresh state after a conflict.

        The first attempt computes on the state this process last committed for the table
        when it kept one (state_cache.py): no read before the commit. Otherwise, and after
        any refusal computed on a kept state, it reads first.

        ``compute`` raises to refuse (nothing is written). With ``create`` the table must
        not exist yet and ``compute`` receives an empty snapshot of version 0.
        """
        snapshot: Snapshot | None = None
        kept = None if create else self.cache.get(table_id)
        for _attempt in range(COMMIT_MAX_ATTEMPTS):
            rev = ""
            if kept is not None:
                snapshot = Snapshot(
                    table_id, kept.version, orjson.loads(kept.raw), kept.deadline_ms
                )
                rev, kept = kept.rev, None
            elif snapshot is None:
                # A replay must get the first answer even when the move is illegal by now,
                # so look before computing (commit.lua also answers replays that race us).
                replay, snapshot = await self.load_for(table_id, request)
                if replay is not None:
                    COMMITS.labels("replayed").inc()
                    answer, first = replay
                    await self.durable_replay(table_id, request, answer)
                    return Committed(0, (), answer, True, None, first_event_id=first)
                if create:
                    if snapshot is not None:
                        raise TableExistsError(f"table {table_id} already exists")
                    snapshot = Snapshot(table_id, 0, {})
                elif snapshot is None:
                    raise LookupError(table_id)
            try:
                outcome = compute(snapshot)
                transition = outcome if isinstance(outcome, Transition) else await outcome
            except Exception:
                if not rev:
                    raise
                # Refused on a kept state: it may be a retried request answered before
                # (whose first answer must be given again) or a state gone stale. Decide
                # on a fresh read.
                STATE_CACHE.labels("refused").inc()
                self.cache.forget(table_id)
                snapshot = None
                continue
            result = await self._commit_once(
                table_id,
                snapshot.version,
                transition,
                request=request,
                index_deadline=snapshot.deadline_ms != transition.deadline_ms,
                expected_rev=rev,
            )
            if isinstance(result, Committed):
                if rev:
                    STATE_CACHE.labels("hit").inc()
                if result.replayed:
                    await self.durable_replay(table_id, request, result.answer)
                return result
            if rev:
                STATE_CACHE.labels("stale").inc()
            # The refusal carries the state now (read atomically after the request check,
            # as load_for would): compute again on it.
            snapshot = result.snapshot
            if create and snapshot is not None:
                raise TableExistsError(f"table {table_id} already exists")
            if snapshot is None:
                if not create:
                    raise LookupError(table_id)
                snapshot = Snapshot(table_id, 0, {})
        raise TableBusyError(f"table {table_id} is busy; try again")

    async def read_events(
        self, table_id: str, after_id: str, *, count: int = 200, whole: bool = False
    ) -> list[StoredEvent]:
        """Up to ``count`` events after ``after_id`` ("0-0": from the oldest the stream
        keeps); never blocks (live events come from the shared fan-out,
        :mod:`services.table.fanout`).

        ``whole``: every event after ``after_id`` must still be there, else
        :class:`EventsTrimmedError` (a settled round's events leave the stream once the
        next round is dealt and its start settled: workers/settle.lua)."""
        # XRANGE from an exclusive start, not XREAD: its key sits at a fixed place, so a
        # cluster client routes it without asking a node (COMMAND GETKEYS) first.
        start = f"({after_id or '0-0'}"
        if not whole:
            reply: Any = await self.redis.xrange(keys.events(table_id), start, count=count)
        else:
            async with self.redis.pipeline(transaction=False) as pipe:
                pipe.xrange(keys.events(table_id), start, count=count)
                pipe.hget(keys.settled(table_id), EVENTS_FROM_FIELD)
                reply, oldest = await pipe.execute()
            if oldest is not None and _stream_id(after_id) < _stream_id(_text(oldest)):
                raise EventsTrimmedError(table_id, _text(oldest))
        return [StoredEvent(_text(entry_id), decode(fields)) for entry_id, fields in reply]

    async def last_event_id(self, table_id: str) -> str:
        """Id of the table's latest event ("0-0" when none)."""
        entries: Any = await self.redis.xrevrange(keys.events(table_id), count=1)
        return _text(entries[0][0]) if entries else "0-0"

    async def balances(self, table_id: str) -> dict[str, int]:
        """Players' wallet balances as the latest settlement left them."""
        raw = await self.redis.hgetall(keys.balances(table_id))
        return {_text(k): int(v) for k, v in raw.items()}

    async def seed_balances(self, table_id: str, balances: Mapping[str, int]) -> None:
        """Players' wallet balances read when they sat down, for the views until the first
        settlement writes them (never over a settled value; see seed_balances.lua)."""
        if not balances:
            return
        args: list[str | int] = []
        for player, tokens in sorted(balances.items()):
            args += [player, tokens]
        await self._seed(keys=[keys.balances(table_id), keys.state(table_id)], args=args)

    async def unsettled_phases(self, table_id: str) -> int:
        """How many of the table's outbox phases the workers have not settled yet."""
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.hkeys(keys.outbox(table_id))
            pipe.hkeys(keys.settled(table_id))
            written, settled = await pipe.execute()
        return len(set(written) - set(settled))

    async def set_deadline(self, table_id: str, deadline_ms: int | None) -> None:
        """Index the table's next deadline (or drop it when it waits for nobody).

        The entry goes to this code's state version's shard; a table rewritten by newer code
        leaves the older versions' shards (older replicas must not claim it any more).
        """
        current, *older = self._deadline_keys(table_id)
        if deadline_ms is None:
            await self.redis.zrem(current, table_id)
        else:
            await self.redis.zadd(current, {table_id: deadline_ms})
        for key in older:
            await self.redis.zrem(key, table_id)

    def _deadline_keys(self, table_id: str) -> list[str]:
        """The table's deadline index shard of this code's version, then the older ones'."""
        older = [keys.deadlines(table_id, v) for v in self.readable_versions if v != self.version]
        return [keys.deadlines(table_id, self.version), *older]

    async def _index_after_commit(self, table_id: str, transition: Transition) -> None:
        """On a cluster, index the phases a commit wrote (one node: the script did). The
        shard is in another slot than the table's keys; a process dying between the commit
        and this write loses only the entry, which the sweeper's periodic rebuild puts back
        (docs/workers.md), and an unreachable shard does not undo the commit."""
        if not transition.phases or not self.cluster:
            return
        try:
            await self.index_unsettled(table_id, min(p.created_ms for p in transition.phases))
        except RedisError as exc:
            log.warning("unsettled_index_unavailable", table_id=table_id, error=repr(exc))

    async def index_unsettled(self, table_id: str, created_ms: int) -> None:
        """Put the table in the unsettled index, keeping an earlier phase's time (``LT``)."""
        await self.redis.zadd(keys.unsettled(table_id), {table_id: created_ms}, lt=True)

    async def claim_due(self, now_ms: int, *, lease_ms: int, limit: int = 50) -> list[str]:
        """Claim up to ``limit`` tables whose deadline has passed, from every shard of the
        state versions this code reads (see claim.lua). A shard whose node is down is
        skipped (its tables wait for it); the others go on."""

        async def claim(key: str) -> list[str]:
            try:
                claimed: Sequence[bytes | str] = await self._claim(
                    keys=[key], args=[now_ms, lease_ms, limit]
                )
            except RedisError as exc:
                now = time.monotonic()
                if now - self._shard_warned.get(key, -60.0) >= 30.0:  # once in 30 s per shard
                    self._shard_warned[key] = now
                    log.warning("deadline_shard_unavailable", key=key, error=repr(exc))
                return []
            return [_text(t) for t in claimed]

        shards = keys.deadline_shards(self.readable_versions)
        if not self.cluster:
            # One node holds every shard: one round trip for all of them.
            try:
                async with self.redis.pipeline(transaction=False) as pipe:
                    for key in shards:
                        pipe.evalsha(self._claim.sha, 1, key, now_ms, lease_ms, limit)
                    replies: list[Any] = await pipe.execute()
            except NoScriptError:
                pass  # not loaded yet (or the server restarted): one by one, with EVAL
            else:
                return [_text(t) for claimed in replies for t in claimed]
        found = await asyncio.gather(*(claim(key) for key in shards))
        return [table_id for batch in found for table_id in batch]

    async def deadline_of(self, table_id: str) -> int | None:
        """The deadline written with the table's state (the source of truth for the index)."""
        raw = await self.redis.hget(keys.state(table_id), "deadline")
        return None if raw is None else int(raw)

    async def rebuild_deadline_index(self) -> int:
        """Re-index every table's deadline from the state hashes (SCAN, never KEYS)."""
        restored = 0
        pattern = f"{keys.PREFIX}:table:*:state"
        async for key in self.redis.scan_iter(match=pattern, count=500):
            name = _text(key)
            table_id = name[name.index("{") + 1 : name.rindex("}")]
            deadline = await self.deadline_of(table_id)
            if deadline is not None:
                await self.redis.zadd(
                    keys.deadlines(table_id, self.version), {table_id: deadline}, nx=True
                )
                restored += 1
        return restored

    async def memory_usage(self, table_id: str) -> int:
        """Bytes Redis uses for the table's own keys (MEMORY USAGE)."""
        total = 0
        for key in (
            keys.state(table_id),
            keys.events(table_id),
            keys.requests(table_id),
            keys.outbox(table_id),
            keys.settled(table_id),
            keys.balances(table_id),
        ):
            used = await self.redis.memory_usage(key)
            total += int(used or 0)
        return total
