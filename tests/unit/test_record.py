"""``settle_record``: every row of the bonus and bowl tables of docs/rules/kishpa.md,
and every rejection.

Records are built from a neutral pool of tiles (no joker, no 1 of the kishpa's colour, no
kishpa twin, no doll) so each test names only the tiles that matter to it.
"""

from __future__ import annotations

from typing import Any

import pytest

from games.kishpa.errors import InvalidRecordError
from games.kishpa.ledger import Posting, net_movements
from games.kishpa.record import end_postings, parse_record, settle_record, start_postings
from tests.support.kishpa_records import PLAYERS, WIN_HAND, build_hands, record, rows, tiles

pytestmark = pytest.mark.unit


"""A plain winning hand (a run of 5 and three groups of 3) for kishpa R5 (joker R6)."""


def from_all(
    receiver: str, amount: int, players: list[str] = PLAYERS
) -> list[tuple[str, str, int]]:
    return [(p, receiver, amount) for p in players if p != receiver]


# --- start of round -------------------------------------------------------------------


def test_bowl_contribution_is_one_each() -> None:
    out = settle_record(record(end={}))
    assert rows(out["start"], "bowl_contribution") == [(p, "bowl", 1) for p in PLAYERS]


def test_bowl_contribution_is_two_when_the_kishpa_is_a_1() -> None:
    out = settle_record(record(kishpa="B1", start={"p1": ["B2"]}, end={}))
    assert rows(out["start"], "bowl_contribution") == [(p, "bowl", 2) for p in PLAYERS]


@pytest.mark.parametrize("doll", ["DR", "DK"])
def test_a_doll_holder_receives_one_from_every_other_player(doll: str) -> None:
    out = settle_record(record(start={"p1": ["R6"], "p3": [doll]}, end={}))
    assert rows(out["start"], "bonus_doll") == from_all("p3", 1)


def test_both_dolls_pay_separately_in_order_red_then_black() -> None:
    out = settle_record(record(start={"p1": ["R6"], "p2": ["DK"], "p4": ["DR"]}, end={}))
    assert rows(out["start"], "bonus_doll") == from_all("p4", 1) + from_all("p2", 1)


def test_jokers_pay_per_joker_held_at_the_start() -> None:
    out = settle_record(record(start={"p2": ["R6", "R6"]}, end={}))
    assert rows(out["start"], "bonus_joker") == from_all("p2", 2)


def test_a_doll_is_never_a_joker_or_a_1() -> None:
    # Kishpa R5 -> joker R6; a doll plays as R6 but pays only as a doll.
    out = settle_record(record(start={"p1": ["R6"], "p2": ["DR"]}, end={}))
    assert rows(out["start"], "bonus_joker") == from_all("p1", 1)
    assert rows(out["start"], "bonus_one") == []


def test_ones_of_the_kishpas_colour_pay_per_tile() -> None:
    out = settle_record(record(start={"p1": ["R6"], "p3": ["R1", "R1"]}, end={}))
    assert rows(out["start"], "bonus_one") == from_all("p3", 2)


def test_when_the_kishpa_is_a_1_its_twin_is_both_kishpa_and_a_1_paying_2() -> None:
    # Kishpa K1 -> joker K2; the second K1 is the kishpa and a 1 of the kishpa's colour.
    rec = record(kishpa="K1", start={"p1": ["K2"], "p2": ["K1"]}, end={}, end_reveal="p2")
    rec["end_hands"] = build_hands({"p2": ["K1"]}, dict.fromkeys(PLAYERS, 14), {"K1", "K2"}, ["K1"])
    out = settle_record(rec)
    assert rows(out["start"], "bonus_one") == from_all("p2", 2)
    assert rows(out["end"], "bonus_kishpa") == from_all("p2", 1)
    # Paid for 1s at the start, so nothing for the same 1 at the end.
    assert rows(out["end"], "bonus_one") == []


def test_kishpa_13_makes_the_joker_a_1_paid_as_joker_and_as_a_1() -> None:
    out = settle_record(record(kishpa="K13", start={"p3": ["K1"]}, end={}))
    assert rows(out["start"], "bonus_joker") == from_all("p3", 1)
    assert rows(out["start"], "bonus_one") == from_all("p3", 1)


# --- the no-joker replacement ------------------------------------------------------------


def test_replacement_start_reveal_pays_for_the_first_kishpa_and_dolls_pay_nothing() -> None:
    # Nobody holds R6 (joker of R5); p3 holds the twin R5 and reveals; B9 is turned -> joker B10.
    rec = record(
        replacement="B9",
        start={"p3": ["R5"], "p2": ["DR", "B10"], "p4": ["B1"]},
        end={},
        start_reveal="p3",
    )
    out = settle_record(rec)
    assert rows(out["start"], "bonus_doll") == []
    assert rows(out["start"], "bonus_kishpa") == from_all("p3", 1)
    assert rows(out["start"], "bonus_joker") == from_all("p2", 1)
    assert rows(out["start"], "bonus_one") == from_all("p4", 1)
    assert rows(out["start"], "bowl_contribution") == [(p, "bowl", 1) for p in PLAYERS]


def test_after_a_replacement_to_a_1_the_bowl_takes_2() -> None:
    out = settle_record(record(replacement="Y1", end={}))
    assert rows(out["start"], "bowl_contribution") == [(p, "bowl", 2) for p in PLAYERS]


def test_the_start_revealer_is_paid_no_further_kishpa_bonus() -> None:
    rec = record(replacement="B9", start={"p3": ["R5"]}, end={"p4": ["B9"]}, start_reveal="p3")
    rec["end_reveal"] = "p4"
    with pytest.raises(InvalidRecordError, match="once per round"):
        settle_record(rec)
    del rec["end_reveal"]
    assert rows(settle_record(rec)["end"], "bonus_kishpa") == []


# --- end of round ----------------------------------------------------------------------


def test_end_jokers_and_ones_pay_only_players_not_paid_at_the_start() -> None:
    # p1 held a joker at the start: nothing for jokers at the end however many he holds.
    # p3 held none: paid for the two he holds at the end. Same for the 1s (R1).
    rec = record(
        start={"p1": ["R6"], "p2": ["R1"]},
        end={"p1": ["R6"], "p3": ["R6"], "p2": ["R1"], "p4": ["R1"]},
    )
    out = settle_record(rec)
    assert rows(out["end"], "bonus_joker") == from_all("p3", 1)
    assert rows(out["end"], "bonus_one") == from_all("p4", 1)


def test_a_joker_changing_hands_pays_the_new_holder_at_the_end() -> None:
    rec = record(start={"p2": ["R6"]}, end={"p3": ["R6"]})
    out = settle_record(rec)
    assert rows(out["start"], "bonus_joker") == from_all("p2", 1)
    assert rows(out["end"], "bonus_joker") == from_all("p3", 1)


def test_end_reveal_pays_once() -> None:
    out = settle_record(record(end={"p4": ["R5"]}, end_reveal="p4"))
    assert rows(out["end"], "bonus_kishpa") == from_all("p4", 1)


# --- winning ---------------------------------------------------------------------------


def test_plain_win_pays_2_from_every_loser() -> None:
    out = settle_record(record(end={"p2": WIN_HAND}, winner="p2", final_discard="Y3"))
    assert rows(out["end"], "win") == from_all("p2", 2)


def test_winners_jokers_and_kishpa_go_through_the_win_table_not_end_bonuses() -> None:
    # R6 is the joker (standing for R4); R5 is the kishpa; the last discard is the other R6.
    hand = tiles("B1 B2 B3 B4 B5 Y7 Y8 Y9 K7 K8 K9 R3 R6 R5")
    out = settle_record(record(end={"p2": hand}, winner="p2", final_discard="R6"))
    # 2 + 1 joker in hand + 1 kishpa in hand + 2 joker discarded last = 6
    assert rows(out["end"], "win") == from_all("p2", 6)
    assert rows(out["end"], "bonus_joker") == []
    assert rows(out["end"], "bonus_kishpa") == []


def test_winners_ones_are_paid_as_end_bonuses() -> None:
    hand = tiles("R1 R2 R3 R4 Y10 Y11 Y12 Y7 Y8 Y9 K7 K8 K9 Y13")
    out = settle_record(record(end={"p2": hand}, winner="p2", final_discard="B3"))
    assert rows(out["end"], "bonus_one") == from_all("p2", 1)


def test_a_winner_whose_hand_does_not_win_is_rejected() -> None:
    hand = [*WIN_HAND[:-1], "Y3"]
    with pytest.raises(InvalidRecordError, match="winning hand"):
        settle_record(record(end={"p2": hand}, winner="p2", final_discard="Y4"))


def test_the_win_is_checked_against_the_final_joker() -> None:
    # After replacement B9 the joker is B10, wild in the set B10 Y12 K12.
    hand = tiles("B1 B2 B3 B4 B5 Y7 Y8 Y9 K7 K8 K9 B10 Y12 K12")
    rec = record(replacement="B6", end={"p2": hand}, winner="p2", final_discard="R3")
    # Kishpa B6 -> joker B7: B10 is not wild, so no win.
    with pytest.raises(InvalidRecordError, match="winning hand"):
        settle_record(rec)
    rec = record(replacement="B9", end={"p2": hand}, winner="p2", final_discard="R3")
    assert rec["end_hands"]["p2"] == hand
    assert rows(settle_record(rec)["end"], "win") == from_all("p2", 3)


# --- the bowl --------------------------------------------------------------------------


def test_two_wins_in_a_row_take_the_bowl_with_this_rounds_contributions() -> None:
    rec = record(
        end={"p2": WIN_HAND}, winner="p2", final_discard="Y3", bowl=12, previous_winner="p2"
    )
    assert rows(settle_record(rec)["end"], "bowl_win") == [("bowl", "p2", 16)]


def test_a_different_winner_does_not_take_the_bowl() -> None:
    rec = record(
        end={"p2": WIN_HAND}, winner="p2", final_discard="Y3", bowl=12, previous_winner="p3"
    )
    out = settle_record(rec)["end"]
    assert rows(out, "bowl_win") == []
    assert rows(out, "bowl_split") == []


def test_last_round_split_with_remainder_starting_with_the_winner() -> None:
    # bowl 10 + 4 = 14 -> 3 each, 2 left: one each to p3 (winner) and p4.
    rec = record(end={"p3": WIN_HAND}, winner="p3", final_discard="Y3", bowl=10, last_round=True)
    split = rows(settle_record(rec)["end"], "bowl_split")
    assert split == [("bowl", "p3", 4), ("bowl", "p4", 4), ("bowl", "p1", 3), ("bowl", "p2", 3)]


def test_last_round_with_no_winner_splits_starting_with_the_starter() -> None:
    rec = record(end={}, bowl=1, last_round=True)  # 1 + 4 = 5 -> p1 gets the extra token
    split = rows(settle_record(rec)["end"], "bowl_split")
    assert split == [("bowl", "p1", 2), ("bowl", "p2", 1), ("bowl", "p3", 1), ("bowl", "p4", 1)]


def test_last_round_taken_by_two_in_a_row() -> None:
    rec = record(
        end={"p2": WIN_HAND},
        winner="p2",
        final_discard="Y3",
        bowl=20,
        previous_winner="p2",
        last_round=True,
    )
    out = settle_record(rec)["end"]
    assert rows(out, "bowl_win") == [("bowl", "p2", 24)]
    assert rows(out, "bowl_split") == []


def test_pile_exhausted_no_win_no_bowl_but_end_bonuses() -> None:
    rec = record(end={"p3": ["R6"], "p2": ["R5"]}, bowl=8, previous_winner="p2", end_reveal="p2")
    out = settle_record(rec)["end"]
    assert rows(out, "win") == []
    assert rows(out, "bowl_win") == []
    assert rows(out, "bonus_joker") == from_all("p3", 1)
    assert rows(out, "bonus_kishpa") == from_all("p2", 1)


def test_two_players_table() -> None:
    players = ["a", "b"]
    rec = record(players=players, end={"b": WIN_HAND}, winner="b", final_discard="Y3")
    out = settle_record(rec)
    assert rows(out["end"], "win") == [("a", "b", 2)]
    assert rows(out["start"], "bonus_joker") == [("b", "a", 1)]


# --- phases and the outbox contract ------------------------------------------------------


def test_start_postings_accept_a_start_phase_record_and_agree_with_settle() -> None:
    rec = record(end={"p2": WIN_HAND}, winner="p2", final_discard="Y3")
    start_only = {k: v for k, v in rec.items() if k not in {"end_hands", "winner", "final_discard"}}
    assert [p.to_dict() for p in start_postings(start_only)] == settle_record(rec)["start"]
    assert [p.to_dict() for p in end_postings(rec)] == settle_record(rec)["end"]
    with pytest.raises(InvalidRecordError, match="end_hands"):
        end_postings(start_only)


def test_every_phase_nets_to_zero() -> None:
    rec = record(
        start={"p1": ["R6", "DR"], "p3": ["R1"]},
        end={"p2": WIN_HAND, "p4": ["R5"]},
        winner="p2",
        final_discard="Y3",
        bowl=7,
        last_round=True,
        end_reveal="p4",
    )
    parsed = parse_record(rec)
    for phase in (start_postings(parsed), end_postings(parsed)):
        assert sum(net_movements(phase).values()) == 0
        assert all(isinstance(p, Posting) and p.amount > 0 for p in phase)


# --- rejections --------------------------------------------------------------------------


def _mutations() -> list[tuple[str, dict[str, Any], str]]:
    base = record(end={"p2": WIN_HAND}, winner="p2", final_discard="Y3")
    cases: list[tuple[str, dict[str, Any], str]] = []

    def case(name: str, match: str, **changes: Any) -> None:
        obj = {**base, **changes}
        cases.append((name, {k: v for k, v in obj.items() if v is not ...}, match))

    case("unknown field", "unknown field", colour="red")
    case("unknown winner", "unknown player", winner="p9")
    case("negative bowl", "bowl", bowl=-1)
    case("bool bowl", "bowl", bowl=True)
    case("one player", "seats 2 to 4", players=["p1"])
    case("duplicate players", "twice", players=["p1", "p1", "p3", "p4"])
    case("doll kishpa", "doll", kishpa="DR")
    case("bad tile", "unknown tile", kishpa="Z5")
    case("missing end hand", "missing the tiles", end_hands={"p1": WIN_HAND})
    case("winner without discard", "without the final_discard", final_discard=...)
    case("discard without winner", "without a winner", winner=...)
    case("start reveal with jokers out", "nobody holds a joker", start_reveal="p1")
    case("replacement with jokers out", "nobody holds a joker", replacement="B9")
    case("end reveal without kishpa", "does not hold the kishpa", end_reveal="p3")
    case("end reveal by the winner", "win table", end_reveal="p2")
    sizes = dict(base["start_hands"])
    sizes["p2"] = sizes["p2"][:-1]
    case("wrong start size", "starter holds 15", start_hands=sizes)
    ends = dict(base["end_hands"])
    ends["p3"] = [*ends["p3"], "Y2"]
    case("wrong end size", "ends with 14", end_hands=ends)
    starts = dict(base["start_hands"])
    starts["p3"] = ["R5", "R5", *starts["p3"][2:]]
    case("three R5 with the kishpa", "appears 3 times", start_hands=starts)
    return cases


@pytest.mark.parametrize(
    ("name", "obj", "match"), _mutations(), ids=lambda v: v if isinstance(v, str) else ""
)
def test_impossible_records_are_rejected(name: str, obj: dict[str, Any], match: str) -> None:
    with pytest.raises(InvalidRecordError, match=match):
        settle_record(obj)


def test_missing_replacement_when_nobody_held_a_joker() -> None:
    rec = record(replacement="B9", end={})
    del rec["replacement"]
    with pytest.raises(InvalidRecordError, match="replacement missing"):
        settle_record(rec)


def test_start_reveal_by_a_player_without_the_kishpa() -> None:
    rec = record(replacement="B9", start={"p3": ["R5"]}, end={}, start_reveal="p2")
    with pytest.raises(InvalidRecordError, match="does not hold the kishpa R5"):
        settle_record(rec)


def test_the_bowl_is_not_a_player_id() -> None:
    rec = record(players=["bowl", "p2"], end={})
    with pytest.raises(InvalidRecordError, match="bowl"):
        settle_record(rec)


# Section 8, every row: (changes to the plain winning hand, final discard, payout per loser).
_R6_FOR_B12 = {"B12": "R6"}
_TWO_R6 = {"B12": "R6", "K9": "R6"}
_KISHPA = {"Y7": "R3", "Y8": "R4", "Y9": "R5"}
WIN_TABLE = [
    ("plain win", {}, "Y3", 2),
    ("with a joker in hand", _R6_FOR_B12, "Y3", 3),
    ("with 2 jokers in hand", _TWO_R6, "Y3", 4),
    ("discarding a joker as the last tile", {}, "R6", 4),
    ("2 jokers, one of them discarded last", _R6_FOR_B12, "R6", 5),
    ("with the kishpa in hand", _KISHPA, "Y3", 3),
    ("kishpa + a joker", {**_KISHPA, **_R6_FOR_B12}, "Y3", 4),
    ("kishpa + 2 jokers", {**_KISHPA, **_TWO_R6}, "Y3", 5),
    ("kishpa + discarding a joker", _KISHPA, "R6", 5),
    ("kishpa + 2 jokers, one discarded last", {**_KISHPA, **_R6_FOR_B12}, "R6", 6),
]


@pytest.mark.parametrize(
    ("changes", "discard", "per_loser"),
    [row[1:] for row in WIN_TABLE],
    ids=[row[0] for row in WIN_TABLE],
)
def test_every_row_of_the_win_table(changes: dict[str, str], discard: str, per_loser: int) -> None:
    hand = [changes.get(t, t) for t in WIN_HAND]
    rec = record(end={"p2": hand}, winner="p2", final_discard=discard)
    out = settle_record(rec)
    assert rows(out["end"], "win") == from_all("p2", per_loser)
    assert rows(out["end"], "bonus_joker") == []  # the winner's jokers go through the win
