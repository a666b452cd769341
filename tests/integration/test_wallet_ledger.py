"""The ledger store on real databases: a property test, reconciliation catching tampering,
migrations and the operator commands."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import grpc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import inspect, text

from devkit.postgres import temporary_postgres_database
from services.common.errors import failure_of
from services.wallet.accounts import BANK, AccountKind, account_kind
from services.wallet.batch import Posting
from services.wallet.database import create_wallet_engine
from services.wallet.errors import InsufficientFunds, WalletError
from services.wallet.ledger import Ledger
from services.wallet.migrate import current_revision, downgrade, head_revision, upgrade
from services.wallet.reconcile import reconcile
from tests.conftest import TEST_DATABASE_URL

pytestmark = pytest.mark.integration

KISHPA = str(Path(sys.executable).parent / "kishpa")


SLOTS = ["player:0", "player:1", "player:2", "bowl:0", "pot:0", BANK]


@st.composite
def batch(draw: st.DrawFn) -> list[tuple[str, str, int]]:
    out = []
    for _ in range(draw(st.integers(1, 5))):
        src, dst = draw(st.lists(st.sampled_from(SLOTS), min_size=2, max_size=2, unique=True))
        out.append((src, dst, draw(st.integers(1, 2500))))
    return out


@settings(max_examples=40)
@given(
    batches=st.lists(batch(), min_size=1, max_size=6),
    replay=st.lists(st.integers(0, 5), max_size=4),
)
def test_random_batches_keep_the_ledger_balanced_and_replays_idempotent(
    ledger: Ledger, batches: list[list[tuple[str, str, int]]], replay: list[int]
) -> None:
    run = uuid.uuid4().hex[:10]

    def real(slot: str) -> str:
        return slot if slot == BANK else slot.replace(":", f":{run}")

    for i in range(3):
        ledger.open_wallet(f"{run}{i}")
    sent: list[tuple[str, list[Posting]]] = []
    for n, rows in enumerate(batches):
        postings = [
            Posting(
                real(s),
                real(d),
                a,
                "bowl_win" if account_kind(s) is not AccountKind.PLAYER else "win",
            )
            for s, d, a in rows
        ]
        key = f"{run}-{n}"
        try:
            ledger.apply_batch(key, postings)
        except InsufficientFunds:
            assert any(
                account_kind(p.from_account) in (AccountKind.BOWL, AccountKind.POT)
                for p in postings
            )
            continue
        sent.append((key, postings))
    before = {real(s): ledger.balance(real(s)) for s in SLOTS if s != BANK}
    for i in replay:
        if i < len(sent):
            assert ledger.apply_batch(*sent[i]).replayed
    assert {real(s): ledger.balance(real(s)) for s in SLOTS if s != BANK} == before
    assert all(v >= 0 for v in before.values())
    report = reconcile(ledger.engine)
    assert report.ok, report.discrepancies


def test_reconcile_reports_every_kind_of_tampering(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'w.sqlite3'}"
    upgrade(url)
    engine = create_wallet_engine(url)
    try:
        ledger = Ledger(engine)
        ledger.open_wallet("a")
        ledger.open_wallet("b")
        ledger.apply_batch(
            "k1",
            [
                Posting("player:a", "bowl:t", 5, "bowl_contribution"),
                Posting("player:b", "player:a", 9, "win"),
            ],
        )
        assert reconcile(engine).ok
        with engine.begin() as conn:
            conn.execute(text("UPDATE accounts SET balance = balance + 7 WHERE id = 'player:a'"))
            # A posting dropped from a batch: the batch no longer matches its own result.
            conn.execute(
                text(
                    "DELETE FROM postings WHERE seq = 1 AND batch_id = "
                    "(SELECT id FROM batches WHERE idempotency_key = 'k1')"
                )
            )
            conn.execute(text("PRAGMA ignore_check_constraints = ON"))
            conn.execute(text("UPDATE accounts SET balance = -3 WHERE id = 'bowl:t'"))
        report = reconcile(engine)
    finally:
        engine.dispose()
    checks = {d.check for d in report.discrepancies}
    assert checks == {"sum_zero", "postings_match", "batch_balanced", "not_negative"}
    assert not report.ok
    cli = subprocess.run(
        [KISHPA, "wallet", "--database-url", url, "reconcile", "--json"],
        capture_output=True,
        text=True,
    )
    assert cli.returncode == 1
    assert json.loads(cli.stdout)["ok"] is False


def test_cli_migrate_reconcile_balance_history_on_a_fresh_sqlite_file(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'deep' / 'dir' / 'w.sqlite3'}"
    env_cmd = [KISHPA]
    unmigrated = subprocess.run(
        [*env_cmd, "wallet", "--database-url", url, "reconcile"], capture_output=True, text=True
    )
    assert unmigrated.returncode == 2
    assert "kishpa migrate" in unmigrated.stderr
    migrated = subprocess.run(
        [*env_cmd, "migrate", "--database-url", url], capture_output=True, text=True
    )
    assert migrated.returncode == 0, migrated.stderr
    engine = create_wallet_engine(url)
    try:
        Ledger(engine).open_wallet("op")
    finally:
        engine.dispose()
    ok = subprocess.run(
        [*env_cmd, "wallet", "--database-url", url, "reconcile"], capture_output=True, text=True
    )
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "OK" in ok.stdout
    # The first run had no clean run before it: it checked every batch (the report says so);
    # --full forces that whatever the runs before.
    assert "all 1 batches checked against their results (full)" in ok.stdout
    forced = subprocess.run(
        [*env_cmd, "wallet", "--database-url", url, "reconcile", "--json", "--full"],
        capture_output=True,
        text=True,
    )
    assert forced.returncode == 0, forced.stdout + forced.stderr
    report = json.loads(forced.stdout)
    assert (report["mode"], report["batches_checked"], report["ok"]) == ("full", 1, True)
    bal = subprocess.run(
        [*env_cmd, "wallet", "--database-url", url, "balance", "player:op", "bank"],
        capture_output=True,
        text=True,
    )
    assert "player:op\t2000 tokens\t4000 ILS" in bal.stdout
    assert "bank\t-2000 tokens" in bal.stdout
    his = subprocess.run(
        [*env_cmd, "wallet", "--database-url", url, "history", "--account", "player:op"],
        capture_output=True,
        text=True,
    )
    assert "bank -> player:op 2000 opening_grant" in his.stdout


def test_migrations_go_down_and_up_on_postgres() -> None:
    with temporary_postgres_database(TEST_DATABASE_URL) as url:
        upgrade(url)
        assert current_revision(url) == head_revision()
        downgrade(url, "base")
        engine = create_wallet_engine(url, pool_size=1)
        try:
            assert "accounts" not in inspect(engine).get_table_names()
        finally:
            engine.dispose()
        upgrade(url)
        engine = create_wallet_engine(url, pool_size=1)
        try:
            assert {"accounts", "batches", "postings"} <= set(inspect(engine).get_table_names())
            # The database itself refuses a negative player balance, whatever the code does.
            with pytest.raises(Exception, match="ck_accounts_not_negative"), engine.begin() as conn:
                conn.execute(
                    text(
                        "INSERT INTO accounts (id, kind, balance, created_ms) "
                        "VALUES ('player:x', 'player', -1, 0)"
                    )
                )
        finally:
            engine.dispose()


def test_unopened_player_and_wallet_errors_carry_reasons(ledger: Ledger) -> None:
    with pytest.raises(WalletError) as info:
        ledger.balance(f"player:{uuid.uuid4().hex}")
    failure = failure_of(info.value)
    assert failure is not None
    assert failure.code is grpc.StatusCode.NOT_FOUND
    assert ledger.balance(f"bowl:{uuid.uuid4().hex}") == 0


def _account_exists(ledger: Ledger, account: str) -> bool:
    with ledger.engine.connect() as conn:
        found = conn.execute(
            text("SELECT count(*) FROM accounts WHERE id = :id"), {"id": account}
        ).scalar_one()
    return bool(found)


def test_refused_batch_from_a_never_used_bowl_creates_no_account(ledger: Ledger) -> None:
    """Issue 11: the bowl was ensured in its own transaction before the batch was checked."""
    run = uuid.uuid4().hex[:10]
    ledger.open_wallet(f"{run}a")
    bowl = f"bowl:{run}"
    with pytest.raises(InsufficientFunds):
        ledger.apply_batch(
            f"k:{run}", [Posting(bowl, f"player:{run}a", 5, "bowl_win", run, 1, "end")]
        )
    assert not _account_exists(ledger, bowl)
    # The same bowl, used the right way round, is created by its batch.
    ledger.apply_batch(
        f"k2:{run}", [Posting(f"player:{run}a", bowl, 1, "bowl_contribution", run, 1, "start")]
    )
    assert _account_exists(ledger, bowl)
    assert ledger.balance(bowl) == 1


def test_a_wallet_row_and_its_grant_are_one_transaction(ledger: Ledger) -> None:
    run = uuid.uuid4().hex[:10]
    tokens, created = ledger.open_wallet(run)
    assert (tokens, created) == (2000, True)
    assert ledger.open_wallet(run) == (2000, False)
    assert _account_exists(ledger, f"player:{run}")


def test_concurrent_first_uses_of_bowls_neither_deadlock_nor_lose_updates(ledger: Ledger) -> None:
    """Two batches create the same new bowls in one sorted order while a third locks them."""
    from concurrent.futures import ThreadPoolExecutor

    run = uuid.uuid4().hex[:10]
    players = [f"{run}{i}" for i in range(4)]
    for p in players:
        ledger.open_wallet(p)
    bowls = [f"bowl:{run}{b}" for b in range(3)]

    def pay(i: int) -> None:
        postings = [
            Posting(f"player:{players[i % 4]}", bowl, 1, "bowl_contribution", run, i, "start")
            for bowl in (bowls if i % 2 else list(reversed(bowls)))
        ]
        ledger.apply_batch(f"c:{run}:{i}", postings)

    with ThreadPoolExecutor(6) as pool:
        list(pool.map(pay, range(24)))
    assert [ledger.balance(b) for b in bowls] == [24, 24, 24]


def test_forged_page_token_with_a_huge_number_is_invalid(ledger: Ledger) -> None:
    import base64

    from services.wallet.errors import InvalidRequest
    from services.wallet.ledger import TransferFilter

    for number in ("9" * 30, str(2**63), "0", "-5", "1e9"):
        token = base64.urlsafe_b64encode(f"t1:{number}".encode()).decode()
        with pytest.raises(InvalidRequest) as info:
            ledger.list_transfers(TransferFilter("", "", 0, ""), 10, token)
        assert info.value.reason == "INVALID_PAGE_TOKEN"
