"""Abuse limits shared by every replica of a service: counted in Redis with ``limits``.

What is limited (each limit is a setting, see docs/api.md "Rate limits"):

- guest logins (``AuthService/Login``, no token) per client address and per device id;
- player calls per player and RPC family: a family is a service's mutations (requests that
  carry a ``request_id``) or its reads, found from the descriptors;
- concurrent server streams (``WatchTable``, ``WatchQueue``) per player.

A refusal is ``RESOURCE_EXHAUSTED`` ``RATE_LIMITED`` (or ``TOO_MANY_STREAMS``) with a
``google.rpc.RetryInfo`` saying when to retry. Logins and grants are counted in Redis on
every call with the sliding-window-counter strategy of the maintained ``limits`` library;
player calls, the per-RPC path, with the same estimate counted in the process and shared in
batches (:mod:`services.common.shared_rates`). Every counter is one key (or a pair in one
hash slot), so the same code runs on one node and on a Redis Cluster. The limiter fails
open: if Redis cannot be reached, calls are not refused for it (the call itself will say
what is wrong), and a warning is logged.
"""

from __future__ import annotations

import contextlib
import hashlib
import ipaddress
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final

import grpc
from limits import RateLimitItem, parse
from limits.aio.storage import RedisClusterStorage, RedisStorage
from limits.aio.strategies import SlidingWindowCounterRateLimiter

from services.common.auth import Player, current_caller
from services.common.errors import ResourceExhausted, abort_with
from services.common.handlers import wrap_handler
from services.common.logging import get_logger
from services.common.outage import REDIS
from services.common.redis_client import async_client, is_cluster_url, node_url
from services.common.settings import Settings
from services.common.shared_rates import SharedRates
from services.common.validation import request_type

KEY_PREFIX: Final = "kishpa:limits"
LOGIN_METHOD: Final = "/kishpa.auth.v1.AuthService/Login"
STREAM_SLOT_TTL_S: Final = 3600
"""A stream counter outlives a crashed replica's streams by at most this long."""

_log = get_logger(__name__)


@dataclass(frozen=True, slots=True)
class LimitConfig:
    """The limits in force (``limits`` notation: ``"20/second"``, ``"10/hour"``)."""

    logins_per_address: RateLimitItem
    logins_per_device: RateLimitItem
    player_writes: RateLimitItem
    player_reads: RateLimitItem
    streams_per_player: int
    exempt_loopback: bool = True
    key_prefix: str = KEY_PREFIX
    trusted_proxies: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] = ()
    """Peers (an edge, a load balancer) whose ``x-forwarded-for`` names the real client."""

    @classmethod
    def from_settings(cls, settings: Settings) -> LimitConfig:
        """The limits the settings configure."""
        return cls(
            parse(settings.limit_logins_per_address),
            parse(settings.limit_logins_per_device),
            parse(settings.limit_player_writes),
            parse(settings.limit_player_reads),
            settings.limit_streams_per_player,
            settings.limit_exempt_loopback,
            settings.limits_key_prefix,
            tuple(
                ipaddress.ip_network(cidr.strip(), strict=False)
                for cidr in settings.limit_trusted_proxies.split(",")
                if cidr.strip()
            ),
        )


def client_address(peer: str) -> str:
    """The host part of a gRPC peer string (``ipv4:1.2.3.4:5678`` -> ``1.2.3.4``)."""
    kind, _, rest = peer.partition(":")
    if kind == "ipv6" and rest.startswith("["):
        return rest[1 : rest.find("]")]
    if kind in ("ipv4", "ipv6"):
        return rest.rpartition(":")[0] or rest
    return peer or "unknown"


def is_loopback(address: str) -> bool:
    """A client on this host (a local tool, a test, ``kishpa run``) or a Unix socket."""
    if address.startswith(("unix:", "/")):
        return True
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


def hashed(value: str) -> str:
    """A fixed-size, key-safe stand-in for an id in a counter's key (device and player ids:
    no client-chosen text in key names)."""
    return hashlib.sha256(value.encode()).hexdigest()[:32]


class Limiter:
    """Counts and refuses; one per process, over the service's Redis."""

    def __init__(self, redis_url: str, config: LimitConfig) -> None:
        storage: RedisStorage
        self.redis: Any = async_client(redis_url, max_connections=8)
        if is_cluster_url(redis_url):
            seed = node_url(redis_url).replace("redis://", "redis+cluster://", 1)
            storage = RedisClusterStorage(
                "async+" + seed, implementation="redispy", key_prefix=config.key_prefix
            )
        else:
            # The storage shares the limiter's bounded, blocking pool: a process's Redis
            # connections stay bounded (limits' own pool grew one per concurrent RPC).
            storage = RedisStorage(
                "async+" + redis_url,
                implementation="redispy",
                key_prefix=config.key_prefix,
                connection_pool=self.redis.connection_pool,
            )
        self._windows = SlidingWindowCounterRateLimiter(storage)
        self._rates = SharedRates(self.redis, f"{config.key_prefix}:rate")
        self.config = config

    async def close(self) -> None:
        """Share the pending counts and close the connections."""
        await self._rates.close()
        await self.redis.aclose()

    def hit_player(self, item: RateLimitItem, player_id: str, family: str) -> None:
        """Count one of a player's calls (the per-call path: no Redis round trip, see
        :mod:`services.common.shared_rates`); refuse it (``RATE_LIMITED``) when exhausted."""
        retry = self._rates.hit(item, f"{{{hashed(player_id)}}}:{family}")
        if retry is not None:
            raise ResourceExhausted(
                "RATE_LIMITED",
                f"too many requests ({item}); retry later",
                retry_after_s=round(retry, 3),
            )

    async def hit(self, item: RateLimitItem, *identifiers: str) -> None:
        """Count one call; refuse it (``RATE_LIMITED``) when ``item`` is exhausted."""
        try:
            allowed = await self._windows.hit(item, *identifiers)
            if allowed:
                return
            stats = await self._windows.get_window_stats(item, *identifiers)
        except Exception as exc:
            if not REDIS.absorbs(exc, where="rate_limits"):
                _log.warning("limits.unavailable", limit=str(item), exc_info=True)
            return  # fail open: the rate limiter must not be what takes a service down
        retry = max(0.05, stats.reset_time - time.time())
        raise ResourceExhausted(
            "RATE_LIMITED",
            f"too many requests ({item}); retry later",
            retry_after_s=round(retry, 3),
        )

    @contextlib.asynccontextmanager
    async def stream_slot(self, player_id: str) -> AsyncIterator[None]:
        """Hold one of the player's concurrent stream slots for the life of a stream."""
        key = f"{self.config.key_prefix}:streams:{{{hashed(player_id)}}}"
        try:
            async with self.redis.pipeline(transaction=True) as pipe:
                pipe.incr(key)
                pipe.expire(key, STREAM_SLOT_TTL_S)
                count, _ = await pipe.execute()
        except Exception as exc:
            if not REDIS.absorbs(exc, where="rate_limits"):
                _log.warning("limits.unavailable", limit="streams", exc_info=True)
            yield
            return
        try:
            if int(count) > self.config.streams_per_player:
                raise ResourceExhausted(
                    "TOO_MANY_STREAMS",
                    f"at most {self.config.streams_per_player} open streams per player",
                    retry_after_s=1.0,
                )
            yield
        finally:
            with contextlib.suppress(Exception):
                await self.redis.eval(_RELEASE_SLOT, 1, key)

    async def grant_once(self, device_key: str, player_id: str) -> bool:
        """True the first time ``device_key`` asks for the starting grant (for ``player_id``)."""
        key = f"{self.config.key_prefix}:grant:{{{hashed(device_key)}}}"
        return bool(await self.redis.set(key, player_id, nx=True))

    async def grant_holder(self, device_key: str) -> str | None:
        """The player the device's starting grant was claimed for, if any."""
        key = f"{self.config.key_prefix}:grant:{{{hashed(device_key)}}}"
        value = await self.redis.get(key)
        return None if value is None else value.decode()

    async def move_grant(self, device_key: str, holder: str, player_id: str) -> bool:
        """Move the device's grant from ``holder`` (whose wallet was never opened) to
        ``player_id``; False when another login moved it first."""
        key = f"{self.config.key_prefix}:grant:{{{hashed(device_key)}}}"
        moved = await self.redis.eval(_MOVE_GRANT, 1, key, holder, player_id)
        return bool(moved)


_RELEASE_SLOT = """
local open = redis.call('DECR', KEYS[1])
if open <= 0 then
  redis.call('DEL', KEYS[1])
end
return open
"""
"""Give a stream slot back, atomically: a counter back at 0 is deleted (a player who has
left keeps no key), and so is one a plain ``DECR`` would have recreated at -1 without a TTL
after it expired under a stream longer than ``STREAM_SLOT_TTL_S``."""

_MOVE_GRANT = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2])
  return 1
end
return 0
"""


def limiter_from_settings(settings: Settings) -> Limiter | None:
    """The process's limiter over ``REDIS_URL``, or None when ``KISHPA_RATE_LIMITS=0``."""
    if not settings.rate_limits:
        return None
    return Limiter(settings.redis_url, LimitConfig.from_settings(settings))


def _trusted(address: str, proxies: tuple[Any, ...]) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in network for network in proxies)


def caller_address(peer: str, metadata: Any, config: LimitConfig) -> str:
    """The client's address: the peer's, or, when the peer is a trusted proxy, the nearest
    address in ``x-forwarded-for`` that is not itself a trusted proxy."""
    address = client_address(peer)
    if not config.trusted_proxies or not _trusted(address, config.trusted_proxies):
        return address
    forwarded = ""
    for key, value in metadata or ():
        if key.lower() == "x-forwarded-for":
            forwarded = value.decode() if isinstance(value, bytes) else str(value)
    for hop in reversed([h.strip() for h in forwarded.split(",") if h.strip()][:32]):
        if not _trusted(hop, config.trusted_proxies):
            try:
                return str(ipaddress.ip_address(hop))
            except ValueError:
                return address  # a malformed header: count the proxy itself
    return address


def device_key(device_id: str, address: str, config: LimitConfig) -> str | None:
    """Whose starting grant a guest login takes: its device id's, else its client
    address's; None for a loopback client without a device id (exempt, see LimitConfig)."""
    if device_id:
        return f"device:{device_id}"
    if config.exempt_loopback and is_loopback(address):
        return None
    return f"address:{address}"


class LimitsInterceptor(grpc.aio.ServerInterceptor):
    """Applies the :class:`Limiter` to every call (after auth and validation)."""

    def __init__(self, limiter: Limiter) -> None:
        self._limiter = limiter

    async def intercept_service(
        self,
        continuation: Callable[
            [grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler[Any, Any] | None]
        ],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any] | None:
        handler = await continuation(handler_call_details)
        method: str = handler_call_details.method
        known = request_type(method)
        if handler is None or known is None or not known.checked:
            return handler
        limiter = self._limiter
        config = limiter.config
        service = method.lstrip("/").partition("/")[0]
        writes = "request_id" in known.message_class.DESCRIPTOR.fields_by_name
        family = f"{service}:{'write' if writes else 'read'}"
        item = config.player_writes if writes else config.player_reads
        streaming = handler.unary_stream is not None

        async def before(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> None:
            try:
                if method == LOGIN_METHOD:
                    address = caller_address(context.peer(), context.invocation_metadata(), config)
                    if not (config.exempt_loopback and is_loopback(address)):
                        await limiter.hit(config.logins_per_address, "login", "address", address)
                    device = str(getattr(request, "device_id", "") or "")
                    if device:
                        await limiter.hit(
                            config.logins_per_device, "login", "device", hashed(device)
                        )
                    return
                caller = current_caller()
                if isinstance(caller, Player):
                    limiter.hit_player(item, caller.player_id, family)
            except ResourceExhausted as exc:
                _log.info("rpc.rate_limited", method=method, reason=exc.reason)
                await abort_with(context, exc)

        @contextlib.asynccontextmanager
        async def around(
            _: str, context: grpc.aio.ServicerContext[Any, Any]
        ) -> AsyncIterator[None]:
            caller = current_caller()
            if not streaming or not isinstance(caller, Player):
                yield
                return
            try:
                async with limiter.stream_slot(caller.player_id):
                    yield
            except ResourceExhausted as exc:
                await abort_with(context, exc)

        return wrap_handler(handler, method, around, before=before)
