"""Redis clients from a URL: one node or a Redis Cluster, chosen by the URL's scheme.

``redis://`` / ``rediss://`` / ``unix://`` give redis-py's standalone client;
``redis+cluster://host:port`` (or ``rediss+cluster://``) gives redis-py's cluster client,
which discovers the other nodes from that seed. Every process of the platform builds its
clients here, so one setting (``REDIS_URL``) moves the whole platform onto a cluster.

Celery's Redis broker does not speak Cluster: ``KISHPA_BROKER_URL`` stays a separate,
standalone URL (it defaults to ``REDIS_URL`` only when that is not a cluster URL).
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.cluster
import redis.exceptions
from redis._parsers.commands import AsyncCommandsParser

from shared.retry import REDIS_COMMAND_TIMEOUT_S, REDIS_CONNECT_TIMEOUT_S

CLUSTER_SCHEMES = {"redis+cluster": "redis", "rediss+cluster": "rediss"}


def is_cluster_url(url: str) -> bool:
    """Whether ``url`` names a Redis Cluster (``redis+cluster://``)."""
    return urlsplit(url).scheme in CLUSTER_SCHEMES


def node_url(url: str) -> str:
    """The plain ``redis://`` URL of a cluster URL's seed node (a standalone URL unchanged)."""
    parts = urlsplit(url)
    scheme = CLUSTER_SCHEMES.get(parts.scheme)
    if scheme is None:
        return url
    # A cluster has only database 0.
    return urlunsplit(parts._replace(scheme=scheme, path=""))


class _CommandTableOnce(AsyncCommandsParser):
    """redis-py's cluster client reloads its command table (``COMMAND``) from its default
    node, the first master, every time it refreshes the slot map after an error: while
    that master is down, every command of every slot failed. The table does not change
    while the servers run, so it is loaded once and kept."""

    async def initialize(self, node: Any = None) -> None:
        if not self.commands:
            await super().initialize(node)
        elif node is not None:
            self.node = node  # where COMMAND GETKEYS goes (movable-key commands)


_CLOSED_TRANSPORT_ERRORS = (RuntimeError,)
"""What a write on a connection whose transport uvloop already tore down raises instead of
an OSError: ``RuntimeError: unable to perform operation on <TCPTransport closed=True>;
handler is closed``. redis-py 8.2 turns the asyncio loop's own errors (the AttributeError and
TypeError of its issue #4287) into ``ConnectionError`` itself, but not uvloop's."""


class GuardedConnection(redis.asyncio.Connection):
    """redis-py's asyncio connection, plus two things it still lacks in 8.2 (the version the
    lock pins; tests/integration/test_redis_write_guard.py shows both, against the library's
    own connection): a write on a transport uvloop tore down raises ``ConnectionError``, not
    a ``RuntimeError`` that passes every retry layer (the cluster client's
    ``ERRORS_ALLOW_RETRY`` matches exact types) and reached callers as INTERNAL while a cluster
    master restarted; and a connection whose peer closed it while it sat idle in the pool
    reconnects before writing, where redis-py raises "closed by the server before write".
    Remove when the library does both."""

    async def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        writer = getattr(self, "_writer", None)
        if self.is_connected and (writer is None or writer.transport.is_closing()):
            # The peer closed it while idle in the pool: reconnect instead of writing.
            await self.disconnect(nowait=True)
        try:
            await super().send_packed_command(command, check_health=check_health)
        except _CLOSED_TRANSPORT_ERRORS as exc:
            writer = getattr(self, "_writer", None)
            if writer is not None and not writer.transport.is_closing():
                raise  # not a closed transport: a real bug, keep it loud
            await self.disconnect(nowait=True)
            raise redis.exceptions.ConnectionError(
                f"connection to {self.host}:{self.port} closed while writing"
            ) from exc


class _WaitingCluster(redis.asyncio.cluster.RedisCluster):
    """redis-py's asyncio cluster client raises ``MaxConnectionsError`` when a node's pool is
    exhausted; callers here wait for a connection instead, as the standalone client's
    blocking pool makes them (at most ``max_connections`` commands in flight)."""

    gate: asyncio.Semaphore

    async def execute_command(self, *args: Any, **kwargs: Any) -> Any:
        async with self.gate:
            return await super().execute_command(*args, **kwargs)

    def pipeline(self, transaction: Any = None, shard_hint: Any = None) -> Any:
        # A pipeline takes its connections straight from the nodes' pools (redis-py 8.2's
        # transactions too), past ``execute_command``: it waits at the same gate, or 200
        # concurrent transactions raised MaxConnectionsError on an 8-connection pool.
        pipe: Any = super().pipeline(transaction, shard_hint)
        execute = pipe.execute
        gate = self.gate

        async def gated_execute(*args: Any, **kwargs: Any) -> Any:
            async with gate:
                return await execute(*args, **kwargs)

        pipe.execute = gated_execute
        return pipe


def async_client(url: str, *, max_connections: int = 32, **kwargs: Any) -> Any:
    """An asyncio client: ``redis.asyncio.Redis`` over a blocking pool of at most
    ``max_connections``, or ``RedisCluster`` with at most that many per node.

    Every command has a deadline (``shared.retry.REDIS_COMMAND_TIMEOUT_S``, connecting
    ``REDIS_CONNECT_TIMEOUT_S``) unless the caller names its own: a Redis that stops
    answering makes a request fail UNAVAILABLE, never hang."""
    kwargs.setdefault("socket_timeout", REDIS_COMMAND_TIMEOUT_S)
    kwargs.setdefault("socket_connect_timeout", REDIS_CONNECT_TIMEOUT_S)
    if is_cluster_url(url):
        cluster = _WaitingCluster.from_url(node_url(url), max_connections=max_connections, **kwargs)
        assert isinstance(cluster, _WaitingCluster)
        # Every node's connections, present and discovered later, carry the write guard.
        cluster.nodes_manager.connection_kwargs["connection_class"] = GuardedConnection
        for node in cluster.nodes_manager.startup_nodes.values():
            node.connection_class = GuardedConnection
        cluster.gate = asyncio.Semaphore(max_connections)
        cluster.commands_parser = _CommandTableOnce()
        return cluster
    kwargs.setdefault("connection_class", GuardedConnection)
    if urlsplit(url).scheme != "redis":
        kwargs.pop("connection_class")  # rediss:// and unix:// keep their own classes
    pool = redis.asyncio.BlockingConnectionPool.from_url(
        url, max_connections=max_connections, timeout=10, **kwargs
    )
    return redis.asyncio.Redis(connection_pool=pool)


def sync_client(url: str, **kwargs: Any) -> Any:
    """A synchronous client (workers, tools): standalone or ``RedisCluster``."""
    if is_cluster_url(url):
        return redis.cluster.RedisCluster.from_url(node_url(url), **kwargs)
    return redis.Redis.from_url(url, **kwargs)


def pubsub_source(client: Any) -> Any:
    """Where a pub/sub listener takes its connection: a standalone ``client`` itself, or for
    a ``RedisCluster`` a function giving a standalone client of the next primary per call
    (a plain ``PUBLISH`` on a cluster reaches every node, and a listener whose node died
    reconnects to a live one)."""
    if not isinstance(client, redis.asyncio.cluster.RedisCluster):
        return client
    turn = itertools.count()

    def next_node() -> redis.asyncio.Redis:
        # Before its first command a cluster client knows only its startup nodes.
        nodes = [n for n in client.get_nodes() if n.server_type == "primary"]
        nodes = nodes or list(client.nodes_manager.startup_nodes.values())
        node = nodes[next(turn) % len(nodes)]
        return redis.asyncio.Redis(host=node.host, port=int(node.port))

    return next_node
