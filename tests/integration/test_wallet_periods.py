"""Closed periods on real PostgreSQL and SQLite (docs/wallet.md, "Closed periods"): a batch
applied after its month was closed takes the first instant of the next open month, also
when the ledger planned it with the old boundary (the close raced it) and inside a group;
months close in order; a property test: whatever single field of whatever posting is
edited, ``verify`` names that posting's batch."""

from __future__ import annotations

import datetime as dt
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine, text

from devkit.postgres import temporary_postgres_database
from services.wallet import chain
from services.wallet.batch import Posting
from services.wallet.database import create_wallet_engine
from services.wallet.ledger import Ledger
from services.wallet.migrate import upgrade
from services.wallet.periods import PeriodOrder, close_period, month_bounds
from tests.conftest import TEST_DATABASE_URL

pytestmark = pytest.mark.integration


@pytest.fixture(params=["sqlite", "postgres"])
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engine]:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'wallet.sqlite3'}"
        upgrade(url)
        engine = create_wallet_engine(url, pool_size=2)
        yield engine
        engine.dispose()
        return
    with temporary_postgres_database(TEST_DATABASE_URL) as url:
        upgrade(url)
        engine = create_wallet_engine(url, pool_size=2)
        yield engine
        engine.dispose()


def _effective(engine: Engine, batch_id: int) -> set[tuple[int, int]]:
    with engine.connect() as conn:
        rows = conn.execute(
            text("SELECT created_ms, effective_ms FROM postings WHERE batch_id = :b"),
            {"b": batch_id},
        )
        return {(int(c), int(e)) for c, e in rows}


def _this_month() -> tuple[str, int]:
    now = dt.datetime.now(dt.UTC)
    month = now.strftime("%Y-%m")
    return month, month_bounds(month)[1]


def test_a_batch_after_the_close_counts_in_the_next_month(engine: Engine) -> None:
    ledger = Ledger(engine)
    ledger.open_wallet("a")
    ledger.open_wallet("b")
    before = ledger.apply_batch("k1", [Posting("player:a", "player:b", 3, "win")])
    (created, effective) = _effective(engine, before.batch_id).pop()
    assert created == effective  # an open month: counted when posted
    # The ledger has the old boundary cached: the close races it.
    month, next_start = _this_month()
    period, already = close_period(engine, month, "admin:test", "r1")
    assert not already
    assert period.until_ms == next_start
    late = ledger.apply_batch("k2", [Posting("player:b", "player:a", 1, "win")])
    [(posted, counted)] = _effective(engine, late.batch_id)
    assert counted == next_start
    assert posted < next_start
    grouped = ledger.apply_group(
        [
            ("k3", [Posting("player:a", "player:b", 1, "win")]),
            ("k4", [Posting("player:b", "player:a", 1, "win")]),
        ]
    )
    for outcome in grouped:
        assert not isinstance(outcome, Exception)
        assert {e for _, e in _effective(engine, outcome.batch_id)} == {next_start}
    assert chain.verify(engine).ok
    again, already = close_period(engine, month, "admin:other", "r2")
    assert already
    assert again.closed_by == "admin:test"


def test_months_close_in_order_and_not_before_they_begin(engine: Engine) -> None:
    now = int(dt.datetime(2026, 6, 15, tzinfo=dt.UTC).timestamp() * 1000)
    close_period(engine, "2026-03", "admin:t", "r1", now_ms=now)
    with pytest.raises(PeriodOrder, match="close 2026-04 first"):
        close_period(engine, "2026-05", "admin:t", "r2", now_ms=now)
    with pytest.raises(PeriodOrder, match="already final"):
        close_period(engine, "2026-01", "admin:t", "r3", now_ms=now)
    with pytest.raises(PeriodOrder, match="has not started"):
        close_period(engine, "2026-07", "admin:t", "r4", now_ms=now)
    close_period(engine, "2026-04", "admin:t", "r5", now_ms=now)


_FIELDS = {
    "amount": "amount + 1",
    "reason": "'bonus_one'",
    "table_id": "'tx'",
    "round": "7",
    "phase": "'payout'",
    "from_account": "'player:z'",
    "effective_ms": "effective_ms + 1",
    "created_ms": "created_ms - 1",
    "seq": "seq + 10",
}


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    amounts=st.lists(st.integers(1, 40), min_size=2, max_size=6),
    victim=st.integers(0, 100),
    field=st.sampled_from(sorted(_FIELDS)),
)
def test_property_any_edited_field_names_its_batch(
    amounts: list[int], victim: int, field: str
) -> None:
    """SQLite (a fresh file per example): every batch moves between three players; one field
    of one posting is changed; the first broken batch is that posting's."""
    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite:///{folder}/wallet.sqlite3"
        upgrade(url)
        engine = create_wallet_engine(url, pool_size=1)
        try:
            ledger = Ledger(engine)
            for p in ("x", "y", "z"):
                ledger.open_wallet(p)
            ids = [
                ledger.apply_batch(
                    f"b{n}",
                    [
                        Posting("player:x", "player:y", a, "win", "t1", n, "end"),
                        Posting("player:y", "player:x", 1, "bonus_doll", "t1", n, "end"),
                    ],
                ).batch_id
                for n, a in enumerate(amounts)
            ]
            target = ids[victim % len(ids)]
            with engine.begin() as conn:
                conn.execute(
                    text(
                        f"UPDATE postings SET {field} = {_FIELDS[field]} "  # noqa: S608
                        "WHERE batch_id = :b AND seq = 0"
                    ),
                    {"b": target},
                )
            report = chain.verify(engine)
            first = report.first
            assert first is not None
            assert first.batch_id == target
        finally:
            engine.dispose()
