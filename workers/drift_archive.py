"""The drift check's incremental half: the round archive against the ledger, new rounds only.

Every settled phase is archived (the settlement worker writes it before marking the phase
settled) with the wallet batch that settled it and the postings that batch applied. This
check compares, for each phase that is new since its last clean run, what the archive says
with what the ledger holds:

- the window: phases *archived*, and ledger postings *made*, in ``[mark, until)``, where
  ``mark`` is the end of the last clean run's window (``archive_drift_marks``, in the archive
  database: the window is a range of the archive's own time, and the workers already hold a
  role on the archive, never on the ledger; a first run reads the day before ``until``) and
  ``until`` is now less :data:`SETTLE_LAG_MS` (a batch committed before it has been archived
  by then, unless settlement is stuck);
- every (table, round) either side names in the window is read whole from both sides: its
  archived phases (an index read) and the ledger's batches of that round (``GetTableLedger``
  with ``rounds``, an index read), so the cost is the rounds played since, never the age of
  the tables;
- each phase the window names is compared: the archive's batch must be in the ledger under
  the phase's key, with the same postings (bank loads aside), and no other batch may post
  the phase (:func:`compare_round`);
- a run that found nothing moves the mark to ``until``; a run that found something leaves it,
  so the next run reads (and reports) the same rounds again until they are put right.

A doctored *old* posting is not new: the ledger's own reconciliation (its hash chain,
:mod:`services.wallet.reconcile`) finds those.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from archive.store import BANK_LOAD, ArchiveStore, PhaseRow
from workers.drift import (
    SETTLEMENT_KEY_PREFIX,
    Difference,
    LedgerBatch,
    Movement,
    PhasePosting,
    postings_difference,
)

MARK = "ledger"
"""The watermark's name in ``archive_drift_marks``."""
SETTLE_LAG_MS = 30_000
"""How far behind now a window ends (``KISHPA_DRIFT_LAG``): a batch older than this has been
archived (a phase is archived within its settlement task, whose budget is seconds)."""
FIRST_WINDOW_MS = 24 * 3600 * 1000
"""A first run (no watermark yet) reads the day before it, not the whole history: older
rounds are the ledger reconciliation's (and were the live check's while they were played)."""
ADMIN_PREFIX = "wallet:admin:"
ADMIN_REASONS = frozenset({"admin_credit", "admin_debit", "admin_refund"})


class LedgerReads(Protocol):
    """The ledger's side, through the wallet's RPCs (:class:`workers.drift.GrpcSources`)."""

    def postings_between(self, since_ms: int, until_ms: int) -> Iterable[PhasePosting]: ...

    def round_batches(self, table_id: str, round_no: int) -> Sequence[LedgerBatch]: ...


@dataclass(slots=True)
class ArchiveCheck:
    """What one incremental run read and found."""

    since_ms: int
    until_ms: int
    rounds: int = 0
    archive_rows: int = 0
    """Archived phase rows read (the window's and the rounds' own)."""
    ledger_rows: int = 0
    """Ledger postings read (the window's and the rounds' batches')."""
    differences: list[Difference] = field(default_factory=list)

    def to_dict(self) -> dict[str, int]:
        return {
            "since_ms": self.since_ms,
            "until_ms": self.until_ms,
            "rounds": self.rounds,
            "archive_rows": self.archive_rows,
            "ledger_rows": self.ledger_rows,
        }


def _movements(postings: Iterable[tuple[str, str, int, str]]) -> list[Movement]:
    return sorted(p for p in postings if p[3] != BANK_LOAD)


def _archived_movements(row: PhaseRow) -> list[Movement]:
    return _movements(
        (str(p["from"]), str(p["to"]), int(p["amount"]), str(p["reason"])) for p in row.postings
    )


def _is_admin(batch: LedgerBatch) -> bool:
    return batch.request_id.startswith(ADMIN_PREFIX) or any(
        p.reason in ADMIN_REASONS for p in batch.postings
    )


def compare_round(
    table_id: str,
    round_no: int,
    phases: Iterable[str],
    archived: Sequence[PhaseRow],
    batches: Sequence[LedgerBatch],
) -> list[Difference]:
    """Each difference, for the named ``phases`` of one round, between the archive's rows of
    the round and the ledger's batches of it (pure)."""
    found: list[Difference] = []
    by_phase = {row.phase: row for row in archived}
    for phase in sorted(set(phases)):
        name = f"{round_no}:{phase}"
        posting = [
            b
            for b in batches
            if not _is_admin(b)
            and any(
                p.table_id == table_id and p.round == round_no and p.phase == phase
                for p in b.postings
            )
        ]
        row = by_phase.get(phase)
        if row is None:
            found += [
                Difference(
                    "batch_without_phase",
                    table_id,
                    f"batch {b.batch_id} ({b.request_id}) posts phase {name!r}, which the "
                    "round archive does not hold",
                )
                for b in posting
            ]
            continue
        named = next((b for b in batches if str(b.batch_id) == row.batch_id), None)
        others = [b for b in posting if b is not named]
        if others:
            ids = ", ".join(f"{b.batch_id} ({b.request_id})" for b in others)
            said = f"batch {row.batch_id}" if row.batch_id else "no batch (nothing moved)"
            found.append(
                Difference(
                    "phase_settled_twice",
                    table_id,
                    f"phase {name}: the archive says {said}; the ledger also holds {ids}",
                )
            )
        if not row.batch_id:
            continue
        if named is None:
            found.append(
                Difference(
                    "settled_without_batch",
                    table_id,
                    f"phase {name} archived as settled by batch {row.batch_id}, which the "
                    "ledger does not hold",
                )
            )
            continue
        key = f"{SETTLEMENT_KEY_PREFIX}{table_id}:{name}"
        if named.request_id != key:
            found.append(
                Difference(
                    "settled_batch_mismatch",
                    table_id,
                    f"phase {name}: the archive names batch {named.batch_id}, which the "
                    f"ledger holds under {named.request_id!r}, not {key!r}",
                )
            )
        want = _archived_movements(row)
        have = _movements(
            (p.from_account, p.to_account, p.amount, p.reason) for p in named.postings
        )
        if want != have:
            found.append(
                Difference(
                    "postings_differ",
                    table_id,
                    f"phase {name} batch {named.batch_id}, the archive's against the ledger's: "
                    + _said_of_the_archive(postings_difference(want, have)),
                )
            )
    return found


def _said_of_the_archive(text: str) -> str:
    """:func:`postings_difference` names the rules as the side wanted; here it is the archive."""
    for rules, archive in (
        ("the rules give,", "the archive gives,"),
        ("the rules do not give", "the archive does not give"),
        ("by the rules", "by the archive"),
        ("the rules give no posting", "the archive holds no posting"),
    ):
        text = text.replace(rules, archive)
    return text


def check_new_rounds(
    store: ArchiveStore, ledger: LedgerReads, *, now_ms: int, lag_ms: int = SETTLE_LAG_MS
) -> ArchiveCheck:
    """Compare every phase archived or posted since the last clean run (read-only)."""
    mark = store.drift_mark(MARK)
    until = now_ms - lag_ms
    since = max(1, until - FIRST_WINDOW_MS) if mark is None else mark
    until = max(since, until)
    check = ArchiveCheck(since, until)
    if until <= since:
        return check
    named: dict[tuple[str, int], set[str]] = defaultdict(set)
    window = store.phases_archived(since, until)
    check.archive_rows += len(window)
    for row in window:
        named[(row.table_id, row.round_no)].add(row.phase)
    for posting in ledger.postings_between(since, until):
        check.ledger_rows += 1
        if posting.table_id and posting.phase and posting.reason not in ADMIN_REASONS:
            named[(posting.table_id, posting.round_no)].add(posting.phase)
    for (table_id, round_no), phases in sorted(named.items()):
        archived = store.round_phases(table_id, round_no)
        batches = ledger.round_batches(table_id, round_no)
        check.rounds += 1
        check.archive_rows += len(archived)
        check.ledger_rows += sum(len(b.postings) for b in batches)
        check.differences += compare_round(table_id, round_no, phases, archived, batches)
    return check


def advance(store: ArchiveStore, check: ArchiveCheck, *, now_ms: int) -> bool:
    """Move the watermark to the end of a clean run's window; True when it moved."""
    if check.differences or check.until_ms <= check.since_ms:
        return False
    store.set_drift_mark(MARK, check.until_ms, now_ms=now_ms)
    return True
