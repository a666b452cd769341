"""The capacity model's arithmetic (benchmarks/capacity_model.py) against hand computation."""

from __future__ import annotations

import pytest

from benchmarks.capacity_model import Costs, costs_from_bench, plan

pytestmark = pytest.mark.unit

# Round numbers, so every figure below can be checked by hand.
COSTS = Costs(
    players_per_table=4,
    watchers_per_table=4,
    seconds_per_action=3.0,
    actions_per_round=50,
    batches_per_round=2,
    cpu_ms_per_action=2.0,
    idle_cores_per_watcher=0.00001,
    tables_per_process=1000,
    redis_bytes_per_table=10_000,
    redis_commands_per_action=4.0,
    redis_connections_per_process=20.0,
    shard_memory_bytes=10_000_000,
    shard_commands_per_s=1_000.0,
    wallet_cpu_ms_per_batch=5.0,
    ledger_batches_per_s=100.0,
    worker_cpu_ms_per_phase=10.0,
    seated_per_s_per_process=20.0,
    joins_per_player_hour=3.0,
    edge_cpu_ms_per_message=0.1,
    edge_cpu_ms_per_call=1.0,
    browser_share=0.5,
    target_utilisation=0.5,
)


def test_twelve_thousand_players_by_hand() -> None:
    p = plan(12_000, COSTS)
    # 12,000 / 4 = 3,000 tables; one action per table every 3 s = 1,000 actions/s.
    assert p.tables == 3_000
    assert p.actions_per_s == pytest.approx(1_000)
    units = {c.name: (c.units, round(c.fill, 6)) for c in p.components}
    # Table CPU: 1,000 x 2 ms = 2.0 cores + 12,000 watchers x 0.00001 = 0.12 -> 2.12 cores;
    # at 50% busy 4.24 processes (the 1,000-table limit alone would need 3.0) -> 5.
    assert units["table service processes"] == (5, 4.24)
    # Redis: 3,000 x 10,000 B = 30 MB / 10 MB = 3.0 shards; 4,000 commands/s / (1,000 x 0.5)
    # = 8.0 shards -> 8.
    assert units["Redis Cluster shards"] == (8, 8.0)
    # 1,000 actions/s / 50 a round = 20 rounds/s x 2 batches = 40 batches/s.
    # Wallet: 40 x 5 ms = 0.2 cores / 0.5 = 0.4 -> 1. Ledger: 40 / (100 x 0.5) = 0.8 -> 1.
    assert units["wallet processes"] == (1, 0.4)
    assert units["ledger databases (PostgreSQL primaries)"] == (1, 0.8)
    # Workers: 40 phases/s x 10 ms = 0.4 cores / 0.5 = 0.8 -> 1.
    assert units["settlement worker processes"] == (1, 0.8)
    # Matchmaking: 12,000 x 3 / 3,600 = 10 joins/s / (20 x 0.5) = 1.0 -> 1.
    assert units["matchmaking processes"] == (1, 1.0)
    # Edge: half the players: 1,000 x 4 x 0.5 = 2,000 messages/s x 0.1 ms = 0.2 s/s, plus
    # 500 calls/s x 1 ms = 0.5 s/s -> 0.7 cores / 0.5 = 1.4 -> 2.
    assert units["edge processes"] == (2, 1.4)
    # Nothing is stuck, so the bottleneck is what needs the most units: Redis (8.0).
    assert p.bottleneck.name == "Redis Cluster shards"


def test_a_ledger_over_one_database_is_the_bottleneck_whatever_else_is_bigger() -> None:
    # 40 batches/s against a ledger that takes 40/s at full load: 40 / (40 x 0.5) = 2.0.
    p = plan(12_000, Costs(**{**COSTS.__dict__, "ledger_batches_per_s": 40.0}))
    assert p.bottleneck.name == "ledger databases (PostgreSQL primaries)"
    assert p.bottleneck.units == 2
    assert p.bottleneck.fill == pytest.approx(2.0)


def test_the_bench_step_used_is_the_largest_that_met_the_latency_aim() -> None:
    step = {
        "bench": "capacity",
        "batched": True,
        "processes": 1,
        "idle_cpu_cores_per_watcher": 0.0,
        "redis_bytes_per_table": 12_000.0,
        "redis_commands_per_action": 3.5,
        "redis_connections_per_process": 22.0,
    }
    records = [
        {**step, "tables": 1000, "action_p99_ms": 30.0, "cpu_ms_per_action": 2.2},
        {**step, "tables": 1500, "action_p99_ms": 120.0, "cpu_ms_per_action": 2.0},
        {
            **step,
            "tables": 1000,
            "action_p99_ms": 900.0,
            "cpu_ms_per_action": 9.0,
            "batched": False,
        },
    ]
    costs = costs_from_bench(records, COSTS, p99_aim_ms=50.0)
    assert costs.cpu_ms_per_action == 2.2
    assert costs.tables_per_process == 1000
    assert costs.redis_commands_per_action == 3.5
    assert costs.wallet_cpu_ms_per_batch == COSTS.wallet_cpu_ms_per_batch  # not from this bench
    # A table just dealt is not an open table's steady state (bench_redis_per_table's).
    assert costs.redis_bytes_per_table == COSTS.redis_bytes_per_table != 12_000.0
    with pytest.raises(ValueError, match="no batched"):
        costs_from_bench([records[2]], COSTS, p99_aim_ms=50.0)
