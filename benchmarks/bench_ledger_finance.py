"""Finance on a large ledger: reconcile, export and reports over N postings on PostgreSQL.

Builds a ledger of ``--postings`` postings (default 10 million) in a scratch database it
creates and drops (``bench_ledger_i24`` by default, on ``--admin-url``), with SQL alone
(``INSERT ... SELECT generate_series``, indexes built after the load), then measures:

- ``kishpa wallet reconcile``'s check (``reconcile_url``: the ledger's whole consistency);
- an export of one week through the real gRPC server (``ExportTransfers``, server-streaming)
  written as CSV by the CLI's own row code, in rows/s; and the same week read straight from
  the database (the baseline the RPC is compared with);
- the month-end summary, the totals per reason of a month, and balances as of a moment.

The ledger is what settlement writes, four postings a batch over 60 days: a bank load into
a player, his bowl contribution, the bowl won by another, and a win paid to a third; every
batch's stored result lists its postings, so the ledger reconciles clean.

Usage: .venv/bin/python benchmarks/bench_ledger_finance.py [--postings N] [--keep]
[--admin-url postgresql+psycopg://postgres@127.0.0.1:5432/postgres] [--database NAME]
``tests/integration/test_bench_ledger_finance.py`` runs it with 20,000 postings.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import io
import json
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import grpc
from google.protobuf.timestamp_pb2 import Timestamp
from sqlalchemy import create_engine
from sqlalchemy.engine import make_url

from cli.finance_cmd import CSV_COLUMNS, _row
from kishpa.wallet.v1 import wallet_pb2, wallet_pb2_grpc
from services.common.auth import TokenAuthority, bearer_metadata
from services.common.settings import load_settings
from services.wallet import finance
from services.wallet.database import create_wallet_engine
from services.wallet.migrate import upgrade
from services.wallet.reconcile import reconcile, reconcile_url
from services.wallet.server import create_wallet_server

DEFAULT_ADMIN_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
DAY_MS = 86_400_000
DAYS = 60
START_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z: January and February
PLAYERS = 100_000
TABLES = 20_000
POSTINGS_PER_BATCH = 4
SECRETS = {"token_secret": "t" * 40, "service_secret": "s" * 40}
INDEX_NAMES = (
    "ix_postings_batch",
    "ix_postings_from",
    "ix_postings_to",
    "ix_postings_table_round",
    "ix_postings_created",
)
BUILD_INDEXES = (
    "CREATE UNIQUE INDEX ix_postings_batch ON postings (batch_id, seq)",
    "CREATE INDEX ix_postings_from ON postings (from_account, id)",
    "CREATE INDEX ix_postings_to ON postings (to_account, id)",
    "CREATE INDEX ix_postings_table_round ON postings (table_id, round)",
    "CREATE INDEX ix_postings_created ON postings (created_ms, id)",
)


@contextmanager
def scratch_database(admin_url: str, name: str, keep: bool) -> Iterator[str]:
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
    url = make_url(admin_url).set(database=name).render_as_string(hide_password=False)
    try:
        yield url
    finally:
        if not keep:
            with admin.connect() as conn:
                conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.dispose()


def build(url: str, postings: int) -> dict[str, float]:
    """Fill the migrated ledger at ``url``; seconds per step."""
    batches = max(1, postings // POSTINGS_PER_BATCH)
    # 100,000 players and 20,000 tables at 10 million postings; fewer on a small ledger.
    players = min(PLAYERS, max(10, postings // 100))
    tables = min(TABLES, max(5, postings // 500))
    step_ms = DAYS * DAY_MS // batches
    times: dict[str, float] = {}
    engine = create_engine(url)
    # Player p, table t of batch g; the four postings move the same amount a.
    who = f"""
        'player:p' || mod(g * 7, {players}) AS p1,
        'player:p' || mod(g * 7 + 1, {players}) AS p2,
        'player:p' || mod(g * 7 + 2, {players}) AS p3,
        'bowl:t' || mod(g, {tables}) AS bowl,
        't' || mod(g, {tables}) AS tbl,
        1 + mod(g, 50) AS a,
        {START_MS} + g * {step_ms} AS at
    """
    shape = """
        (VALUES (0, 'bank', 'p1', 'bank_load', 'start'),
                (1, 'p1', 'bowl', 'bowl_contribution', 'start'),
                (2, 'bowl', 'p2', 'bowl_win', 'end'), (3, 'p2', 'p3', 'win', 'end'))
            AS s(seq, src, dst, reason, phase)
    """
    pick = (
        "CASE {c} WHEN 'bank' THEN 'bank' WHEN 'p1' THEN w.p1 WHEN 'p2' THEN w.p2 "
        "WHEN 'p3' THEN w.p3 ELSE w.bowl END"
    )
    # Every piece of SQL below is built from this module's own numbers: no outside input.
    with engine.begin() as conn:
        conn.exec_driver_sql("SET LOCAL synchronous_commit = off")
        for index in INDEX_NAMES:  # built again after the load: much faster than row by row
            conn.exec_driver_sql(f"DROP INDEX IF EXISTS {index}")
        started = time.perf_counter()
        conn.exec_driver_sql(
            f"""
            INSERT INTO accounts (id, kind, balance, created_ms)
            SELECT 'player:p' || n, 'player', 0, {START_MS}
            FROM generate_series(0, {players - 1}) n
            UNION ALL
            SELECT 'bowl:t' || n, 'bowl', 0, {START_MS} FROM generate_series(0, {tables - 1}) n
            """  # noqa: S608
        )
        conn.exec_driver_sql(
            f"""
            INSERT INTO batches (id, idempotency_key, body_hash, result, created_ms)
            SELECT g, 'kishpa:' || w.tbl || ':' || g || ':end', md5(g::text),
                   json_build_object('applied', json_build_array(
                       json_build_object('from_account', 'bank', 'to_account', w.p1, 'amount', w.a,
                         'reason', 'bank_load', 'table_id', w.tbl, 'round', 1, 'phase', 'start'),
                       json_build_object('from_account', w.p1, 'to_account', w.bowl, 'amount', w.a,
                         'reason', 'bowl_contribution', 'table_id', w.tbl, 'round', 1,
                         'phase', 'start'),
                       json_build_object('from_account', w.bowl, 'to_account', w.p2, 'amount', w.a,
                         'reason', 'bowl_win', 'table_id', w.tbl, 'round', 1, 'phase', 'end'),
                       json_build_object('from_account', w.p2, 'to_account', w.p3, 'amount', w.a,
                         'reason', 'win', 'table_id', w.tbl, 'round', 1, 'phase', 'end')),
                     'balances', json_build_object())::text,
                   w.at
            FROM generate_series(1::bigint, {batches}::bigint) g, LATERAL (SELECT {who}) w
            """  # noqa: S608
        )
        times["batches"] = time.perf_counter() - started
        started = time.perf_counter()
        conn.exec_driver_sql(
            f"""
            INSERT INTO postings (id, batch_id, seq, from_account, to_account, amount, reason,
                                  table_id, round, phase, created_ms)
            SELECT (g - 1) * 4 + s.seq + 1, g, s.seq, {pick.format(c="s.src")},
                   {pick.format(c="s.dst")}, w.a, s.reason, w.tbl, 1, s.phase, w.at
            FROM generate_series(1::bigint, {batches}::bigint) g, LATERAL (SELECT {who}) w, {shape}
            """  # noqa: S608
        )
        times["postings"] = time.perf_counter() - started
        started = time.perf_counter()
        for statement in BUILD_INDEXES:
            conn.exec_driver_sql(statement)
        times["indexes"] = time.perf_counter() - started
        started = time.perf_counter()
        conn.exec_driver_sql(
            """
            UPDATE accounts a SET balance = m.net FROM (
                SELECT account, sum(delta) AS net FROM (
                    SELECT to_account AS account, amount AS delta FROM postings
                    UNION ALL SELECT from_account, -amount FROM postings) x
                GROUP BY account) m
            WHERE a.id = m.account
            """
        )
        conn.exec_driver_sql(
            "SELECT setval(pg_get_serial_sequence('postings', 'id'), "
            "(SELECT max(id) FROM postings))"
        )
        conn.exec_driver_sql(
            "SELECT setval(pg_get_serial_sequence('batches', 'id'), (SELECT max(id) FROM batches))"
        )
        times["balances"] = time.perf_counter() - started
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        started = time.perf_counter()
        conn.exec_driver_sql("VACUUM ANALYZE")
        times["vacuum_analyze"] = time.perf_counter() - started
    engine.dispose()
    return times


def stamp(ms: int) -> Timestamp:
    value = Timestamp()
    value.FromMilliseconds(ms)
    return value


async def export_over_grpc(url: str, since_ms: int, until_ms: int) -> tuple[int, float, float]:
    """A period through ExportTransfers (server and client in this process), written as CSV
    to memory; (rows, wall seconds, CPU seconds of this process: server and client, not the
    database)."""
    settings = load_settings("wallet", database_url=url, **SECRETS)
    server = create_wallet_server(settings, address="127.0.0.1:0")
    await server.start()
    md = bearer_metadata(TokenAuthority.from_settings(settings).issue_service_token("worker").token)
    rows = 0
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            stub = wallet_pb2_grpc.WalletServiceStub(channel)
            out = io.StringIO()
            writer = csv.DictWriter(out, fieldnames=CSV_COLUMNS, lineterminator="\n")
            started, cpu = time.perf_counter(), time.process_time()
            request = wallet_pb2.ExportTransfersRequest(
                since=stamp(since_ms), until=stamp(until_ms), chunk_size=5000
            )
            async for chunk in stub.ExportTransfers(request, metadata=md):
                for t in chunk.transfers:
                    writer.writerow(_row(t))
                rows += len(chunk.transfers)
                if out.tell() > 64 * 1024 * 1024:  # written and forgotten, as a file would
                    out.seek(0)
                    out.truncate()
            seconds = time.perf_counter() - started
            cpu = time.process_time() - cpu
    finally:
        await server.stop(1)
    return rows, seconds, cpu


def timed(what: str, results: dict[str, Any], fn: Any, *args: Any) -> Any:
    started = time.perf_counter()
    value = fn(*args)
    results[what] = round(time.perf_counter() - started, 2)
    print(f"  {what}: {results[what]} s", flush=True)
    return value


@contextmanager
def existing_database(admin_url: str, name: str) -> Iterator[str]:
    yield make_url(admin_url).set(database=name).render_as_string(hide_password=False)


def run(
    postings: int,
    admin_url: str,
    name: str,
    keep: bool,
    *,
    reuse: bool = False,
    python_baseline: bool = False,
    skip_reconcile: bool = False,
) -> dict[str, Any]:
    results: dict[str, Any] = {"postings": postings}
    database = (
        existing_database(admin_url, name) if reuse else scratch_database(admin_url, name, keep)
    )
    with database as url:
        if not reuse:
            upgrade(url)
            print(f"building {postings:,} postings in {name} ...", flush=True)
            results["build_s"] = {k: round(v, 1) for k, v in build(url, postings).items()}
            print(f"  build: {results['build_s']}", flush=True)
        if not skip_reconcile:
            report = timed("reconcile_s", results, reconcile_url, url)
            assert report.ok, report.discrepancies[:5]
            assert report.postings == postings // POSTINGS_PER_BATCH * POSTINGS_PER_BATCH
        week = (START_MS + 7 * DAY_MS, START_MS + 14 * DAY_MS)
        engine = create_wallet_engine(url, pool_size=2)
        try:
            rows_db = timed(
                "export_db_week_s",
                results,
                lambda: sum(
                    len(p) for p, _ in finance.export(engine, finance.ExportFilter(*week), "", 5000)
                ),
            )
            rows, seconds, cpu = asyncio.run(export_over_grpc(url, *week))
            results["export_grpc_csv_cpu_s"] = round(cpu, 2)
            results["export_rows_per_cpu_s"] = round(rows / cpu)
            assert rows == rows_db
            results["export_week_rows"] = rows
            results["export_grpc_csv_s"] = round(seconds, 2)
            results["export_grpc_csv_rows_per_s"] = round(rows / seconds)
            results["export_db_rows_per_s"] = round(rows_db / results["export_db_week_s"])
            print(
                f"  export: {rows:,} rows, "
                f"{results['export_grpc_csv_rows_per_s']:,} rows/s over gRPC+CSV",
                flush=True,
            )
            january = (START_MS, START_MS + 31 * DAY_MS)
            summary = timed("month_summary_s", results, finance.period_summary, engine, *january)
            issued = sum(m.from_bank - m.to_bank for m in summary.movements)
            assert summary.opening_outstanding + issued == summary.closing_outstanding
            timed("reason_totals_month_s", results, finance.reason_totals, engine, *january)
            timed(
                "balances_as_of_s",
                results,
                finance.balances_as_of,
                engine,
                START_MS + 45 * DAY_MS,
                ["player:p1", "bowl:t1"],
            )
            if python_baseline:
                # The same check streaming every posting and result through Python (SQLite's
                # way, and PostgreSQL's before the in-database comparison): the baseline.
                slow = timed(
                    "reconcile_python_s", results, lambda: reconcile(engine, in_database=False)
                )
                assert slow.ok
        finally:
            engine.dispose()
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--postings", type=int, default=10_000_000)
    parser.add_argument("--admin-url", default=DEFAULT_ADMIN_URL)
    parser.add_argument("--database", default="bench_ledger_i24")
    parser.add_argument("--keep", action="store_true", help="do not drop the database")
    parser.add_argument(
        "--reuse", action="store_true", help="measure a ledger built (and kept) by an earlier run"
    )
    parser.add_argument(
        "--python-baseline",
        action="store_true",
        help="also time the reconciliation streaming through Python (slow on a large ledger)",
    )
    parser.add_argument("--skip-reconcile", action="store_true", help="measure the rest only")
    args = parser.parse_args()
    results = run(
        args.postings,
        args.admin_url,
        args.database,
        args.keep,
        reuse=args.reuse,
        python_baseline=args.python_baseline,
        skip_reconcile=args.skip_reconcile,
    )
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
