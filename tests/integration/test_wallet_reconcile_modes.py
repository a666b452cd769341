"""Full and incremental reconciliation on real PostgreSQL and real SQLite: each catches what
docs/wallet.md ("Reconciliation: full and incremental") says it catches, and the incremental
check provably misses what it says it misses.

Each case builds a small ledger by hand (two players, batches moving known amounts), records
a clean run, adds two more batches, doctors the database one way, and compares what each
mode reports with the discrepancies worked out by hand from the doctoring.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from sqlalchemy import text as sql

from devkit.postgres import temporary_postgres_database
from services.wallet import reconcile as reconcile_module
from services.wallet.batch import Posting
from services.wallet.database import create_wallet_engine
from services.wallet.ledger import Ledger
from services.wallet.migrate import upgrade
from services.wallet.reconcile import ReconcileReport, reconcile_url
from tests.conftest import TEST_DATABASE_URL

pytestmark = pytest.mark.integration

OLD_KEYS = ("k0", "k1", "k2", "k3")  # checked by the clean run
NEW_KEYS = ("k4", "k5")  # after its horizon

# (doctoring SQL, what the incremental check reports, what the full check reports), as sets
# of (check, subject-or-key). The batches move player:a -> player:b and back (see ledger()).
CASES = {
    # An old posting's amount raised by 5: a pays 5 more, b receives 5 more than the balances
    # say. The balance check (always over all postings) sees it; only the full check also
    # names the batch.
    "old_posting_amount": (
        "UPDATE postings SET amount = amount + 5 WHERE seq = 0 AND batch_id = {k1}",
        {("postings_match", "player:a"), ("postings_match", "player:b")},
        {("postings_match", "player:a"), ("postings_match", "player:b"), ("batch", "k1")},
    ),
    # An old posting's reason changed: balances still add up; only the full check compares
    # the old batch with its result.
    "old_posting_reason": (
        "UPDATE postings SET reason = 'bowl_win' WHERE seq = 0 AND batch_id = {k2}",
        set(),
        {("batch", "k2")},
    ),
    # An old batch's stored result doctored: the same.
    "old_result": (
        "UPDATE batches SET result = replace(result, '\"win\"', '\"bonus_doll\"') WHERE id = {k3}",
        set(),
        {("batch", "k3")},
    ),
    # A new batch left unbalanced (its second posting gone): both modes name the batch, and
    # the balances no longer match the postings (b paid 1 back to a in that posting).
    "new_batch_unbalanced": (
        "DELETE FROM postings WHERE seq = 1 AND batch_id = {k5}",
        {("batch", "k5"), ("postings_match", "player:a"), ("postings_match", "player:b")},
        {("batch", "k5"), ("postings_match", "player:a"), ("postings_match", "player:b")},
    ),
    # A balance edited by hand: the sum is 7 off zero and a's balance is not its postings.
    "balance_edited": (
        "UPDATE accounts SET balance = balance + 7 WHERE id = 'player:a'",
        {("sum_zero", "all accounts"), ("postings_match", "player:a")},
        {("sum_zero", "all accounts"), ("postings_match", "player:a")},
    ),
}


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path_factory.mktemp('recon') / 'wallet.sqlite3'}"
        return
    with temporary_postgres_database(TEST_DATABASE_URL) as database:
        yield database


def ledger(url: str, keys: tuple[str, ...]) -> dict[str, int]:
    """Apply batch ``k<n>``: a pays b n+1 as a win, b pays a 1 as a bonus doll; batch ids."""
    engine = create_wallet_engine(url, pool_size=1)
    try:
        book = Ledger(engine)
        for player in ("a", "b"):
            book.open_wallet(player)
        for key in keys:
            n = int(key[1:])
            book.apply_batch(
                key,
                [
                    Posting("player:a", "player:b", n + 1, "win"),
                    Posting("player:b", "player:a", 1, "bonus_doll"),
                ],
            )
        with engine.connect() as conn:
            rows = conn.execute(sql("SELECT idempotency_key, id FROM batches")).all()
    finally:
        engine.dispose()
    return {str(k): int(i) for k, i in rows}


def found(report: ReconcileReport, ids: dict[str, int]) -> set[tuple[str, str]]:
    """The report's discrepancies as (check, subject), a batch named by its key."""
    keys = {f"batch {i}": k for k, i in ids.items()}
    out = set()
    for d in report.discrepancies:
        if d.check == "batch_balanced":
            out.add(("batch", keys[d.subject.split(" (")[0]]))
        else:
            out.add((d.check, d.subject))
    return out


def doctor(url: str, statement: str, **parameters: object) -> None:
    engine = create_wallet_engine(url, pool_size=1)
    try:
        with engine.begin() as conn:
            conn.execute(sql(statement), parameters)
    finally:
        engine.dispose()


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_mode_catches_what_it_claims(url: str, case: str) -> None:
    upgrade(url)
    ids = ledger(url, OLD_KEYS)
    first = reconcile_url(url, source="test", incremental=True, margin_ms=0)
    # No clean run yet: the first is a full check, and its horizon is the last batch so far.
    assert first.ok, first.discrepancies
    assert (first.mode, first.after_batch) == ("full", 0)
    assert first.through_batch == max(ids.values())
    ids = ledger(url, NEW_KEYS)  # idempotent for the old keys: same ids, two new batches
    statement, incremental, full = CASES[case]
    doctor(url, statement.format(**{k: i for k, i in ids.items()}))

    quick = reconcile_url(url, source="test", incremental=True, margin_ms=0)
    assert (quick.mode, quick.after_batch) == ("incremental", first.through_batch)
    assert quick.batches_checked == len(NEW_KEYS)
    assert found(quick, ids) == incremental
    assert quick.ok == (not incremental)

    everything = reconcile_url(url, incremental=False, margin_ms=0)
    assert everything.mode == "full"
    assert everything.batches_checked == len(ids)
    assert found(everything, ids) == full


def test_the_horizon_stays_behind_fresh_batches_and_a_forged_one_is_reported(url: str) -> None:
    upgrade(url)
    ids = ledger(url, OLD_KEYS)
    # Every batch is seconds old: none is below a ten-minute margin, so the run's horizon is
    # 0 and the next incremental run checks everything again.
    fresh = reconcile_url(url, source="test", incremental=True)
    assert fresh.ok
    assert fresh.through_batch == 0
    assert reconcile_url(url, incremental=True).batches_checked == len(ids)
    # A run record claiming a horizon past the last batch would hide batches: reported.
    forged = max(ids.values()) + 1000
    doctor(
        url,
        "INSERT INTO reconciliation_runs (kind, scope, source, started_ms, duration_ms, ok, "
        "discrepancies, result) VALUES ('ledger', 'x', 'x', 1, 1, true, 0, :result)",
        result=f'{{"through_batch": {forged}}}',
    )
    report = reconcile_url(url, incremental=True)
    assert [(d.check, d.subject) for d in report.discrepancies] == [
        ("checkpoint", f"batch {forged}")
    ]
    assert not report.ok


def test_the_full_check_comes_round_again_after_its_interval(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--full-every-days``: incremental while a clean full run is recent; full once the
    newest is older than the interval."""
    upgrade(url)
    ids = ledger(url, OLD_KEYS)

    def weekly() -> ReconcileReport:
        return reconcile_url(url, source="test", incremental=True, full_every_days=7, margin_ms=0)

    first = weekly()  # no full run yet: this one is
    assert (first.ok, first.mode) == (True, "full")
    ledger(url, NEW_KEYS)
    nightly = weekly()
    assert (nightly.mode, nightly.batches_checked) == ("incremental", len(NEW_KEYS))
    # Eight days later (run records are insert-only, so the clock moves, not the records):
    # the next run is the full one.
    later = time.time() + 8 * 86_400
    monkeypatch.setattr(reconcile_module.time, "time", lambda: later)
    again = weekly()
    assert (again.mode, again.batches_checked) == ("full", len(ids) + len(NEW_KEYS))
