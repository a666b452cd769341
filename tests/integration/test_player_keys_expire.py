"""A player's keys in Redis after he has gone (issue 27, the soak's key growth): what may
expire does, what guards money does not. Real Redis (``TEST_REDIS_URL``), a private prefix."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest
from limits import parse

from services.common.errors import ResourceExhausted
from services.common.limits import LimitConfig, Limiter

pytestmark = pytest.mark.integration


@pytest.fixture
async def limiter(redis_url: str) -> AsyncIterator[Limiter]:
    config = LimitConfig(
        parse("10/hour"), parse("10/hour"), parse("20/second"), parse("50/second"),
        streams_per_player=2, key_prefix=f"kishpa:limits-{uuid.uuid4().hex}",
    )  # fmt: skip
    limiter = Limiter(redis_url, config)
    yield limiter
    keys = [key async for key in limiter.redis.scan_iter(match=f"{config.key_prefix}:*")]
    for key in keys:
        await limiter.redis.delete(key)
    await limiter.close()


async def _keys(limiter: Limiter) -> dict[str, int]:
    """Every key of the limiter's prefix -> its TTL (-1: never expires)."""
    pattern = f"{limiter.config.key_prefix}:*"
    return {
        key.decode(): int(await limiter.redis.ttl(key))
        async for key in limiter.redis.scan_iter(match=pattern)
    }


async def test_a_players_stream_slots_leave_no_key_once_his_streams_end(limiter: Limiter) -> None:
    async with limiter.stream_slot("p1"), limiter.stream_slot("p1"):
        held = await _keys(limiter)
        assert len(held) == 1
        assert 0 < next(iter(held.values())) <= 3600  # while held, it expires on its own
        with pytest.raises(ResourceExhausted):
            async with limiter.stream_slot("p1"):
                pass  # the third is refused (and gives its slot back)
    assert await _keys(limiter) == {}  # the player left: no key stays behind


async def test_a_slot_counter_that_expired_under_a_long_stream_is_not_recreated(
    limiter: Limiter,
) -> None:
    async with limiter.stream_slot("p2"):
        for key in await _keys(limiter):
            await limiter.redis.delete(key)  # as its TTL would, under a stream > 1 h
    # A plain DECR left a -1 without a TTL here: one key forever and a slot too many.
    assert await _keys(limiter) == {}


async def test_the_device_grant_marker_never_expires_and_the_login_counters_do(
    limiter: Limiter,
) -> None:
    assert await limiter.grant_once("device:d1", "p3")
    await limiter.hit(limiter.config.logins_per_device, "login", "device", "d1")
    keys = await _keys(limiter)
    grants = {k: ttl for k, ttl in keys.items() if ":grant:" in k}
    counters = {k: ttl for k, ttl in keys.items() if ":grant:" not in k}
    # The marker guards money (2,000 tokens once per device): it must outlive the device.
    assert list(grants.values()) == [-1]
    assert counters
    assert all(0 < ttl <= 2 * 3600 for ttl in counters.values()), counters
    assert not await limiter.grant_once("device:d1", "p4")
