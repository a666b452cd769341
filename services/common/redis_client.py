"""Redis clients from a URL: one node or a Redis Cluster, chosen by the URL's scheme.

``redis://`` / ``rediss://`` / ``unix://`` give redis-py's standalone client;
``redis+cluster://host:port`` (or ``rediss+cluster://``) gives redis-py's cluster client,
which discovers the other nodes from that seed. Every process of the platform builds its
clients here, so one setting (``REDIS_URL``) moves the whole platform onto a cluster.

Celery's Redis broker does not speak Cluster: ``KISHPA_BROKER_URL`` stays a separate,
standalone URL (it defaults to ``REDIS_URL`` only when that is not a cluster URL).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.cluster

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


def async_client(url: str, *, max_connections: int = 32, **kwargs: Any) -> Any:
    """An asyncio client: ``redis.asyncio.Redis`` over a blocking pool of at most
    ``max_connections``, or ``RedisCluster`` with at most that many per node."""
    if is_cluster_url(url):
        return redis.asyncio.cluster.RedisCluster.from_url(
            node_url(url), max_connections=max_connections, **kwargs
        )
    pool = redis.asyncio.BlockingConnectionPool.from_url(
        url, max_connections=max_connections, timeout=10, **kwargs
    )
    return redis.asyncio.Redis(connection_pool=pool)


def sync_client(url: str, **kwargs: Any) -> Any:
    """A synchronous client (workers, tools): standalone or ``RedisCluster``."""
    if is_cluster_url(url):
        return redis.cluster.RedisCluster.from_url(node_url(url), **kwargs)
    return redis.Redis.from_url(url, **kwargs)


def pubsub_source(url: str, cluster: Any = None) -> Callable[[], redis.asyncio.Redis]:
    """Gives a standalone asyncio client for one pub/sub connection per call.

    On a cluster each call takes the next known primary (of ``cluster``, a ``RedisCluster``,
    when given; else the seed), so a listener whose node died reconnects to a live one.
    """
    if not is_cluster_url(url):
        client = redis.asyncio.Redis.from_url(url, socket_timeout=None)
        return lambda: client
    seeds = itertools.count()

    def next_node() -> redis.asyncio.Redis:
        if cluster is not None:
            nodes = [n for n in cluster.get_nodes() if n.server_type == "primary"]
            if nodes:
                node = nodes[next(seeds) % len(nodes)]
                return redis.asyncio.Redis(host=node.host, port=node.port, socket_timeout=None)
        return redis.asyncio.Redis.from_url(node_url(url), socket_timeout=None)

    return next_node
