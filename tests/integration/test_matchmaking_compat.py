"""The matchmaking compatibility branch (legacy seating keys) on real Redis, and its metric."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator

import pytest
from prometheus_client import REGISTRY
from redis.asyncio import Redis

from services.common.redis_client import async_client
from services.matchmaking.keys import LEGACY_PREFIX, Keys
from services.matchmaking.store import MatchStore, Seating
from tests.conftest import TEST_REDIS_URL

pytestmark = pytest.mark.integration

BRANCH = "matchmaking_legacy_seating"


def _hits() -> float:
    return REGISTRY.get_sample_value("kishpa_compat_branch_hits_total", {"branch": BRANCH}) or 0.0


@pytest.fixture
async def redis() -> AsyncIterator[Redis]:
    client = async_client(TEST_REDIS_URL)
    yield client
    await client.aclose()


async def test_a_seating_under_the_old_key_space_is_found_and_counted(redis: Redis) -> None:
    player = f"p-compat-{uuid.uuid4().hex[:10]}"
    legacy = f"{LEGACY_PREFIX}:player:{player}:table"
    store = MatchStore(redis, Keys())  # the default key space: the only one with a legacy
    await redis.set(legacy, json.dumps({"table_id": "t-old", "seat": 2, "game": "kishpa"}), ex=60)
    try:
        before = _hits()
        assert await store.seating(player) == Seating("t-old", 2, "kishpa")
        assert _hits() == before + 1
        # A seating written now is read from its own key: not the compatibility branch.
        await store.remember_seating(player, Seating("t-new", 1, "hand"), ttl_s=60)
        assert await store.seating(player) == Seating("t-new", 1, "hand")
        assert _hits() == before + 1
    finally:
        await redis.delete(legacy, Keys().player_table(player))
