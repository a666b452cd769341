"""Finance acceptance, through real processes: bots play games at ``kishpa serve table``, a
``kishpa worker`` settles them into ``kishpa serve wallet`` (SQLite and PostgreSQL), then

- the month exported as CSV by ``kishpa wallet export`` sums, per reason, to the month-end
  report of ``kishpa wallet report month --json``, and both to the totals this test works out
  from its own record of play (the phase records the table wrote, through the game's rules,
  plus the opening grants of the players it seated);
- ``kishpa wallet drift`` finds the live tables agree with the ledger, then reports each of a
  doctored bowl in Redis, a doctored balance in the table's balances hash, a doctored
  posting, a phase settled twice by hand and a batch without a phase, with what to do; the
  run is recorded, and a worker's beat-driven drift check raises the
  ``kishpa_wallet_drift_differences`` gauge the alert fires on.
"""

from __future__ import annotations

import csv
import datetime as dt
import json
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import grpc
import pytest
from sqlalchemy import text

from kishpa.wallet.v1 import wallet_pb2, wallet_pb2_grpc
from services.common.auth import TokenAuthority, bearer_metadata
from services.wallet.database import create_wallet_engine
from shared import keys
from tests.integration.workers_support import (
    STARTING_TOKENS,
    Backend,
    RedisServer,
    Worker,
    free_port,
    start_table_service,
    wait_for,
)
from tests.reference_settlement import kishpa_phase
from tests.support.settled_games import (
    TOKEN_SECRET,
    UrlWallet,
    database_url,  # noqa: F401 (the fixture)
    month_bounds,
    play_two_round_game,
    wallet_cli,
)

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

DRIFT_LAG_S = 2


def doctor_bowl(client: Any, table_id: str, tokens: int) -> None:
    """Set the bowl in the table's stored state (Redis) behind the table service's back."""
    state = json.loads(client.hget(keys.state(table_id), "state"))

    def walk(node: Any) -> int:
        if isinstance(node, dict):
            hits = 0
            for key, value in node.items():
                if key == "bowl" and isinstance(value, int):
                    node[key] = tokens
                    hits += 1
                else:
                    hits += walk(value)
            return hits
        if isinstance(node, list):
            return sum(walk(v) for v in node)
        return 0

    assert walk(state) >= 1
    client.hset(keys.state(table_id), "state", json.dumps(state))


async def test_a_month_of_play_exports_reports_and_drift_checks(
    tmp_path: Path,
    database_url: str,  # noqa: F811 (the fixture)
) -> None:
    start, until = month_bounds(dt.datetime.now(dt.UTC))
    redis_server = RedisServer(tmp_path / "redis", appendonly=False).start()
    backend = Backend(redis_server.url, redis_server.url)
    wallet = UrlWallet(free_port(), tmp_path / "wallet.sqlite3", backend)
    wallet.database_url = database_url
    port = free_port()
    table_addr = f"127.0.0.1:{port}"
    # Its beat runs the drift check every second, from the first game on, on the drift
    # queue a worker of its own consumes: it must find nothing while tables play and settle,
    # and raise the gauge once both sides are doctored. Every process shares one round
    # archive (the drift check's watermark lives there); a window ends DRIFT_LAG_S ago.
    shared = {
        "KISHPA_DRIFT_INTERVAL": "1",
        "KISHPA_TABLE_ADDR": table_addr,
        "ARCHIVE_DATABASE_URL": f"sqlite:///{tmp_path / 'archive.sqlite3'}",
        "KISHPA_DRIFT_LAG": str(DRIFT_LAG_S),
    }
    worker = Worker(
        wallet.addr, tmp_path / "worker.log", backend, extra_env=shared, extra_args=["--beat"]
    )
    drift_worker = Worker(
        wallet.addr,
        tmp_path / "drift.log",
        backend,
        queue=worker.queue,
        extra_env=shared,
        extra_args=["--drift"],
    )
    wallet.start(tmp_path / "wallet.log")
    worker.start(concurrency=2)
    drift_worker.start(concurrency=1)
    table_process, _ = start_table_service(
        tmp_path, worker, wallet, TOKEN_SECRET, port=port, **shared
    )
    client = backend.client()
    suffix = uuid.uuid4().hex[:6]
    env = backend.env(KISHPA_WALLET_ADDR=wallet.addr, DATABASE_URL=wallet.url, **shared)
    try:
        games = [(["ann", "bob", "cat"], 1), (["dan", "eve"], 5)]
        tables: list[str] = []
        players: list[str] = []
        for names, stake in games:
            seated = [f"{n}-{suffix}" for n in names]
            players += seated
            await play_two_round_game(port, seated, [], stake=stake)
        tables = [
            k.decode().split("{")[1].split("}")[0]
            for k in client.scan_iter(match=keys.outbox_pattern())
        ]
        assert len(tables) == 2
        records = {
            t: {k.decode(): json.loads(v) for k, v in client.hgetall(keys.outbox(t)).items()}
            for t in tables
        }
        assert all(sorted(r) == ["1:end", "1:start", "2:end", "2:start"] for r in records.values())
        wait_for(
            lambda: all(
                set(records[t]) <= {f.decode() for f in client.hkeys(keys.settled(t))}
                for t in tables
            ),
            90,
            "every phase of both games to be settled",
        )
        if dt.datetime.now(dt.UTC) >= until:
            pytest.skip("the play crossed a month boundary; the month report would split it")

        # The test's own totals: the opening grants of the players it seated, and what the
        # rules make of each phase the table recorded, per reason, by the tests' reference
        # (tests/reference_settlement.py; no code shared with the game or the wallet). No
        # player came near 0: no loads.
        expected: Counter[str] = Counter({"opening_grant": STARTING_TOKENS * len(players)})
        for table_records in records.values():
            for field, stored in table_records.items():
                expected.update(kishpa_phase(field.split(":")[1], stored["record"]).tokens)
        assert expected["bowl_contribution"] > 0

        month = start.strftime("%Y-%m")
        out = tmp_path / "month.csv"
        exported = wallet_cli(
            env, "export", "--since", start.date().isoformat(), "--until",
            until.date().isoformat(), "--format", "csv", "--output", str(out),
        )  # fmt: skip
        assert exported.returncode == 0, exported.stderr
        assert "resume with --cursor (done)" in exported.stderr
        with out.open(newline="") as f:
            rows = list(csv.DictReader(f))
        from_csv: Counter[str] = Counter()
        for row in rows:
            from_csv[row["reason"]] += int(row["amount"])
            assert row["time_utc"].startswith(month)
            assert row["time_utc"].endswith("Z")
            assert int(row["batch_id"]) > 0
        assert from_csv == expected
        assert all(r["table_id"] in tables for r in rows if r["reason"] != "opening_grant")

        jsonl = wallet_cli(
            env, "export", "--since", start.isoformat(), "--until", until.isoformat(),
            "--format", "jsonl",
        )  # fmt: skip
        assert jsonl.returncode == 0, jsonl.stderr
        lines = [json.loads(line) for line in jsonl.stdout.splitlines()]
        assert [(x["transfer_id"], x["amount"]) for x in lines] == [
            (int(r["transfer_id"]), int(r["amount"])) for r in rows
        ]

        report = wallet_cli(env, "report", "month", month, "--json")
        assert report.returncode == 0, report.stderr
        summary = json.loads(report.stdout)
        by_reason = {
            m["reason"].removeprefix("TRANSFER_REASON_").lower(): int(m["tokens"])
            for m in summary["movements"]
        }
        assert by_reason == dict(expected)
        # A fresh ledger: nothing before the month; at its end the players hold every token
        # the bank granted (the bowls of both closed games are empty again).
        assert int(summary["opening_outstanding"]) == 0
        assert int(summary["closing_outstanding"]) == STARTING_TOKENS * len(players)

        clean = wallet_cli(env, "drift", "--json")
        assert clean.returncode == 0, clean.stdout + clean.stderr
        assert json.loads(clean.stdout)["tables"] == 2

        # Doctor both sides.
        doctored_at = dt.datetime.now(dt.UTC)
        doctored_bowl, other = tables
        doctor_bowl(client, doctored_bowl, 7)
        # A balance the table shows, after its real settlements (issue 35).
        shown_player = records[doctored_bowl]["2:end"]["record"]["players"][0]
        assert int(client.hget(keys.balances(doctored_bowl), shown_player)) != 999999
        client.hset(keys.balances(doctored_bowl), shown_player, 999999)
        engine = create_wallet_engine(wallet.url, pool_size=1)
        with engine.begin() as conn:
            conn.execute(
                text(
                    "UPDATE postings SET amount = amount + 1 WHERE id = (SELECT min(id) FROM "
                    "postings WHERE table_id = :t AND reason = 'bowl_contribution')"
                ),
                {"t": other},
            )
        engine.dispose()
        authority = TokenAuthority(None, backend.secret)
        md = bearer_metadata(authority.issue_service_token("worker").token)
        async with grpc.aio.insecure_channel(wallet.addr) as channel:
            stub = wallet_pb2_grpc.WalletServiceStub(channel)
            first = await stub.GetTableLedger(
                wallet_pb2.GetTableLedgerRequest(table_id=doctored_bowl), metadata=md
            )
            start_batch = next(b for b in first.batches if b.request_id.endswith(":1:start"))
            # The same round phase settled again by hand, under a key of its own.
            await stub.ApplyBatch(
                wallet_pb2.ApplyBatchRequest(
                    request_id=f"by-hand:{doctored_bowl}:1:start",
                    postings=[t.posting for t in start_batch.transfers],
                ),
                metadata=md,
            )
            seated = records[other]["1:start"]["record"]["players"]
            # A batch naming a phase the table never had.
            await stub.ApplyBatch(
                wallet_pb2.ApplyBatchRequest(
                    request_id=f"by-hand:{other}:9:end",
                    postings=[
                        wallet_pb2.Posting(
                            from_account=f"player:{seated[0]}",
                            to_account=f"player:{seated[1]}",
                            amount=3,
                            reason=wallet_pb2.TRANSFER_REASON_WIN,
                            table_id=other,
                            round=9,
                            phase="end",
                        )
                    ],
                ),
                metadata=md,
            )

        # The new batches are in the drift check's window once DRIFT_LAG_S old.
        doctored_until = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=DRIFT_LAG_S + 0.5)
        wait_for(lambda: dt.datetime.now(dt.UTC) > doctored_until, 10, "the lag to pass")
        found = wallet_cli(env, "drift", "--json", "--source", "test")
        assert found.returncode == 1, found.stdout + found.stderr
        drift = json.loads(found.stdout)
        seen = {(d["check"], d["table_id"]) for d in drift["differences"]}
        assert {
            ("bowl_mismatch", doctored_bowl),
            ("phase_settled_twice", doctored_bowl),
            ("postings_differ", other),
            ("batch_without_phase", other),
            ("balance_mismatch", doctored_bowl),
        } <= seen
        mismatched = [d["detail"] for d in drift["differences"] if d["check"] == "balance_mismatch"]
        assert len(mismatched) == 1
        assert mismatched[0].startswith(
            f"table {doctored_bowl} account player:{shown_player}: Redis balance 999999, "
            "ledger balance "
        )
        assert {t for _, t in seen} <= set(tables)
        assert all(d["action"] for d in drift["differences"])

        runs = wallet_cli(env, "runs", "--kind", "drift", "--limit", "500", "--json")
        assert runs.returncode == 0, runs.stderr
        listed = json.loads(runs.stdout)
        by_hand = [
            (r["source"], r["ok"], r["discrepancies"]) for r in listed if r["source"] != "beat"
        ]
        assert by_hand == [("test", False, len(drift["differences"])), ("cli", True, 0)]
        scheduled = [r for r in listed if r["source"] == "beat"]
        assert scheduled, "the beat-driven drift check recorded no run"

        # The workers' schedule runs the same check and raises the gauge the alert fires on.
        gauge = 'kishpa_wallet_drift_differences{check="bowl_mismatch"}'
        wait_for(
            lambda: any(
                line.startswith(gauge) and float(line.split()[-1]) >= 1
                for line in drift_worker.metrics().splitlines()
            ),
            60,
            "the beat-driven drift check to raise the gauge",
        )

        # Every scheduled run that ended before the doctoring (during play and after) was clean.
        def ended(run: dict[str, Any]) -> dt.datetime:
            began = dt.datetime.fromisoformat(run["start_time"].replace("Z", "+00:00"))
            return began + dt.timedelta(milliseconds=run["duration_ms"])

        before = [r for r in scheduled if ended(r) < doctored_at]
        assert before, "no scheduled drift check ran before the doctoring"
        assert [r["result"]["differences"] for r in before if not r["ok"]] == []
    finally:
        for process in (table_process, wallet.process):
            if process is not None:
                process.stop()
        worker.stop()
        drift_worker.stop()
        redis_server.stop()
