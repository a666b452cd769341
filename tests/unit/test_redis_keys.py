"""The cluster-ready key design: hash slots, index shards, state versions (no Redis needed)."""

from __future__ import annotations

import itertools
import secrets

import pytest
from redis.crc import key_slot as redis_key_slot

from devkit.redis_servers import slot_ranges
from shared import keys
from workers.deadletter import deadletter_index, deadletter_list

pytestmark = pytest.mark.unit


def test_our_slot_function_is_redis_cluster_s() -> None:
    for _ in range(500):
        table_id = "t" + secrets.token_hex(12)
        assert keys.key_slot(table_id) == redis_key_slot(table_id.encode())
        # Every key of a table carries its id as hash tag: one slot per table.
        assert redis_key_slot(keys.state(table_id).encode()) == keys.key_slot(table_id)


def test_each_index_shard_key_lives_in_its_own_slot_range() -> None:
    per = keys.CLUSTER_SLOTS // keys.INDEX_SHARDS
    for shard in range(keys.INDEX_SHARDS):
        for key in (
            keys.deadline_shard(shard),
            keys.unsettled_shard(shard),
            deadletter_list(shard),
            deadletter_index(shard),
        ):
            assert redis_key_slot(key.encode()) // per == shard, key
    table_id = "t" + secrets.token_hex(12)
    assert keys.deadlines(table_id) == keys.deadline_shard(keys.shard_of(table_id))
    assert keys.unsettled(table_id) == keys.unsettled_shard(keys.shard_of(table_id))
    assert keys.unsettled_shards() == [keys.unsettled_shard(s) for s in range(16)]


def test_deadline_indexes_are_per_state_version() -> None:
    table_id = "t" + secrets.token_hex(12)
    assert keys.deadlines(table_id, 1) != keys.deadlines(table_id, 2)
    assert keys.deadline_shards((1,)) == [keys.deadline_shard(s, 1) for s in range(16)]
    assert set(keys.deadline_shards((1, 2))) >= set(keys.deadline_shards((1,)))


def test_test_clusters_cut_slots_on_shard_boundaries() -> None:
    ranges = slot_ranges(3)
    assert ranges[0][0] == 0
    assert ranges[-1][1] == keys.CLUSTER_SLOTS - 1
    per = keys.CLUSTER_SLOTS // keys.INDEX_SHARDS
    for (_, last), (first, _) in itertools.pairwise(ranges):
        assert first == last + 1
        assert first % per == 0
