"""The capacity model of docs/capacity.md: measured per-unit costs -> fleet sizes.

Reads the per-unit costs a benchmark measured (``bench_capacity.py --json FILE`` writes one
record per step; the step used is the largest whose action p99 met the latency aim), keeps
the other inputs (wallet, workers, matchmaking, edge, the game's pace) as documented
defaults that flags override, and prints, for 10k, 100k and 1M concurrent players, how many
processes, Redis Cluster shards, ledger databases and workers serve them, and the first
bottleneck. Rerun it on a new benchmark's output so the model stays true when the code
changes:

    .venv/bin/python benchmarks/bench_capacity.py --steps 1000 --json cap.json
    .venv/bin/python benchmarks/capacity_model.py cap.json [--wallet-cpu-ms 0.9 ...]

The arithmetic is in ``plan`` (pure; ``tests/unit/test_capacity_model.py`` checks it against
hand-computed values).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

PLAYERS = (10_000, 100_000, 1_000_000)


@dataclass(frozen=True)
class Costs:
    """Per-unit costs and limits. The table-service figures come from bench_capacity's JSON;
    the defaults are this repository's measurements (docs/BENCHMARKS.md) or, where marked,
    estimates to re-measure."""

    # The game's pace (docs/BENCHMARKS.md, "Live tables at human pace").
    players_per_table: int = 4
    watchers_per_table: int = 4
    seconds_per_action: float = 3.0  # one action per table every 3 s
    actions_per_round: int = 60
    batches_per_round: int = 2  # the start and the end settlement
    # Table service (bench_capacity, 1,000 tables x 4 watchers, one process).
    cpu_ms_per_action: float = 2.39
    idle_cores_per_watcher: float = 0.0000005
    tables_per_process: int = 1000  # the latency aim (p99 <= 50 ms) held up to here
    redis_bytes_per_table: float = 32.2 * 1024  # bench_redis_per_table.py: open table, 1 round
    # Every command Redis runs per action committed, a script's own included (bench_capacity,
    # 1,000 tables: 22; 1.7 of them the client's round trips; docs/BENCHMARKS.md, issue 34).
    redis_commands_per_action: float = 22.0
    redis_connections_per_process: float = 23.0
    # Redis Cluster shard budget (a primary plus its replica): memory an estimate to re-measure;
    # commands what one Redis core ran (0.18-0.20 ms of Redis CPU for 22 commands an action,
    # measured on a loaded machine: re-measure on the production instance type).
    shard_memory_bytes: float = 8 * 1024**3
    shard_commands_per_s: float = 120_000.0
    # Wallet (bench_wallet): the wallet process's CPU per batch; one ledger primary's batches/s.
    wallet_cpu_ms_per_batch: float = 2.5
    ledger_batches_per_s: float = 2_000.0  # the aim of issue 25; estimate to re-measure
    # Settlement workers: CPU per settled phase (estimate: read, rules, one RPC, one script).
    worker_cpu_ms_per_phase: float = 10.0
    # Matchmaking: players seated per second by one process (bench_matchmaking); how often a
    # player joins a queue (estimate: a new table every 30 minutes).
    seated_per_s_per_process: float = 1_000.0
    joins_per_player_hour: float = 2.0
    # Edge: CPU per streamed message and per unary call forwarded (estimates from
    # bench_edge's extra latency: ~0.85 ms a unary call, almost nothing a streamed event).
    edge_cpu_ms_per_message: float = 0.05
    edge_cpu_ms_per_call: float = 0.85
    browser_share: float = 1.0  # every player through the edge: the worst case
    # Every process is given one core and run at most this busy (headroom for bursts).
    target_utilisation: float = 0.7


@dataclass(frozen=True)
class Component:
    """One part of the fleet at one size: load, units (processes, shards, databases) needed."""

    name: str
    load: str
    units: int
    fill: float  # units needed before rounding up: what the bottleneck is judged by
    scales_out: bool = True


@dataclass(frozen=True)
class Plan:
    """The fleet for ``players`` concurrent players."""

    players: int
    tables: float
    actions_per_s: float
    components: tuple[Component, ...]

    @property
    def bottleneck(self) -> Component:
        """What runs out first: a component that cannot scale out and is over one unit, else
        the one that needs the most units (the one you keep adding)."""
        stuck = [c for c in self.components if not c.scales_out and c.fill > 1]
        pool = stuck or list(self.components)
        return max(pool, key=lambda c: c.fill)


def _units(fill: float) -> int:
    return max(1, math.ceil(fill - 1e-9))


def plan(players: int, c: Costs) -> Plan:
    """Size every component for ``players`` concurrent players."""
    tables = players / c.players_per_table
    watchers = tables * c.watchers_per_table
    actions = tables / c.seconds_per_action
    busy = c.target_utilisation
    # Table service: CPU per action plus idle watchers, and the per-process table limit.
    table_cores = actions * c.cpu_ms_per_action / 1000 + watchers * c.idle_cores_per_watcher
    table_fill = max(table_cores / busy, tables / c.tables_per_process)
    table_procs = _units(table_fill)
    # Redis Cluster: memory and commands.
    memory = tables * c.redis_bytes_per_table
    commands = actions * c.redis_commands_per_action
    redis_fill = max(memory / c.shard_memory_bytes, commands / (c.shard_commands_per_s * busy))
    # Wallet and its one ledger database (the ledger is not sharded: it cannot scale out).
    batches = actions / c.actions_per_round * c.batches_per_round
    wallet_fill = batches * c.wallet_cpu_ms_per_batch / 1000 / busy
    ledger_fill = batches / (c.ledger_batches_per_s * busy)
    worker_fill = batches * c.worker_cpu_ms_per_phase / 1000 / busy
    joins = players * c.joins_per_player_hour / 3600
    matchmaking_fill = joins / (c.seated_per_s_per_process * busy)
    messages = actions * c.watchers_per_table * c.browser_share
    calls = actions * c.browser_share
    edge_fill = (messages * c.edge_cpu_ms_per_message + calls * c.edge_cpu_ms_per_call) / 1000
    edge_fill /= busy
    components = (
        Component(
            "table service processes",
            f"{actions:,.0f} actions/s, {watchers:,.0f} watchers, {table_cores:.1f} cores",
            table_procs,
            table_fill,
        ),
        Component(
            "Redis Cluster shards",
            f"{memory / 1024**3:.2f} GiB, {commands:,.0f} commands/s, "
            f"{table_procs * c.redis_connections_per_process:,.0f} connections",
            _units(redis_fill),
            redis_fill,
        ),
        Component(
            "wallet processes",
            f"{batches:,.0f} batches/s",
            _units(wallet_fill),
            wallet_fill,
        ),
        Component(
            "ledger databases (PostgreSQL primaries)",
            f"{batches:,.0f} batches/s of {c.ledger_batches_per_s:,.0f}/s",
            _units(ledger_fill),
            ledger_fill,
            scales_out=False,
        ),
        Component(
            "settlement worker processes",
            f"{batches:,.0f} phases/s",
            _units(worker_fill),
            worker_fill,
        ),
        Component(
            "matchmaking processes",
            f"{joins:,.1f} joins/s",
            _units(matchmaking_fill),
            matchmaking_fill,
        ),
        Component(
            "edge processes",
            f"{messages:,.0f} messages/s, {calls:,.0f} calls/s",
            _units(edge_fill),
            edge_fill,
        ),
    )
    return Plan(players, tables, actions, components)


def costs_from_bench(records: list[dict[str, Any]], base: Costs, p99_aim_ms: float) -> Costs:
    """``base`` with the table-service costs of the largest step that met ``p99_aim_ms``
    (or of the smallest step if none did).

    Not its Redis bytes per table: bench_capacity reads them from tables just dealt (a few
    actions in at most), where an open table holds its current and its previous round;
    ``base`` keeps bench_redis_per_table's steady state (docs/capacity.md)."""
    batched = [r for r in records if r.get("bench") == "capacity" and r.get("batched", True)]
    if not batched:
        raise ValueError("no batched bench_capacity step in the JSON")
    met = [r for r in batched if r["action_p99_ms"] <= p99_aim_ms]
    step = max(met, key=lambda r: r["tables"]) if met else min(batched, key=lambda r: r["tables"])
    tables_per_process = int(step["tables"] / step.get("processes", 1)) if met else 0
    return replace(
        base,
        cpu_ms_per_action=step["cpu_ms_per_action"],
        idle_cores_per_watcher=step["idle_cpu_cores_per_watcher"],
        redis_commands_per_action=step["redis_commands_per_action"],
        redis_connections_per_process=step["redis_connections_per_process"],
        tables_per_process=tables_per_process or base.tables_per_process,
    )


def render(plans: list[Plan]) -> str:
    """The model as markdown tables, one per player count."""
    out = []
    for p in plans:
        out.append(
            f"### {p.players:,} concurrent players ({p.tables:,.0f} tables, "
            f"{p.actions_per_s:,.0f} actions/s)\n"
        )
        out.append("| component | load | units |")
        out.append("|---|---|---|")
        for comp in p.components:
            out.append(f"| {comp.name} | {comp.load} | {comp.units} ({comp.fill:.2f}) |")
        b = p.bottleneck
        verdict = "cannot scale out" if not b.scales_out and b.fill > 1 else "add units"
        out.append(f"\nFirst bottleneck: **{b.name}** ({b.fill:.2f} units; {verdict}).\n")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bench_json", nargs="?", help="bench_capacity.py --json output")
    parser.add_argument("--p99-aim-ms", type=float, default=50.0)
    parser.add_argument("--players", default=",".join(str(n) for n in PLAYERS))
    for f in fields(Costs):
        parser.add_argument("--" + f.name.replace("_", "-"), type=type(f.default), default=None)
    args = parser.parse_args(argv)
    costs = Costs()
    if args.bench_json:
        costs = costs_from_bench(
            json.loads(Path(args.bench_json).read_text()), costs, args.p99_aim_ms
        )
    overrides = {
        f.name: getattr(args, f.name) for f in fields(Costs) if getattr(args, f.name) is not None
    }
    costs = replace(costs, **overrides)
    print("inputs: " + ", ".join(f"{f.name}={getattr(costs, f.name)}" for f in fields(Costs)))
    print()
    print(render([plan(int(n), costs) for n in args.players.split(",")]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
