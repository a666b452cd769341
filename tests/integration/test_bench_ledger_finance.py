"""The finance benchmark's short variant: the same build and measurements on a small ledger
(``benchmarks/bench_ledger_finance.py``; the 10-million-posting run is on demand)."""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy.engine import make_url

from benchmarks.bench_ledger_finance import POSTINGS_PER_BATCH, run
from tests.conftest import TEST_DATABASE_URL

pytestmark = pytest.mark.integration


def test_the_benchmark_builds_a_clean_ledger_and_measures_it() -> None:
    admin_url = make_url(TEST_DATABASE_URL).render_as_string(hide_password=False)
    results = run(
        8_000,
        admin_url,
        f"bench_ledger_i24_{uuid.uuid4().hex[:8]}",
        keep=False,
        statement_postings=1_000,
    )
    # Every built batch is chained and verifies (run() asserts it); the statement's lines
    # are the account's postings.
    assert results["verify_chain_postings"] == 8_000
    assert results["statement_lines"] == 1_000
    # The build is what settlement writes: it reconciles clean (run() asserts it), and a week
    # of its 60 days holds about a ninth of the postings (batches are spread evenly).
    assert results["postings"] == 8_000
    week = results["export_week_rows"]
    assert abs(week - 8_000 * 7 // 60) <= POSTINGS_PER_BATCH * 2
    for figure in (
        "reconcile_full_s",
        "reconcile_incremental_s",
        "export_cli_csv_s",
        "export_grpc_csv_s",
        "month_summary_s",
        "balances_as_of_s",
        "verify_chain_s",
        "statement_grpc_s",
    ):
        assert results[figure] >= 0
