"""The round archive's store on SQLite and PostgreSQL: migrations (own history beside the
wallet's), monthly partitions, idempotent keyed writes, conflicts refused, paging."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import time
from collections.abc import Iterator

import pytest
import sqlalchemy as sa

from archive import partitions
from archive.database import create_archive_engine
from archive.migrate import current_revision, head_revision, upgrade
from archive.schema import phases, player_games, rounds
from archive.store import ArchiveConflict, ArchiveStore, PhaseRow, RoundRow
from devkit.postgres import temporary_postgres_database
from games.ledger import Posting
from services.wallet.database import create_wallet_engine
from services.wallet.ledger import Ledger
from services.wallet.migrate import current_revision as wallet_revision
from services.wallet.migrate import upgrade as wallet_upgrade
from tests.conftest import TEST_DATABASE_URL
from tests.integration.workers_support import KISHPA

pytestmark = pytest.mark.integration

# 2026-03-15 and 2026-04-02 (UTC), in ms: two months, two partitions on PostgreSQL.
MARCH = int(dt.datetime(2026, 3, 15, tzinfo=dt.UTC).timestamp() * 1000)
APRIL = int(dt.datetime(2026, 4, 2, tzinfo=dt.UTC).timestamp() * 1000)


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A database holding the wallet's schema AND the archive's (the default: shared)."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path_factory.mktemp('archive') / 'wallet.sqlite3'}"
        wallet_upgrade(url)
        upgrade(url)
        yield url
        return
    with temporary_postgres_database(TEST_DATABASE_URL) as url:
        wallet_upgrade(url)
        upgrade(url)
        yield url


@pytest.fixture
def store(url: str) -> Iterator[ArchiveStore]:
    engine = create_archive_engine(url)
    yield ArchiveStore(engine)
    engine.dispose()


def _start(table: str, round_no: int, at: int, batch: str) -> PhaseRow:
    postings = (
        {"from": "player:ann", "to": f"bowl:{table}", "amount": 2, "reason": "bowl_contribution"},
        {"from": "player:ben", "to": f"bowl:{table}", "amount": 2, "reason": "bowl_contribution"},
    )
    return PhaseRow(table, round_no, "start", at, "kishpa", batch, postings)


def _end(table: str, round_no: int, at: int, batch: str) -> PhaseRow:
    postings = (
        {"from": "player:ben", "to": "player:ann", "amount": 3, "reason": "win"},
        {"from": "bank", "to": "player:ben", "amount": 50, "reason": "bank_load"},
    )
    return PhaseRow(table, round_no, "end", at, "kishpa", batch, postings)


def _round(table: str, round_no: int, at: int, record: bytes = b"rec") -> RoundRow:
    return RoundRow(table, round_no, at, "kishpa", round_no, 2, ("ann", "ben"), record)


def test_both_histories_live_side_by_side_in_one_database(url: str) -> None:
    assert current_revision(url) == head_revision() == "a0002"
    assert wallet_revision(url) is not None  # the ledger's own, untouched
    upgrade(url)  # again: nothing to do
    assert current_revision(url) == "a0002"


def test_a_round_is_written_once_with_its_batches_and_nets(store: ArchiveStore) -> None:
    assert store.write_phase(_start("t1", 1, MARCH, "b-start"), now_ms=MARCH + 5)
    assert store.write_ending(
        _end("t1", 1, MARCH + 60_000, "b-end"),
        [_round("t1", 1, MARCH + 60_000)],
        phase_rounds=(1, 1),
        now_ms=MARCH + 60_005,
    )
    row = store.round("t1", 1)
    assert row is not None
    assert row.batch_ids == ("b-start", "b-end")
    # By hand: ann pays 2 to the bowl and wins 3 from ben: +1; ben -2 -3 = -5 (the bank
    # load is the wallet's, not the game's).
    assert row.results == {"ann": 1, "ben": -5}
    # Delivered again (a redelivered task): nothing more, no error.
    assert not store.write_phase(_start("t1", 1, MARCH, "b-start"), now_ms=MARCH + 9)
    assert not store.write_ending(
        _end("t1", 1, MARCH + 60_000, "b-end"),
        [_round("t1", 1, MARCH + 60_000)],
        phase_rounds=(1, 1),
        now_ms=MARCH + 70_000,
    )
    games = store.player_games("ben", before=None, limit=10)
    assert [(g.table_id, g.round_no, g.net_tokens, g.result, g.seat) for g in games] == [
        ("t1", 1, -5, "lost", 1)
    ]
    with store.engine.connect() as conn:
        counts = [
            conn.execute(sa.select(sa.func.count()).select_from(t)).scalar()
            for t in (rounds, phases, player_games)
        ]
    assert counts == [1, 2, 2]


def test_a_conflicting_second_write_is_refused(store: ArchiveStore) -> None:
    store.write_phase(_start("t2", 1, MARCH, "b1"), now_ms=MARCH)
    with pytest.raises(ArchiveConflict):
        store.write_phase(_start("t2", 1, MARCH, "b-other"), now_ms=MARCH)
    store.write_ending(
        _end("t2", 1, MARCH + 1, "b2"), [_round("t2", 1, MARCH + 1)], phase_rounds=(1, 1), now_ms=1
    )
    with pytest.raises(ArchiveConflict):
        store.write_ending(
            _end("t2", 1, MARCH + 1, "b2"),
            [_round("t2", 1, MARCH + 1, record=b"another deal")],
            phase_rounds=(1, 1),
            now_ms=2,
        )
    assert store.round("t2", 1) is not None
    assert store.round("t2", 1).record == b"rec"  # type: ignore[union-attr]


def test_pages_walk_a_players_games_newest_first_across_months(store: ArchiveStore) -> None:
    times = [MARCH + i * 1000 for i in range(3)] + [APRIL + i * 1000 for i in range(3)]
    for n, at in enumerate(times, start=1):
        store.write_ending(
            _end("t3", n, at, f"b{n}"), [_round("t3", n, at)], phase_rounds=(n, n), now_ms=at
        )
    seen: list[int] = []
    before = None
    while True:
        page = store.player_games("ann", before=before, limit=4)
        seen += [g.round_no for g in page]
        if len(page) < 4:
            break
        last = page[-1]
        before = (last.ended_ms, last.table_id, last.round_no)
    assert seen == [6, 5, 4, 3, 2, 1]
    assert [r.round_no for r in store.table_rounds("t3", after_round=2, limit=2)] == [3, 4]
    assert store.last_round("t3") == 6
    assert store.player_seated("t3", "ann") is True
    assert store.player_seated("t3", "zed") is False
    assert store.player_seated("nope", "ann") is None


def test_postgres_keeps_each_month_in_its_own_partition(store: ArchiveStore) -> None:
    if store.engine.dialect.name != "postgresql":
        pytest.skip("SQLite keeps plain tables")
    store.write_ending(
        _end("t4", 1, MARCH, "b"), [_round("t4", 1, MARCH)], phase_rounds=(1, 1), now_ms=MARCH
    )
    store.write_ending(
        _end("t4", 2, APRIL, "c"), [_round("t4", 2, APRIL)], phase_rounds=(2, 2), now_ms=APRIL
    )
    with store.engine.begin() as conn:
        assert (2026, 3) in partitions.attached_months(conn)
        march = conn.execute(sa.text("SELECT count(*) FROM archive_rounds_y2026m03")).scalar()
        assert march == 1
        partitions.detach_month(conn, 2026, 3, drop=True)
        assert (2026, 3) not in partitions.attached_months(conn)
    assert store.round("t4", 1) is None  # gone with its month
    assert store.round("t4", 2) is not None
    row = store.round("t4", 2)
    assert row is not None
    assert row.results == {"ann": 3, "ben": -3}


def test_prune_keeps_what_the_ledger_still_references_and_drops_whole_old_months(
    url: str, store: ArchiveStore
) -> None:
    """``kishpa history prune`` (the CronJob's command) on the shared database: rounds past
    retention go, except a table the ledger posted to within the period; on PostgreSQL a
    month with nothing to keep is dropped whole."""
    for table, at in (("kept", MARCH), ("gone", MARCH + 1), ("gone", APRIL)):
        n = 1 if at != APRIL else 2
        store.write_ending(
            _end(table, n, at, f"{table}{n}"),
            [_round(table, n, at)],
            phase_rounds=(n, n),
            now_ms=at,
        )
    recent = int(time.time() * 1000) - 1000
    store.write_ending(
        _end("new", 1, recent, "n1"), [_round("new", 1, recent)], phase_rounds=(1, 1), now_ms=recent
    )
    engine = create_wallet_engine(url, pool_size=1)
    try:
        ledger = Ledger(engine)
        ledger.open_wallet("ann")
        # A refund of table "kept" today: finance still follows it to its round.
        ledger.apply_batch(
            "late-refund",
            [Posting("bank", "player:ann", 1, "bank_load", table_id="kept", round=1, phase="end")],
        )
    finally:
        engine.dispose()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KISHPA_", "ARCHIVE_"))}
    env["DATABASE_URL"] = url  # the archive defaults to the wallet's database
    dry = subprocess.run(
        [KISHPA, "history", "prune", "--retention-days", "30", "--dry-run"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert dry.returncode == 0, dry.stderr
    assert json.loads(dry.stdout)["rounds_removed"] == 2
    assert store.round("gone", 1) is not None  # a dry run removes nothing
    done = subprocess.run(
        [KISHPA, "history", "prune", "--retention-days", "30"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["rounds_removed"] == 2
    assert report["tables_kept"] == ["kept"]
    assert store.round("gone", 1) is None
    assert store.round("gone", 2) is None
    assert store.round("kept", 1) is not None
    assert store.round("new", 1) is not None
    assert store.player_games("ann", before=None, limit=10)[-1].table_id == "kept"
    if store.engine.dialect.name == "postgresql":
        assert report["months_dropped"] == ["2026-04"]  # March keeps "kept"
        with store.engine.connect() as conn:
            months = partitions.attached_months(conn)
        assert (2026, 4) not in months
        assert (2026, 3) in months
        assert len(report["months_ahead"]) == partitions.MONTHS_AHEAD + 1
