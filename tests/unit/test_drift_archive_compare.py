"""compare_round: one round's archived phases against the ledger's batches of that round."""

from __future__ import annotations

from archive.store import PhaseRow
from games.ledger import Posting
from workers.drift import LedgerBatch
from workers.drift_archive import compare_round

WIN = Posting("player:ben", "player:ann", 3, "win", "t", 4, "end")
LOAD = Posting("bank", "player:ben", 50, "bank_load", "t", 4, "end")


def archived(batch: str, *postings: Posting) -> PhaseRow:
    return PhaseRow(
        "t",
        4,
        "end",
        1,
        "kishpa",
        batch,
        tuple(
            {"from": p.from_account, "to": p.to_account, "amount": p.amount, "reason": p.reason}
            for p in postings
        ),
    )


def settled(batch_id: int, key: str = "kishpa:t:4:end", *postings: Posting) -> LedgerBatch:
    return LedgerBatch(batch_id, key, postings or (WIN,))


def checks(row: PhaseRow | None, *batches: LedgerBatch) -> list[str]:
    found = compare_round("t", 4, ["end"], [row] if row else [], batches)
    return [d.check for d in found]


def test_the_archived_batch_with_the_same_postings_is_no_difference() -> None:
    # A bank load the wallet added is in the archive (what it applied), not in the table's
    # own postings of the ledger: loads are left out on both sides.
    assert checks(archived("7", WIN, LOAD), settled(7)) == []


def test_a_batch_the_archive_names_but_the_ledger_lacks_is_reported() -> None:
    assert checks(archived("7", WIN), settled(8, "kishpa:t:4:end")) == [
        "phase_settled_twice",
        "settled_without_batch",
    ]
    assert checks(archived("7", WIN)) == ["settled_without_batch"]


def test_the_archived_batch_under_another_key_is_reported() -> None:
    assert checks(archived("7", WIN), settled(7, "by-hand:t:4:end")) == ["settled_batch_mismatch"]


def test_a_batch_for_a_phase_in_which_the_archive_says_nothing_moved() -> None:
    assert checks(archived(""), settled(9)) == ["phase_settled_twice"]
    assert checks(archived("")) == []


def test_an_admin_correction_is_no_second_settlement() -> None:
    assert checks(archived("7", WIN), settled(7), settled(9, "wallet:admin:refund:x")) == []


def test_a_batch_of_a_phase_the_archive_never_held() -> None:
    assert checks(None, settled(9)) == ["batch_without_phase"]
