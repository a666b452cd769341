"""Finance on a large ledger: reconcile, export and reports over N postings on PostgreSQL.

Builds a ledger of ``--postings`` postings (default 10 million) in a scratch database it
creates and drops (``bench_ledger_i24`` by default, on ``--admin-url``), with SQL alone
(``INSERT ... SELECT generate_series``, indexes built after the load), then measures:

- ``kishpa wallet reconcile``'s check (``reconcile_url``: the ledger's whole consistency);
- an export of one week through the real gRPC server (``ExportTransfers``, server-streaming)
  written as CSV by the CLI's own row code, in rows/s; and the same week read straight from
  the database (the baseline the RPC is compared with);
- the month-end summary, the totals per reason of a month, and balances as of a moment;
- ``kishpa wallet verify-chain``'s check (``chain.verify``: every batch's digest recomputed
  from its rows, the whole chain walked) and the statement of one account with
  ``--statement-postings`` postings (default 100,000), through ``GetAccountStatement``.

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
import datetime as dt
import io
import json
import os
import resource
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
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
from services.wallet import chain, finance
from services.wallet.database import create_wallet_engine
from services.wallet.ledger import Ledger
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
    "ix_postings_effective",
)
BUILD_INDEXES = (
    "CREATE UNIQUE INDEX ix_postings_batch ON postings (batch_id, seq)",
    "CREATE INDEX ix_postings_from ON postings (from_account, id)",
    "CREATE INDEX ix_postings_to ON postings (to_account, id)",
    "CREATE INDEX ix_postings_table_round ON postings (table_id, round)",
    "CREATE INDEX ix_postings_created ON postings (created_ms, id)",
    "CREATE INDEX ix_postings_effective ON postings (effective_ms, id)",
)
WHALE = "player:whale"
"""The account the statement is timed on: in each of its batches the bank loads it and it
pays a player."""
# Each batch's digest as services/wallet/chain.py defines it (its rows in COPY's text format;
# no value here needs an escape), worked out by the database; the links are then chained in
# Python. ``chain.verify`` recomputes both its own way, so a mismatch would show.
_DIGESTS = r"""
SELECT b.id, encode(sha256(convert_to(
         b.id || E'\t' || b.idempotency_key || E'\t' || b.body_hash || E'\t' || b.created_ms
         || E'\n' || string_agg(
           p.batch_id || E'\t' || p.seq || E'\t' || p.from_account || E'\t' || p.to_account
           || E'\t' || p.amount || E'\t' || p.reason || E'\t' || coalesce(p.table_id, '\N')
           || E'\t' || coalesce(p.round::text, '\N') || E'\t' || coalesce(p.phase, '\N')
           || E'\t' || p.created_ms || E'\t' || p.effective_ms || E'\n', '' ORDER BY p.seq),
         'UTF8')), 'hex'), b.created_ms
FROM batches b JOIN postings p ON p.batch_id = b.id
WHERE b.id > %(after)s
GROUP BY b.id ORDER BY b.id
"""


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


def build(url: str, postings: int, workers: int = 2) -> dict[str, float]:
    """Fill the migrated ledger at ``url``; seconds per step.

    Built for speed, since the ledger is scratch: the two big tables are UNLOGGED (no WAL;
    their pages are read exactly like a logged table's), foreign keys and indexes are dropped
    during the load and put back afterwards (keys as NOT VALID: no per-row trigger on 10
    million rows), and the rows are generated by ``workers`` connections at once, each over
    its own range of batch numbers.
    """
    batches, players, tables, step_ms = _shape(postings)
    times: dict[str, float] = {}
    engine = create_engine(url, pool_size=workers + 1)
    # Every piece of SQL below is built from this module's own numbers: no outside input.
    with engine.begin() as conn:
        keys = _drop_foreign_keys(conn)
        for index in INDEX_NAMES:  # built again after the load: much faster than row by row
            conn.exec_driver_sql(f"DROP INDEX IF EXISTS {index}")
        for table in ("postings", "batches", "admin_audit"):  # admin_audit: its key to batches
            conn.exec_driver_sql(f"ALTER TABLE {table} SET UNLOGGED")
        conn.exec_driver_sql(
            f"""
            INSERT INTO accounts (id, kind, balance, created_ms)
            SELECT 'player:p' || n, 'player', 0, {START_MS}
            FROM generate_series(0, {players - 1}) n
            UNION ALL
            SELECT 'bowl:t' || n, 'bowl', 0, {START_MS} FROM generate_series(0, {tables - 1}) n
            """  # noqa: S608
        )
    started = time.perf_counter()
    bounds = [1 + batches * i // workers for i in range(workers + 1)]
    ranges = [(bounds[i], bounds[i + 1] - 1) for i in range(workers) if bounds[i + 1] > bounds[i]]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        done = pool.map(
            lambda r: _fill(engine, r, players=players, tables=tables, step_ms=step_ms), ranges
        )
        list(done)
    times["rows"] = time.perf_counter() - started
    with engine.begin() as conn:
        conn.exec_driver_sql("SET LOCAL maintenance_work_mem = '512MB'")
        conn.exec_driver_sql("SET LOCAL max_parallel_maintenance_workers = 2")
        started = time.perf_counter()
        for statement in BUILD_INDEXES:
            conn.exec_driver_sql(statement)
        for table, definition in keys:  # enforced from now on; the generated rows are right
            conn.exec_driver_sql(f"ALTER TABLE {table} ADD {definition} NOT VALID")
        times["indexes"] = time.perf_counter() - started
        started = time.perf_counter()
        conn.exec_driver_sql("SET LOCAL work_mem = '256MB'")
        _add_to_balances(conn, after_batch=0)
        times["balances"] = time.perf_counter() - started
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        started = time.perf_counter()
        conn.exec_driver_sql("VACUUM ANALYZE")
        times["vacuum_analyze"] = time.perf_counter() - started
    engine.dispose()
    started = time.perf_counter()
    chain_ledger(url)
    times["chain"] = time.perf_counter() - started
    return times


def chain_ledger(url: str) -> int:
    """Chain the batches not chained yet, in id order (what migration 0004 does for an
    existing ledger, with the digests worked out in SQL); how many were chained."""
    engine = create_engine(url, pool_size=2)
    try:
        with engine.begin() as conn:
            seq, previous = conn.exec_driver_sql(
                "SELECT seq, hash FROM ledger_chain_head WHERE id = 1"
            ).one()
            after = conn.exec_driver_sql(
                "SELECT coalesce(max(batch_id), 0) FROM ledger_chain"
            ).scalar_one()
            first = seq
            reader = engine.raw_connection()
            try:
                driver: Any = reader.driver_connection
                source = driver.cursor(name="digests")
                source.itersize = 50_000
                source.execute(_DIGESTS, {"after": after})
                raw: Any = conn.connection.driver_connection
                statement = "COPY ledger_chain (seq, batch_id, digest, hash, created_ms) FROM STDIN"
                with raw.cursor() as cursor, cursor.copy(statement) as copy:
                    for batch_id, digest, created in source:
                        seq += 1
                        previous = chain.link(previous, seq, batch_id, digest)
                        copy.write_row((seq, batch_id, digest, previous, created))
            finally:
                reader.close()
            conn.exec_driver_sql(
                "UPDATE ledger_chain_head SET seq = %(s)s, hash = %(h)s WHERE id = 1",
                {"s": seq, "h": previous},
            )
        return int(seq - first)
    finally:
        engine.dispose()


def add_whale(url: str, postings: int) -> int:
    """Two-posting batches after the ledger's last one (the bank loads ``WHALE``, who pays a
    player), so that ``WHALE`` has ``postings`` postings; balances and the chain kept right.
    The number of batches added."""
    engine = create_engine(url)
    count = max(1, postings // 2)
    pay = "CASE s.seq WHEN 0 THEN 'bank' ELSE 'player:whale' END"
    paid = "CASE s.seq WHEN 0 THEN 'player:whale' ELSE 'player:p' || mod(g, 10) END"
    reason = "CASE s.seq WHEN 0 THEN 'bank_load' ELSE 'win' END"
    # The stored result as BatchResult.to_json writes it, put together as text.
    move = (
        '\'{"from_account":"\' || {src} || \'","to_account":"\' || {dst} || \'","amount":\' '
        '|| (1 + mod(g, 9)) || \',"reason":"{reason}","table_id":"","round":0,'
        '"phase":""}\''
    )
    result = (
        move.replace("{src}", "'bank'").replace("{dst}", "'player:whale'")
        .replace("{reason}", "bank_load")
        + " || ',' || "
        + move.replace("{src}", "'player:whale'").replace("{dst}", "'player:p' || mod(g, 10)")
        .replace("{reason}", "win")
    )  # fmt: skip
    with engine.begin() as conn:
        last = int(conn.exec_driver_sql("SELECT coalesce(max(id), 0) FROM batches").scalar_one())
        at = int(
            conn.exec_driver_sql("SELECT coalesce(max(created_ms), 0) FROM batches").scalar_one()
        )
        conn.exec_driver_sql(
            "INSERT INTO accounts (id, kind, balance, created_ms) "
            "VALUES (%(w)s, 'player', 0, %(t)s) ON CONFLICT DO NOTHING",
            {"w": WHALE, "t": START_MS},
        )
        conn.exec_driver_sql(
            f"""
            INSERT INTO batches (id, idempotency_key, body_hash, result, created_ms)
            SELECT g, 'whale:' || g, md5(g::text),
                   '{{"applied":[' || {result} || '],"balances":{{}}}}', {at} + (g - {last})
            FROM generate_series({last + 1}::bigint, {last + count}::bigint) g
            """  # noqa: S608
        )
        conn.exec_driver_sql(
            f"""
            INSERT INTO postings (batch_id, seq, from_account, to_account, amount, reason,
                                  created_ms, effective_ms)
            SELECT g, s.seq, {pay}, {paid}, 1 + mod(g, 9), {reason},
                   {at} + (g - {last}), {at} + (g - {last})
            FROM generate_series({last + 1}::bigint, {last + count}::bigint) g,
                 (VALUES (0), (1)) AS s(seq)
            """  # noqa: S608
        )
        _add_to_balances(conn, after_batch=last)
    engine.dispose()
    chain_ledger(url)
    return count


def statement_over_grpc(url: str, account: str) -> tuple[int, int, int, float]:
    """The whole statement of ``account`` through GetAccountStatement (server and client in
    this process), every line read; (lines, opening, closing, wall seconds)."""

    async def go() -> tuple[int, int, int, float]:
        settings = load_settings("wallet", database_url=url, **SECRETS)
        server = create_wallet_server(settings, address="127.0.0.1:0")
        await server.start()
        token = TokenAuthority.from_settings(settings).issue_service_token("worker").token
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
                stub = wallet_pb2_grpc.WalletServiceStub(channel)
                request = wallet_pb2.GetAccountStatementRequest(account=account)
                started, cpu = time.perf_counter(), time.process_time()
                lines = opening = closing = 0
                async for chunk in stub.GetAccountStatement(
                    request, metadata=bearer_metadata(token)
                ):
                    opening = chunk.opening_balance
                    lines += sum(1 for line in chunk.lines if line.balance is not None)
                    closing = chunk.closing_balance
                cpu = time.process_time() - cpu
                print(f"  statement over gRPC, CPU of server + client: {cpu:.2f} s", flush=True)
                return lines, opening, closing, time.perf_counter() - started
        finally:
            await server.stop(1)

    return asyncio.run(go())


def _add_to_balances(conn: Any, *, after_batch: int) -> None:
    """Move every account's balance by its postings in batches after ``after_batch`` (0: all;
    accounts are created at 0), and the id sequences past the rows written by hand."""
    conn.exec_driver_sql(
        f"""
        UPDATE accounts a SET balance = a.balance + m.net FROM (
            SELECT account, sum(delta) AS net FROM (
                SELECT to_account AS account, amount AS delta FROM postings
                WHERE batch_id > {int(after_batch)}
                UNION ALL SELECT from_account, -amount FROM postings
                WHERE batch_id > {int(after_batch)}
            ) x GROUP BY account) m
        WHERE a.id = m.account
        """  # noqa: S608
    )
    for table in ("postings", "batches"):
        conn.exec_driver_sql(
            f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), (SELECT max(id) FROM {table}))"  # noqa: S608
        )


def _shape(postings: int) -> tuple[int, int, int, int]:
    """(batches, players, tables, ms between batches) of a ledger of ``postings``: 100,000
    players and 20,000 tables at 10 million postings, fewer on a small ledger."""
    batches = max(1, postings // POSTINGS_PER_BATCH)
    players = min(PLAYERS, max(10, postings // 100))
    tables = min(TABLES, max(5, postings // 500))
    return batches, players, tables, DAYS * DAY_MS // batches


def append_day(url: str, postings: int) -> int:
    """A day more of the same play after the ledger's last batch, balances kept right (what
    the nightly incremental check then reads); the number of batches added."""
    batches, players, tables, step_ms = _shape(postings)
    per_day = max(1, batches // DAYS)
    engine = create_engine(url)
    with engine.connect() as conn:
        last = int(conn.exec_driver_sql("SELECT max(id) FROM batches").scalar() or 0)
    _fill(engine, (last + 1, last + per_day), players=players, tables=tables, step_ms=step_ms)
    with engine.begin() as conn:
        _add_to_balances(conn, after_batch=last)
    engine.dispose()
    chain_ledger(url)
    return per_day


def _drop_foreign_keys(conn: Any) -> list[tuple[str, str]]:
    """Drop the foreign keys on and to the big tables; (table, definition) to add them back."""
    rows = conn.exec_driver_sql(
        """
        SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid)
        FROM pg_constraint
        WHERE contype = 'f' AND (conrelid = 'postings'::regclass
                                 OR confrelid IN ('postings'::regclass, 'batches'::regclass))
        """
    ).all()
    for table, name, _ in rows:
        conn.exec_driver_sql(f'ALTER TABLE {table} DROP CONSTRAINT "{name}"')
    return [(table, f'CONSTRAINT "{name}" {definition}') for table, name, definition in rows]


def _fill(engine: Any, span: tuple[int, int], *, players: int, tables: int, step_ms: int) -> None:
    """Batches ``span[0]..span[1]`` and their postings, in one transaction of its own."""
    first, last = span
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
    # The stored result as the ledger writes it (BatchResult.to_json), put together as text:
    # much cheaper than building JSON values for 2.5 million batches.
    move = (
        '\'{{"from_account":"\' || {src} || \'","to_account":"\' || {dst} '
        '|| \'","amount":\' || w.a || \',"reason":"{reason}","table_id":"\' '
        '|| w.tbl || \'","round":1,"phase":"{phase}"}}\''
    )
    result = " || ',' || ".join(
        move.format(src=src, dst=dst, reason=reason, phase=phase)
        for src, dst, reason, phase in (
            ("'bank'", "w.p1", "bank_load", "start"),
            ("w.p1", "w.bowl", "bowl_contribution", "start"),
            ("w.bowl", "w.p2", "bowl_win", "end"),
            ("w.p2", "w.p3", "win", "end"),
        )
    )
    with engine.begin() as conn:
        conn.exec_driver_sql("SET LOCAL synchronous_commit = off")
        conn.exec_driver_sql(
            f"""
            INSERT INTO batches (id, idempotency_key, body_hash, result, created_ms)
            SELECT g, 'kishpa:' || w.tbl || ':' || g || ':end', md5(g::text),
                   '{{"applied":[' || {result} || '],"balances":{{}}}}', w.at
            FROM generate_series({first}::bigint, {last}::bigint) g, LATERAL (SELECT {who}) w
            """  # noqa: S608
        )
        conn.exec_driver_sql(
            f"""
            INSERT INTO postings (id, batch_id, seq, from_account, to_account, amount, reason,
                                  table_id, round, phase, created_ms, effective_ms)
            SELECT (g - 1) * 4 + s.seq + 1, g, s.seq, {pick.format(c="s.src")},
                   {pick.format(c="s.dst")}, w.a, s.reason, w.tbl, 1, s.phase, w.at, w.at
            FROM generate_series({first}::bigint, {last}::bigint) g, LATERAL (SELECT {who}) w,
                 {shape}
            """  # noqa: S608
        )


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


async def export_with_cli(
    url: str, since_ms: int, until_ms: int, fmt: str
) -> tuple[int, float, float, float]:
    """A period through ``kishpa wallet export`` (its own process, as an operator runs it)
    from the real wallet server (this process), written to a file; (rows, wall seconds, CPU
    seconds of the wallet server, CPU seconds of the CLI process; the database's own CPU is
    not counted)."""
    settings = load_settings("wallet", database_url=url, **SECRETS)
    server = create_wallet_server(settings, address="127.0.0.1:0")
    await server.start()
    since, until = (
        dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC).isoformat() for ms in (since_ms, until_ms)
    )
    env = {
        **os.environ,
        "KISHPA_WALLET_ADDR": f"127.0.0.1:{server.port}",
        "KISHPA_SERVICE_SECRET": SECRETS["service_secret"],
    }
    kishpa = os.path.join(os.path.dirname(sys.executable), "kishpa")
    with tempfile.TemporaryDirectory() as folder:
        target = os.path.join(folder, f"week.{fmt}")
        try:
            children = resource.getrusage(resource.RUSAGE_CHILDREN)
            started, cpu = time.perf_counter(), time.process_time()
            process = await asyncio.create_subprocess_exec(
                kishpa, "wallet", "export", "--since", since, "--until", until,
                "--format", fmt, "--chunk-size", "5000", "--output", target,
                env=env, stderr=asyncio.subprocess.PIPE,
            )  # fmt: skip
            _, err = await process.communicate()
            seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cli_cpu = (after.ru_utime + after.ru_stime) - (children.ru_utime + children.ru_stime)
        finally:
            await server.stop(1)
        assert process.returncode == 0, err.decode()
        lines = await asyncio.to_thread(_count_lines, target)
    return lines - (1 if fmt == "csv" else 0), seconds, cpu, cli_cpu


def _count_lines(path: str) -> int:
    with open(path, encoding="utf-8") as written:
        return sum(1 for _ in written)


def timed(what: str, results: dict[str, Any], fn: Any, *args: Any) -> Any:
    started = time.perf_counter()
    value = fn(*args)
    results[what] = round(time.perf_counter() - started, 2)
    print(f"  {what}: {results[what]} s", flush=True)
    return value


@contextmanager
def existing_database(admin_url: str, name: str) -> Iterator[str]:
    yield make_url(admin_url).set(database=name).render_as_string(hide_password=False)


def measure_chain_and_statement(url: str, results: dict[str, Any], statement_postings: int) -> None:
    """Time ``chain.verify`` over the whole ledger, then a statement of ``WHALE`` with
    ``statement_postings`` postings (added if it has fewer) through the RPC and the library."""
    engine = create_wallet_engine(url, pool_size=3)
    try:
        backends = _warm_backends(engine, 3)
        cpu, db_cpu = time.process_time(), _cpu_seconds(backends)
        report = timed("verify_chain_s", results, chain.verify, engine)
        results["verify_chain_cpu_s"] = {
            "python": round(time.process_time() - cpu, 2),
            "database": round(_cpu_seconds(backends) - db_cpu, 2),
        }
        results["load_average"] = round(os.getloadavg()[0], 1)
        print(f"  verify-chain CPU: {results['verify_chain_cpu_s']}", flush=True)
        assert report.ok, report.breaks[:5]
        results["verify_chain_postings"] = report.postings
        results["verify_chain_batches"] = report.batches
        results["verify_chain_postings_per_s"] = round(report.postings / results["verify_chain_s"])
        print(
            f"  verify-chain: {report.postings:,} postings, {report.batches:,} batches", flush=True
        )
        if not statement_postings:
            return
        with engine.connect() as conn:
            have = int(
                conn.exec_driver_sql(
                    "SELECT count(*) FROM postings "
                    "WHERE from_account = %(w)s OR to_account = %(w)s",
                    {"w": WHALE},
                ).scalar_one()
            )
        if have < statement_postings:
            timed("statement_setup_s", results, add_whale, url, statement_postings - have)
            results["statement_postings_added"] = statement_postings - have
        held = Ledger(engine).balance(WHALE)
        lines, opening, closing, seconds = statement_over_grpc(url, WHALE)
        assert (opening, closing) == (0, held), (opening, closing, held)
        results["statement_lines"] = lines
        results["statement_grpc_s"] = round(seconds, 3)
        print(f"  statement of {lines:,} postings over gRPC: {seconds:.3f} s", flush=True)
        backends = _warm_backends(engine, 3)
        cpu, db_cpu = time.process_time(), _cpu_seconds(backends)
        timed(
            "statement_library_s",
            results,
            lambda: sum(len(chunk) for _, chunk in finance.statement(engine, WHALE)),
        )
        results["statement_library_cpu_s"] = {
            "python": round(time.process_time() - cpu, 2),
            "database": round(_cpu_seconds(backends) - db_cpu, 2),
        }
    finally:
        engine.dispose()


def _warm_backends(engine: Any, n: int) -> list[int]:
    """Open ``n`` pooled connections (the ones the next calls reuse) and return their server
    process ids, so the database's CPU time for those calls can be read (a local server)."""
    proxies = [engine.raw_connection() for _ in range(n)]
    pids = [
        int(p.driver_connection.execute("SELECT pg_backend_pid()").fetchone()[0]) for p in proxies
    ]
    for proxy in proxies:
        proxy.close()
    return pids


def _cpu_seconds(pids: list[int]) -> float:
    """User + system CPU seconds of local processes (0 for one that cannot be read)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / tick
    return total


def run(
    postings: int,
    admin_url: str,
    name: str,
    keep: bool,
    *,
    reuse: bool = False,
    python_baseline: bool = False,
    skip_reconcile: bool = False,
    build_only: bool = False,
    statement_postings: int = 100_000,
    chain_only: bool = False,
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
        if build_only:
            return results
        measure_chain_and_statement(url, results, statement_postings)
        if chain_only:
            return results
        if not skip_reconcile:
            # The full check (weekly; the baseline), recorded as a clean run: its horizon is
            # where the nightly incremental check starts after a day more of play.
            report = timed("reconcile_full_s", results, lambda: reconcile_url(url, source="bench"))
            assert report.ok, report.discrepancies[:5]
            assert report.mode == "full"
            if not reuse:
                built = postings // POSTINGS_PER_BATCH * POSTINGS_PER_BATCH
                assert report.postings == built + results.get("statement_postings_added", 0)
            added = timed("append_day_s", results, append_day, url, postings)
            nightly = timed(
                "reconcile_incremental_s",
                results,
                lambda: reconcile_url(url, source="bench", incremental=True),
            )
            assert nightly.ok, nightly.discrepancies[:5]
            assert (nightly.mode, nightly.batches_checked) == ("incremental", added)
            results["incremental_postings"] = nightly.postings
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
            for fmt in ("csv", "jsonl"):
                cli_rows, cli_s, server_cpu, cli_cpu = asyncio.run(export_with_cli(url, *week, fmt))
                assert cli_rows == rows_db, (cli_rows, rows_db)
                results[f"export_cli_{fmt}_s"] = round(cli_s, 2)
                results[f"export_cli_{fmt}_rows_per_s"] = round(cli_rows / cli_s)
                results[f"export_cli_{fmt}_cpu_s"] = {
                    "server": round(server_cpu, 2),
                    "cli": round(cli_cpu, 2),
                }
                results[f"export_cli_{fmt}_rows_per_cpu_s"] = round(
                    cli_rows / (server_cpu + cli_cpu)
                )
                print(
                    f"  export: {cli_rows:,} rows by kishpa wallet export --format {fmt}: "
                    f"{results[f'export_cli_{fmt}_rows_per_s']:,} rows/s",
                    flush=True,
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
    parser.add_argument(
        "--build-only", action="store_true", help="build (with --keep), no measures"
    )
    parser.add_argument(
        "--statement-postings",
        type=int,
        default=100_000,
        help="postings of the account whose statement is timed (added on the first run)",
    )
    parser.add_argument(
        "--chain-only", action="store_true", help="time verify-chain and the statement only"
    )
    args = parser.parse_args()
    results = run(
        args.postings,
        args.admin_url,
        args.database,
        args.keep,
        reuse=args.reuse,
        python_baseline=args.python_baseline,
        skip_reconcile=args.skip_reconcile,
        build_only=args.build_only,
        statement_postings=args.statement_postings,
        chain_only=args.chain_only,
    )
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
