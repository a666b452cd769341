"""The round archive at scale on PostgreSQL: a player's last 50 games, and the cost per round.

Builds an archive of ``--rounds`` ended rounds (default 10 million) in a scratch database
(``bench_archive`` on ``--admin-url``; kept with ``--keep`` and reused by a later run of the
same size), with SQL alone (``INSERT ... SELECT generate_series`` into the monthly
partitions, 12 months), three players a round out of ``--players``, every round carrying a
real-sized public round record (a Kishpa round's ``RoundRecord``: three deals, 40 draws, 90
moves). Then measures:

- **the query alone**: ``ArchiveStore.player_games(limit=50)`` for random players (p50/p99);
- **through the RPC**: ``HistoryService.ListPlayerGames`` (page_size 50) on a real gRPC
  server (the table service's interceptors: auth, validation, errors), one client, end to end;
- **the write cost per round**: what the settlement worker does for a Kishpa round (its
  ``start`` phase, then its ``end`` phase with the round and three players' games), CPU of
  the writer and wall time, on the same database;
- **bytes per round**: the three tables' total size (heap, TOAST, indexes) over the rounds.

Usage: .venv/bin/python benchmarks/bench_archive.py [--rounds N] [--players P] [--keep]
[--admin-url postgresql+psycopg://postgres@127.0.0.1:5432/postgres]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # benchmarks/ and devkit/ run from the tree

import grpc  # noqa: E402
import sqlalchemy as sa  # noqa: E402
from sqlalchemy.engine import make_url  # noqa: E402

from archive import partitions  # noqa: E402
from archive.database import create_archive_engine  # noqa: E402
from archive.migrate import upgrade  # noqa: E402
from archive.round_fold import RoundRecord  # noqa: E402
from archive.round_proto import public_bytes  # noqa: E402
from archive.store import ArchiveStore, PhaseRow, RoundRow  # noqa: E402
from benchmarks._common import pct  # noqa: E402
from kishpa.table.v1 import history_pb2, history_pb2_grpc  # noqa: E402
from services.common.auth import TokenAuthority, bearer_metadata  # noqa: E402
from services.common.server import create_server  # noqa: E402
from services.common.settings import load_settings  # noqa: E402
from services.table.history import History  # noqa: E402
from services.table.server import history_registration  # noqa: E402

DEFAULT_ADMIN_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
START_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z
MONTHS = 12
SPAN_MS = 365 * 86_400_000
SEATS = 3

# One round per g of the series: table g / 8, round g % 8 + 1 (eight rounds a table), ended
# evenly over the year, three players (g * 7 + seat) % players.
_WHEN = "(CAST(:start AS bigint) + g * CAST(:step AS bigint))"
_SERIES = "generate_series(CAST(:low AS bigint), CAST(:high AS bigint)) AS g"
_TABLE = "'t' || lpad((g / 8)::text, 24, '0')"
_PLAYER = "'p' || ((g * 7 + {seat}) % CAST(:players AS int))"
ROUNDS_SQL = (
    "INSERT INTO archive_rounds (table_id, round_no, ended_ms, game, settled_round, stake,"  # noqa: S608 (constants; values bound)
    " players, record, results, batch_ids, archived_ms) SELECT "
    + _TABLE
    + ", (g % 8) + 1, "
    + _WHEN
    + ", 'kishpa', (g % 8) + 1, 1, '[\"' || "
    + " || '\",\"' || ".join(_PLAYER.format(seat=s) for s in range(3))
    + " || '\"]', :blob, :results, '[\"' || (2 * g) || '\",\"' || (2 * g + 1) || '\"]', "
    + _WHEN
    + " + 50 FROM "
    + _SERIES
)
GAMES_SQL = (
    "INSERT INTO archive_player_games (player_id, ended_ms, table_id, round_no, game, stake,"  # noqa: S608 (constants; values bound)
    " seat, seats, net_tokens, result) SELECT 'p' || ((g * 7 + s) % CAST(:players AS int)), "
    + _WHEN
    + ", "
    + _TABLE
    + ", (g % 8) + 1, 'kishpa', 1, s, 3, 3 - 2 * s,"
    " CASE WHEN s = 0 THEN 'won' ELSE 'lost' END FROM " + _SERIES + ", generate_series(0, 2) AS s"
)
PHASES_SQL = (
    "INSERT INTO archive_phases (table_id, round_no, phase, created_ms, game, batch_id,"  # noqa: S608 (constants; values bound)
    " postings, archived_ms) SELECT "
    + _TABLE
    + ", (g % 8) + 1, ph, "
    + _WHEN
    + " - (CASE WHEN ph = 'start' THEN 60000 ELSE 0 END), 'kishpa',"
    " (2 * g + (CASE WHEN ph = 'start' THEN 0 ELSE 1 END))::text, :postings, "
    + _WHEN
    + " FROM "
    + _SERIES
    + ", unnest(ARRAY['start', 'end']) AS ph"
)


def sample_record(table_id: str = "t" * 25, round_no: int = 7) -> bytes:
    """A real-sized public record of a three-seat Kishpa round."""
    tiles = iter(range(106))
    hands = {s: [next(tiles) for _ in range(15 if s == 0 else 14)] for s in range(SEATS)}
    draws = [(n % SEATS, next(tiles), 60 - n) for n in range(40)]
    moves = [
        (n % SEATS, ("draw", "discard")[n % 2], [n % 106], f"1767225{n:06d}-0") for n in range(90)
    ]
    record = RoundRecord(
        table_id=table_id,
        round_no=round_no,
        players=[f"player-{n:07d}" for n in range(SEATS)],
        starter=0,
        commitment="c" * 64,
        server_seed="s" * 160,
        client_seeds=["x" * 16] * SEATS,
        kishpa="R7",
        kishpa_id=10,
        hands=hands,
        draws=draws,
        moves=moves,
        precommitment="p" * 64,
        precommitment_event_id="1767225000000-0",
        contributions=[(s, "y" * 16, f"176722500000{s}-0") for s in range(SEATS)],
        deal_event_id="1767225000001-0",
        seat_client_seeds=["x" * 16] * SEATS,
    )
    return public_bytes(record)


def build(url: str, rounds: int, players: int) -> float:
    """Fill the archive with SQL alone; returns the seconds it took."""
    started = time.perf_counter()
    upgrade(url)
    engine = create_archive_engine(url, pool_size=1)
    blob = sample_record()
    step = SPAN_MS // rounds
    with engine.begin() as conn:
        # From the month before (a round's start phase may fall in it) to a month after.
        year, month = partitions.month_of(START_MS - 86_400_000)
        for _ in range(MONTHS + 2):
            partitions.ensure_month(conn, year, month)
            year, month = partitions.next_month(year, month)
    batch = 250_000
    for low in range(1, rounds + 1, batch):
        high = min(rounds, low + batch - 1)
        with engine.begin() as conn:
            params = {
                "low": low,
                "high": high,
                "start": START_MS,
                "step": step,
                "players": players,
                "blob": blob,
                "results": json.dumps({"p1": 3, "p2": -1, "p3": -2}),
                "postings": json.dumps(
                    [{"from": "player:p2", "to": "player:p1", "amount": 1, "reason": "win"}]
                ),
            }
            conn.execute(sa.text(ROUNDS_SQL), params)
            conn.execute(
                sa.text(GAMES_SQL),
                {k: v for k, v in params.items() if k not in ("blob", "results", "postings")},
            )
            conn.execute(
                sa.text(PHASES_SQL),
                {k: v for k, v in params.items() if k not in ("blob", "players", "results")},
            )
        print(f"  built {high:,} rounds ({time.perf_counter() - started:.0f} s)", flush=True)
    with engine.begin() as conn:
        conn.exec_driver_sql("ANALYZE archive_rounds")
        conn.exec_driver_sql("ANALYZE archive_player_games")
        conn.exec_driver_sql("ANALYZE archive_phases")
    engine.dispose()
    return time.perf_counter() - started


def _complete(url: str, rounds: int) -> bool:
    """Whether a kept database holds the whole archive of this size."""
    engine = create_archive_engine(url, pool_size=1)
    try:
        with engine.connect() as conn:
            found = conn.execute(sa.text("SELECT count(*) FROM archive_phases")).scalar()
    except sa.exc.SQLAlchemyError:
        return False
    finally:
        engine.dispose()
    return int(found or 0) == 2 * rounds


def bytes_per_round(url: str, rounds: int) -> dict[str, float]:
    engine = create_archive_engine(url, pool_size=1)
    out = {}
    with engine.connect() as conn:
        for table in ("archive_rounds", "archive_phases", "archive_player_games"):
            size = conn.execute(
                sa.text(
                    "SELECT coalesce(sum(pg_total_relation_size(i.inhrelid)), 0) FROM pg_inherits i"
                    " JOIN pg_class p ON p.oid = i.inhparent WHERE p.relname = :t"
                ),
                {"t": table},
            ).scalar()
            out[table] = round(int(size or 0) / rounds, 1)
    engine.dispose()
    out["total"] = round(sum(out.values()), 1)
    return out


def query_alone(store: ArchiveStore, players: int, n: int) -> list[float]:
    samples = []
    for _ in range(n):
        player = f"p{random.randrange(players)}"
        t0 = time.perf_counter()
        games = store.player_games(player, before=None, limit=50)
        samples.append((time.perf_counter() - t0) * 1000)
        assert games, player
    return samples


async def through_rpc(url: str, players: int, n: int) -> list[float]:
    secret = "b" * 48
    settings = load_settings(
        "table", token_secret=secret, service_secret=secret, grpc_port=0, rate_limits=False
    )
    server = create_server([history_registration(History(url))], settings, address="127.0.0.1:0")
    await server.start()
    authority = TokenAuthority(secret)
    samples = []
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            stub = history_pb2_grpc.HistoryServiceStub(channel)
            for i in range(n + 20):
                player = f"p{random.randrange(players)}"
                md = bearer_metadata(authority.issue_player_token(player, player).token)
                t0 = time.perf_counter()
                reply = await stub.ListPlayerGames(
                    history_pb2.ListPlayerGamesRequest(page_size=50), metadata=md
                )
                if i >= 20:  # the first calls warm the channel and the pool
                    samples.append((time.perf_counter() - t0) * 1000)
                assert len(reply.games) == min(50, len(reply.games)) > 0
    finally:
        await server.stop(0)
    return samples


def write_cost(url: str, n: int) -> dict[str, float]:
    """The settlement worker's archive writes for ``n`` Kishpa rounds (start, then end)."""
    store = ArchiveStore(create_archive_engine(url, pool_size=1))
    blob = sample_record()
    now = START_MS + SPAN_MS // 2
    postings = ({"from": "player:a", "to": "bowl:x", "amount": 1, "reason": "bowl_contribution"},)
    cpu0, wall0 = time.process_time(), time.perf_counter()
    for i in range(n):
        table = f"bench-{i:08d}"
        store.write_phase(
            PhaseRow(table, 1, "start", now + i, "kishpa", f"s{i}", postings), now_ms=now
        )
        store.write_ending(
            PhaseRow(table, 1, "end", now + i + 1, "kishpa", f"e{i}", postings),
            [RoundRow(table, 1, now + i + 1, "kishpa", 1, 1, ("a", "b", "c"), blob)],
            phase_rounds=(1, 1),
            now_ms=now,
        )
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    store.engine.dispose()
    return {
        "rounds": n,
        "writer_cpu_ms_per_round": round(cpu * 1000 / n, 3),
        "wall_ms_per_round": round(wall * 1000 / n, 3),
        "record_bytes": len(blob),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=10_000_000)
    parser.add_argument("--players", type=int, default=200_000)
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--writes", type=int, default=1000)
    parser.add_argument("--admin-url", default=DEFAULT_ADMIN_URL)
    parser.add_argument("--database", default="")
    parser.add_argument("--keep", action="store_true", help="keep (and reuse) the database")
    args = parser.parse_args()
    name = args.database or f"bench_archive_{args.rounds}"
    admin = sa.create_engine(args.admin_url, isolation_level="AUTOCOMMIT")
    url = make_url(args.admin_url).set(database=name).render_as_string(hide_password=False)
    with admin.connect() as conn:
        exists = conn.execute(
            sa.text("SELECT 1 FROM pg_database WHERE datname = :n"), {"n": name}
        ).scalar()
    if exists and not _complete(url, args.rounds):  # a build that did not finish
        with admin.connect() as conn:
            conn.exec_driver_sql(f'DROP DATABASE "{name}" WITH (FORCE)')
        exists = None
    if not exists:
        with admin.connect() as conn:
            conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
    try:
        built = 0.0
        if not exists:
            print(f"building {args.rounds:,} rounds in {name} ...", flush=True)
            built = build(url, args.rounds, args.players)
        store = ArchiveStore(create_archive_engine(url, pool_size=2))
        query_alone(store, args.players, 50)  # warm the cache
        alone = query_alone(store, args.players, args.queries)
        store.engine.dispose()
        rpc = asyncio.run(through_rpc(url, args.players, args.queries))
        sizes = bytes_per_round(url, args.rounds)
        writes = write_cost(url, args.writes)
        print(
            json.dumps(
                {
                    "rounds": args.rounds,
                    "players": args.players,
                    "build_s": round(built, 1),
                    "last_50_games_query_ms": {
                        "p50": round(pct(alone, 0.5), 2),
                        "p99": round(pct(alone, 0.99), 2),
                    },
                    "last_50_games_rpc_ms": {
                        "p50": round(pct(rpc, 0.5), 2),
                        "p99": round(pct(rpc, 0.99), 2),
                    },
                    "bytes_per_round": sizes,
                    "write": writes,
                },
                indent=2,
            )
        )
    finally:
        if not args.keep:
            with admin.connect() as conn:
                conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.dispose()
    return 0


if __name__ == "__main__":
    sys.exit(main())
