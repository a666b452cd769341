"""The tamper-evident chain on real PostgreSQL and SQLite (docs/wallet.md, "A tamper-evident
ledger"): every batch is chained, concurrent committers keep the chain whole, the migration
chains a ledger that predates it, ``verify`` names the first batch whose rows were edited,
deleted or inserted, anchors catch a rewritten chain, and the record tables refuse UPDATE and
DELETE."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator

import pytest
from sqlalchemy import Engine, text

from devkit.postgres import temporary_postgres_database
from services.wallet import chain
from services.wallet.batch import Posting
from services.wallet.database import create_wallet_engine
from services.wallet.group_commit import GroupCommitter
from services.wallet.ledger import Ledger
from services.wallet.migrate import upgrade
from services.wallet.periods import close_period
from services.wallet.runs import Run, record_run
from tests.conftest import TEST_DATABASE_URL

pytestmark = pytest.mark.integration


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path_factory.mktemp('chain') / 'wallet.sqlite3'}"
        return
    with temporary_postgres_database(TEST_DATABASE_URL) as database:
        yield database


@pytest.fixture
def engine(url: str) -> Iterator[Engine]:
    upgrade(url)
    engine = create_wallet_engine(url, pool_size=4)
    yield engine
    engine.dispose()


def _play(ledger: Ledger, batches: int) -> None:
    ledger.open_wallet("a")
    ledger.open_wallet("b")
    for n in range(batches):
        ledger.apply_batch(
            f"k{n}",
            [
                Posting("player:a", "player:b", n + 1, "win", "t1", n, "end"),
                Posting("player:b", "bowl:t1", 1, "bowl_contribution", "t1", n, "start"),
            ],
        )


def _ids(engine: Engine) -> list[int]:
    with engine.connect() as conn:
        return [int(r[0]) for r in conn.execute(text("SELECT id FROM batches ORDER BY id"))]


def test_every_batch_is_chained_and_verifies(engine: Engine) -> None:
    ledger = Ledger(engine)
    _play(ledger, 5)
    report = chain.verify(engine)
    assert report.ok, report.breaks
    # Independently: 2 openings + 5 batches, 2 + 10 postings.
    assert (report.entries, report.batches, report.postings) == (7, 7, 12)
    # The head is the last link, recomputed here from the stored digests by hand.
    with engine.connect() as conn:
        rows = conn.execute(text("SELECT seq, batch_id, digest FROM ledger_chain ORDER BY seq"))
        previous = "0" * 64
        for seq, batch_id, digest in rows:
            line = f"{previous}\t{seq}\t{batch_id}\t{digest}\n"
            previous = hashlib.sha256(line.encode()).hexdigest()
    assert report.head_hash == previous
    assert report.head_seq == 7


@pytest.mark.parametrize(
    ("doctoring", "victim"),
    [
        ("UPDATE postings SET amount = amount + 1 WHERE batch_id = :b AND seq = 0", 3),
        ("UPDATE postings SET reason = 'bonus_doll' WHERE batch_id = :b AND seq = 0", 4),
        ("UPDATE postings SET round = NULL WHERE batch_id = :b AND seq = 1", 3),
        ("DELETE FROM postings WHERE batch_id = :b AND seq = 1", 5),
        # A character COPY escapes (PostgreSQL rechecks such a batch the exact way).
        ("UPDATE postings SET phase = :odd WHERE batch_id = :b AND seq = 0", 2),
        ("UPDATE batches SET idempotency_key = 'forged' WHERE id = :b", 3),
        (
            "INSERT INTO postings (batch_id, seq, from_account, to_account, amount, reason, "
            "created_ms, effective_ms) VALUES (:b, 9, 'player:b', 'player:a', 1, 'win', 1, 1)",
            4,
        ),
    ],
)
def test_an_edit_names_the_first_broken_batch(engine: Engine, doctoring: str, victim: int) -> None:
    ledger = Ledger(engine)
    _play(ledger, 5)
    ids = _ids(engine)
    batch_id = ids[victim]
    with engine.begin() as conn:
        conn.execute(text(doctoring), {"b": batch_id, "odd": "end\n"})
    report = chain.verify(engine)
    assert not report.ok
    first = report.first
    assert first is not None
    assert first.batch_id == batch_id
    assert first.seq == victim + 1  # chained in commit order: one batch at a time here
    assert f"first broken batch {batch_id}" in chain.format_report(report)


def test_a_batch_inserted_by_hand_is_not_in_the_chain(engine: Engine) -> None:
    _play(Ledger(engine), 2)
    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO batches (idempotency_key, body_hash, result, created_ms) "
                "VALUES ('forged', 'x', '{}', 1)"
            )
        )
    report = chain.verify(engine)
    forged = max(_ids(engine))
    assert [(b.seq, b.batch_id) for b in report.breaks] == [(0, forged)]


def test_a_rewritten_chain_is_caught_by_the_heads_kept(engine: Engine, url: str) -> None:
    """Someone who edits a posting and recomputes the whole chain (triggers dropped) still
    contradicts the head a run record stored."""
    ledger = Ledger(engine)
    _play(ledger, 3)
    record_run(engine, Run("ledger", "test", "test", 1, 0, True, 0, {}))
    victim = _ids(engine)[2]
    with engine.begin() as conn:
        conn.execute(
            text("UPDATE postings SET amount = amount + 1 WHERE batch_id = :b"), {"b": victim}
        )
        if url.startswith("sqlite"):
            conn.execute(text("DROP TRIGGER ledger_chain_no_delete"))
        else:
            conn.execute(text("ALTER TABLE ledger_chain DISABLE TRIGGER USER"))
        conn.execute(text("DELETE FROM ledger_chain"))
        conn.execute(text("UPDATE ledger_chain_head SET seq = 0, hash = :g"), {"g": chain.GENESIS})
    # Rechain everything as the migration would.
    with engine.begin() as conn:
        written = []
        for batch_id, key, body, created in conn.execute(
            text("SELECT id, idempotency_key, body_hash, created_ms FROM batches ORDER BY id")
        ):
            h = hashlib.sha256(chain.header_line(batch_id, key, body, created).encode())
            for row in conn.execute(
                text(
                    f"SELECT {', '.join(chain.POSTING_COLUMNS)} FROM postings "  # noqa: S608
                    "WHERE batch_id = :b ORDER BY seq"
                ),
                {"b": batch_id},
            ):
                h.update(chain.posting_line(row).encode())
            written.append((batch_id, h.hexdigest()))
        previous = chain.GENESIS
        for seq, (batch_id, digest) in enumerate(written, 1):
            previous = chain.link(previous, seq, batch_id, digest)
            conn.execute(
                text(
                    "INSERT INTO ledger_chain (seq, batch_id, digest, hash, created_ms) "
                    "VALUES (:s, :b, :d, :h, 0)"
                ),
                {"s": seq, "b": batch_id, "d": digest, "h": previous},
            )
        conn.execute(
            text("UPDATE ledger_chain_head SET seq = :s, hash = :h"),
            {"s": len(written), "h": previous},
        )
    report = chain.verify(engine)
    assert not report.ok
    assert any("rewritten" in b.detail for b in report.breaks)


def test_concurrent_group_commits_keep_one_whole_chain(engine: Engine) -> None:
    ledger = Ledger(engine)
    players = [f"p{n}" for n in range(8)]
    for p in players:
        ledger.open_wallet(p)
    committer = GroupCommitter(ledger, threads=4, max_group=8)

    def play(n: int) -> None:
        for r in range(15):
            src, dst = players[n], players[(n + 1 + r) % len(players)]
            if src == dst:
                dst = players[(n + 2) % len(players)]
            committer.apply_batch(
                f"c{n}:{r}", [Posting(f"player:{src}", f"player:{dst}", 1, "win")]
            )

    threads = [threading.Thread(target=play, args=(n,)) for n in range(len(players))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    committer.close()
    report = chain.verify(engine)
    assert report.ok, report.breaks
    assert report.entries == report.batches == len(players) + len(players) * 15


def test_the_migration_chains_an_existing_ledger(url: str) -> None:
    upgrade(url, "0003_i24")
    engine = create_wallet_engine(url, pool_size=2)
    try:
        with engine.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO accounts (id, kind, balance, created_ms) VALUES "
                    "('player:x', 'player', 7, 1)"
                )
            )
            conn.execute(text("UPDATE accounts SET balance = -7 WHERE id = 'bank'"))
            for n, amount in ((1, 3), (2, 4)):
                conn.execute(
                    text(
                        "INSERT INTO batches (idempotency_key, body_hash, result, created_ms) "
                        "VALUES (:k, 'h', '{}', :t)"
                    ),
                    {"n": n, "k": f"old{n}", "t": 1_000 * n},
                )
                conn.execute(
                    text(
                        "INSERT INTO postings (batch_id, seq, from_account, to_account, amount, "
                        "reason, created_ms) VALUES ((SELECT id FROM batches WHERE "
                        "idempotency_key = :k), 0, 'bank', 'player:x', :a, 'player_load', :t)"
                    ),
                    {"k": f"old{n}", "a": amount, "t": 1_000 * n},
                )
        upgrade(url)
        report = chain.verify(engine)
        assert report.ok, report.breaks
        assert (report.entries, report.postings) == (2, 2)
        with engine.connect() as conn:
            effective = conn.execute(text("SELECT effective_ms FROM postings ORDER BY id")).all()
        assert [int(e[0]) for e in effective] == [1_000, 2_000]
        # New batches continue the migrated chain.
        Ledger(engine).load_tokens("x", "r1")
        again = chain.verify(engine)
        assert again.ok
        assert again.entries == 3
    finally:
        engine.dispose()


@pytest.mark.parametrize("table", ["reconciliation_runs", "ledger_chain", "closed_periods"])
def test_record_tables_refuse_update_and_delete(engine: Engine, table: str) -> None:
    _play(Ledger(engine), 1)
    record_run(engine, Run("ledger", "test", "test", 1, 0, True, 0, {}))
    close_period(engine, "2026-01", "admin:test", "r1", now_ms=1_800_000_000_000)
    for statement in (
        f"UPDATE {table} SET {_column(table)} = {_column(table)}",  # noqa: S608
        f"DELETE FROM {table}",  # noqa: S608
    ):
        with pytest.raises(Exception, match="insert-only"), engine.begin() as conn:
            conn.execute(text(statement))
    with engine.connect() as conn:
        count = text(f"SELECT count(*) FROM {table}")  # noqa: S608 (a fixed table name)
        assert conn.execute(count).scalar_one() >= 1


def _column(table: str) -> str:
    return {"reconciliation_runs": "ok", "ledger_chain": "hash", "closed_periods": "closed_by"}[
        table
    ]
