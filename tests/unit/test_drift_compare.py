"""The drift check's comparison of one table with the ledger (pure): a phase in which nothing
moves is settled without a batch, and that is no difference; a phase that moves tokens and
was marked settled without one is."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import cast

from games.ledger import Posting
from kishpa.table.v1 import table_pb2
from shared.phase_record import PhaseRecord
from workers.drift import LedgerBatch, LedgerFacts, RedisFacts, TableFacts, compare, round_pot

TABLE = "t-drift"
# Records are only handed to ``expected`` here: stand-ins named after what the rules give.
QUIET = cast(PhaseRecord, "a round's end with no winner and no bonus")
PAYING = cast(PhaseRecord, "a round's end whose winner is paid 3 by each loser")
PAID = (Posting(f"player:{TABLE}:b", f"player:{TABLE}:a", 3, "win", TABLE, 1, "end"),)


def expected(record: PhaseRecord) -> Sequence[Posting]:
    return PAID if record == PAYING else ()


def facts(record: PhaseRecord, settled_batch: str) -> RedisFacts:
    return RedisFacts(records={"1:end": record}, settled={"1:end": settled_batch})


OPEN = TableFacts(closed=False, bowl=0, pot=0)
EMPTY_LEDGER = LedgerFacts(bowl=0, pot=0, batches=())


def test_a_phase_in_which_nothing_moves_is_settled_without_a_batch_rightly() -> None:
    found = compare(TABLE, facts(QUIET, ""), OPEN, EMPTY_LEDGER, expected, settled_still=True)
    assert found == []


def test_a_paying_phase_marked_settled_without_a_batch_is_reported() -> None:
    found = compare(TABLE, facts(PAYING, ""), OPEN, EMPTY_LEDGER, expected, settled_still=True)
    assert [d.check for d in found] == ["settled_without_batch"]


def test_a_quiet_phase_whose_settled_mark_names_a_missing_batch_is_reported() -> None:
    found = compare(TABLE, facts(QUIET, "41"), OPEN, EMPTY_LEDGER, expected, settled_still=True)
    assert [d.check for d in found] == ["settled_without_batch"]


def test_a_paying_phase_settled_by_its_batch_is_no_difference() -> None:
    ledger = LedgerFacts(bowl=0, pot=0, batches=(LedgerBatch(41, f"kishpa:{TABLE}:1:end", PAID),))
    found = compare(TABLE, facts(PAYING, "41"), OPEN, ledger, expected, settled_still=True)
    assert found == []


def _differ(paid: tuple[Posting, ...]) -> str:
    ledger = LedgerFacts(bowl=0, pot=0, batches=(LedgerBatch(41, f"kishpa:{TABLE}:1:end", paid),))
    found = compare(TABLE, facts(PAYING, "41"), OPEN, ledger, expected, settled_still=True)
    assert [d.check for d in found] == ["postings_differ"]
    return found[0].detail


def test_a_posting_of_another_amount_is_named_with_the_field_that_differs() -> None:
    detail = _differ(
        (Posting(f"player:{TABLE}:b", f"player:{TABLE}:a", 5, "win", TABLE, 1, "end"),)
    )
    assert detail == (
        f"phase 1:end batch 41: player:{TABLE}:b->player:{TABLE}:a win: amount 3 by the rules, "
        "5 in the ledger"
    )


def test_an_empty_side_is_said_in_words() -> None:
    detail = _differ(())
    assert f"the rules give, the ledger lacks: player:{TABLE}:b->player:{TABLE}:a 3 win" in detail
    assert "the ledger's batch holds no posting of this phase" in detail
    assert ", the ledger holds ," not in detail
    extra = Posting(f"player:{TABLE}:a", f"player:{TABLE}:c", 2, "bonus_one", TABLE, 1, "end")
    detail = _differ((*PAID, extra))
    assert detail == (
        f"phase 1:end batch 41: the ledger holds, the rules do not give: "
        f"player:{TABLE}:a->player:{TABLE}:c 2 bonus_one"
    )


def test_a_batch_of_a_round_trimmed_from_redis_is_no_difference_a_later_one_is() -> None:
    """Round 1 settled and left Redis (settle.lua trims it once round 2's end is settled:
    ``trimmed_round`` 1): its batch names a phase Redis no longer holds, rightly. A batch of a
    round Redis should still hold but does not is still reported."""
    trimmed = RedisFacts(records={"2:end": QUIET}, settled={"2:end": ""}, trimmed_round=1)
    ledger = LedgerFacts(
        bowl=0,
        pot=0,
        batches=(
            LedgerBatch(41, f"kishpa:{TABLE}:1:end", PAID),
            LedgerBatch(42, f"kishpa:{TABLE}:3:end", (replace(PAID[0], round=3),)),
        ),
    )
    found = compare(TABLE, trimmed, OPEN, ledger, expected, settled_still=True)
    assert [(d.check, "3:end" in d.detail) for d in found] == [("batch_without_phase", True)]


def test_a_tables_pot_is_read_from_whichever_game_round_it_shows() -> None:
    assert round_pot(table_pb2.Round(hand=table_pb2.HandRound(pot=7))) == 7
    assert round_pot(table_pb2.Round(kishpa=table_pb2.KishpaRound(joker_face="R5"))) == 0
    assert round_pot(table_pb2.Round()) == 0
