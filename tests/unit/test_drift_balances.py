"""The drift check's comparison of the balances a table shows (its Redis balances hash) with
the ledger's balances right after the batch that wrote them (pure)."""

from __future__ import annotations

from workers.drift import TableBalances, compare_balances

TABLE = "t-bal"


def test_balances_equal_to_the_ledger_after_their_batch_are_no_difference() -> None:
    shown = TableBalances(batch_id=42, balances={"ann": 97, "bob": 103})
    assert compare_balances(TABLE, shown, {"ann": 97, "bob": 103}) == []


def test_a_doctored_balance_is_reported_naming_table_account_and_both_values() -> None:
    shown = TableBalances(batch_id=42, balances={"ann": 999999, "bob": 103})
    found = compare_balances(TABLE, shown, {"ann": 97, "bob": 103})
    assert [(d.check, d.table_id) for d in found] == [("balance_mismatch", TABLE)]
    assert found[0].detail == (
        "table t-bal account player:ann: Redis balance 999999, ledger balance 97 after batch 42"
    )
    assert found[0].action  # says what to do


def test_a_player_the_batch_did_not_post_to_is_not_compared() -> None:
    # cat's balance came from the wallet at a moment no batch marks: not a ledger fact.
    shown = TableBalances(batch_id=42, balances={"ann": 97, "cat": 5})
    assert compare_balances(TABLE, shown, {"ann": 97}) == []


def test_each_differing_player_is_reported_in_player_order() -> None:
    shown = TableBalances(batch_id=7, balances={"bob": 1, "ann": 2})
    found = compare_balances(TABLE, shown, {"ann": 3, "bob": 4})
    assert [d.detail.split(":")[1].split()[0] for d in found] == ["ann", "bob"]
