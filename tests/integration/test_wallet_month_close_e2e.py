"""Finance step 2 acceptance, through real processes (SQLite and PostgreSQL): bots play a game
at ``kishpa serve table``, a ``kishpa worker`` settles it into ``kishpa serve wallet``, then

- ``kishpa wallet close-period`` closes the month in progress (audited, exit 0; again: exit 0,
  already closed); a batch applied afterwards through the worker's ``ApplyBatch`` is not
  stamped into the closed month: it takes the first instant of the next month as its
  effective time (``time_utc``) and keeps the moment of posting (``posted_utc``);
- the closed month's export and report are byte-identical before and after that batch; the
  report says CLOSED, the next month's says OPEN;
- every player's statement ends at the balance the ledger holds, and its movements are the
  export's for that account;
- ``kishpa wallet verify-chain`` passes, then names the batch of one old posting altered
  directly in the database;
- the CLI fixes: a refused export leaves an existing file untouched, an unopened player is
  an error in ``report balances``, ``| head`` prints no traceback.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import subprocess
import uuid
from pathlib import Path

import grpc
import pytest
from sqlalchemy import text

from kishpa.wallet.v1 import wallet_pb2, wallet_pb2_grpc
from services.common.auth import TokenAuthority, bearer_metadata
from services.wallet.database import create_wallet_engine
from shared import keys
from tests.integration.workers_support import (
    KISHPA,
    Backend,
    RedisServer,
    Worker,
    free_port,
    start_table_service,
    wait_for,
)
from tests.support.settled_games import (
    TOKEN_SECRET,
    UrlWallet,
    database_url,  # noqa: F401 (the fixture)
    month_bounds,
    play_two_round_game,
    wallet_cli,
)

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def _run(command: str | list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """A command line; a string runs in a shell (``| head``: a reader that leaves early)."""
    return subprocess.run(
        command,
        shell=isinstance(command, str),
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def _csv(output: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(output)))


async def test_close_a_month_then_post_export_state_and_verify_the_chain(
    tmp_path: Path,
    database_url: str,  # noqa: F811 (the fixture)
) -> None:
    start, until = month_bounds(dt.datetime.now(dt.UTC))
    month, next_month = start.strftime("%Y-%m"), until.strftime("%Y-%m")
    redis_server = RedisServer(tmp_path / "redis", appendonly=False).start()
    backend = Backend(redis_server.url, redis_server.url)
    wallet = UrlWallet(free_port(), tmp_path / "wallet.sqlite3", backend)
    wallet.database_url = database_url
    port = free_port()
    worker = Worker(wallet.addr, tmp_path / "worker.log", backend)
    wallet.start(tmp_path / "wallet.log")
    worker.start(concurrency=2)
    table_process, _ = start_table_service(tmp_path, worker, wallet, TOKEN_SECRET, port=port)
    client = backend.client()
    env = backend.env(KISHPA_WALLET_ADDR=wallet.addr, DATABASE_URL=wallet.url)
    suffix = uuid.uuid4().hex[:6]
    players = [f"{n}-{suffix}" for n in ("ann", "bob", "cat")]
    try:
        await play_two_round_game(port, players, [], stake=5)
        (table,) = [
            k.decode().split("{")[1].split("}")[0]
            for k in client.scan_iter(match=keys.outbox_pattern())
        ]
        wait_for(
            lambda: (
                {f.decode() for f in client.hkeys(keys.settled(table))}
                >= {"1:start", "1:end", "2:start", "2:end"}
            ),
            90,
            "every phase of the game to be settled",
        )
        if dt.datetime.now(dt.UTC) >= until - dt.timedelta(minutes=1):
            pytest.skip("the play reached the month's end; the close would be another month's")

        verified = wallet_cli(env, "verify-chain")
        assert verified.returncode == 0, verified.stdout + verified.stderr
        assert "OK" in verified.stdout

        window = ("--since", start.isoformat(), "--until", until.isoformat())
        before = wallet_cli(env, "export", *window)
        assert before.returncode == 0, before.stderr
        open_report = wallet_cli(env, "report", "month", month)
        assert "OPEN" in open_report.stdout, open_report.stdout

        closed = wallet_cli(env, "close-period", month, "--as", "fiona")
        assert closed.returncode == 0, closed.stdout + closed.stderr
        assert f"{month} closed: by admin:fiona" in closed.stdout
        again = wallet_cli(env, "close-period", month, "--as", "fiona")
        assert again.returncode == 0, again.stderr
        assert "already closed" in again.stdout
        report_closed = wallet_cli(env, "report", "month", month, "--json")
        assert json.loads(report_closed.stdout)["closed"] is True
        # The worker may not close a month: finance operators only.
        audit = _run([KISHPA, "admin", "--as", "fiona", "--json", "audit"], env)
        assert '"close_period"' in audit.stdout or "CLOSE_PERIOD" in audit.stdout, audit.stdout

        # A movement after the close, through the worker's RPC: not into the closed month.
        md = bearer_metadata(
            TokenAuthority(None, backend.secret).issue_service_token("worker").token
        )
        posted_before = dt.datetime.now(dt.UTC)
        async with grpc.aio.insecure_channel(wallet.addr) as channel:
            stub = wallet_pb2_grpc.WalletServiceStub(channel)
            late = await stub.ApplyBatch(
                wallet_pb2.ApplyBatchRequest(
                    request_id=f"late:{suffix}",
                    postings=[
                        wallet_pb2.Posting(
                            from_account=f"player:{players[0]}",
                            to_account=f"player:{players[1]}",
                            amount=7,
                            reason=wallet_pb2.TRANSFER_REASON_WIN,
                        )
                    ],
                ),
                metadata=md,
            )
        assert late.batch_id > 0

        after = wallet_cli(env, "export", *window)
        assert after.stdout == before.stdout  # the closed month, byte for byte
        assert wallet_cli(env, "report", "month", month, "--json").stdout == report_closed.stdout
        following = wallet_cli(
            env, "export", "--since", until.isoformat(), "--until",
            (until + dt.timedelta(days=40)).isoformat(),
        )  # fmt: skip
        (moved,) = _csv(following.stdout)
        assert moved["batch_id"] == str(late.batch_id)
        assert moved["time_utc"] == until.strftime("%Y-%m-%dT00:00:00.000Z")
        posted = dt.datetime.fromisoformat(moved["posted_utc"].replace("Z", "+00:00"))
        assert posted_before - dt.timedelta(seconds=1) <= posted < until
        assert moved["round"] == ""  # a posting about no round: empty, not 0
        next_report = wallet_cli(env, "report", "month", next_month)
        assert "OPEN" in next_report.stdout

        # Statements end at the ledger's balances; their movements are the export's.
        everything = _csv(
            wallet_cli(
                env, "export", "--since", "2000-01-01", "--until",
                (until + dt.timedelta(days=40)).isoformat(),
            ).stdout
        )  # fmt: skip
        engine = create_wallet_engine(wallet.url, pool_size=1)
        with engine.connect() as conn:
            held = {
                str(a): int(b) for a, b in conn.execute(text("SELECT id, balance FROM accounts"))
            }
        for player in players:
            account = f"player:{player}"
            out = wallet_cli(env, "statement", account)
            assert out.returncode == 0, out.stderr
            lines = _csv(out.stdout)
            assert lines[0]["line"] == "opening"
            assert lines[0]["balance"] == "0"
            assert lines[-1]["line"] == "closing"
            assert int(lines[-1]["balance"]) == held[account]
            movements = [
                (r["transfer_id"], int(r["amount"]) * (1 if r["to_account"] == account else -1))
                for r in everything
                if account in (r["from_account"], r["to_account"])
            ]
            assert [(x["transfer_id"], int(x["amount"])) for x in lines[1:-1]] == movements
            jsonl = wallet_cli(env, "statement", account, "--format", "jsonl")
            last = json.loads(jsonl.stdout.splitlines()[-1])
            assert (last["line"], last["balance"]) == ("closing", held[account])
        listed = wallet_cli(env, "accounts", "--json")
        assert {
            json.loads(x)["account"]: json.loads(x)["tokens"] for x in listed.stdout.splitlines()
        } == held

        # The CLI fixes.
        target = tmp_path / "kept.csv"
        target.write_text("precious\n")
        refused = wallet_cli(
            env, "export", *window, "--account", "player:nobody", "-o", str(target)
        )
        assert refused.returncode == 1
        assert target.read_text() == "precious\n"
        assert "(done)" not in refused.stderr
        nobody = wallet_cli(
            env, "report", "balances", "--as-of", until.isoformat(), "player:nobody"
        )
        assert nobody.returncode == 1, nobody.stdout
        piped = _run(
            f"{KISHPA} wallet export --since {start.date()} --until {until.date()} "
            f"--chunk-size 1 | head -1",
            env,
        )
        assert "Traceback" not in piped.stderr, piped.stderr

        # One old posting altered by hand: verify-chain names its batch.
        with engine.begin() as conn:
            victim = conn.execute(
                text(
                    "SELECT id, batch_id FROM postings WHERE table_id = :t "
                    "AND reason = 'bowl_contribution' ORDER BY id LIMIT 1"
                ),
                {"t": table},
            ).one()
            conn.execute(
                text("UPDATE postings SET amount = amount + 1 WHERE id = :p"), {"p": victim.id}
            )
        engine.dispose()
        broken = wallet_cli(env, "verify-chain", "--json")
        assert broken.returncode == 1, broken.stdout + broken.stderr
        first = json.loads(broken.stdout)["first_broken_batch"]
        assert first["batch_id"] == victim.batch_id
        text_out = wallet_cli(env, "verify-chain")
        assert f"first broken batch {victim.batch_id}" in text_out.stdout
    finally:
        for process in (table_process, wallet.process):
            if process is not None:
                process.stop()
        worker.stop()
        redis_server.stop()
