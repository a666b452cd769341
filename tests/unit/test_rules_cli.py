"""``kishpa rules check|hint|settle`` through the real console script, as tools call it."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.unit


def tiles(text: str) -> list[str]:
    return text.split()


KISHPA = shutil.which("kishpa", path=str(Path(sys.executable).parent)) or "kishpa"
WIN = tiles("R1 R2 R3 R4 B7 Y7 K7 B9 B10 B11 Y1 Y2 Y3 Y4")


def run(command: str, *lines: Any, extra: tuple[str, ...] = ()) -> tuple[int, list[Any]]:
    """Feed the lines (dicts are JSON-encoded) and return the exit code and parsed output."""
    text = "\n".join(json.dumps(x) if isinstance(x, dict) else str(x) for x in lines) + "\n"
    done = subprocess.run(
        [KISHPA, "rules", command, *extra],
        input=text,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return done.returncode, [json.loads(line) for line in done.stdout.splitlines()]


def test_check_answers_a_winning_hand_with_groups_as_written() -> None:
    hand = [*WIN[:13], "y4 "]  # written loosely on purpose
    code, out = run("check", {"kishpa": "R5", "hand": hand})
    assert code == 0
    assert out == [
        {
            "wins": True,
            "groups": [
                ["R1", "R2", "R3", "R4"],
                ["B7", "Y7", "K7"],
                ["B9", "B10", "B11"],
                ["Y1", "Y2", "Y3", "y4 "],
            ],
        }
    ]


def test_check_adds_the_payout_only_when_the_discard_is_given() -> None:
    joker_hand = [*WIN[:13], "R6"]  # kishpa R5: R6 is the joker
    code, out = run(
        "check",
        {"kishpa": "R5", "hand": joker_hand, "discard": "R6"},
        {"kishpa": "R5", "hand": joker_hand},
        {"kishpa": "R5", "hand": [*WIN[:13], "K13"], "discard": "R6"},
    )
    assert code == 0
    assert out[0]["wins"] is True
    assert out[0]["payout_per_loser"] == 2 + 1 + 2
    assert "payout_per_loser" not in out[1]
    assert out[2] == {"wins": False}


def test_check_reports_each_bad_line_and_answers_the_others() -> None:
    code, out = run(
        "check",
        "this is not json",
        {"kishpa": "R5", "hand": WIN},
        "",
        {"kishpa": "R5", "hand": WIN[:13]},
        {"kishpa": "R5", "hand": [*WIN[:13], "Z9"]},
        {"kishpa": "R5", "hand": [*WIN[:12], "R5", "R5"]},
        {"kishpa": "R5", "hand": [*WIN[:13], "R6"], "discard": "R6x"},
        {"kishpa": "R5", "hand": [*WIN[:12], "Y4", "Y4"], "discard": "Y4"},
        {"hand": WIN},
        {"kishpa": "DR", "hand": WIN},
        [1, 2],
        {"kishpa": "R5", "hand": WIN},
    )
    assert code == 2
    # The blank line is skipped: 11 answers for 12 lines, in order.
    assert len(out) == 11
    assert out[0].keys() == {"error"}
    assert out[1]["wins"] is True
    assert "14 tiles" in out[2]["error"]
    assert "Z9" in out[3]["error"]
    assert "kishpa" in out[4]["error"]  # a third R5 counting the turned one
    assert "R6x" in out[5]["error"]
    assert "Y4" in out[6]["error"]  # a third Y4 counting the discard
    assert "kishpa" in out[7]["error"]
    assert "doll" in out[8]["error"]
    assert out[9].keys() == {"error"}
    assert out[10]["wins"] is True
    for line in out:
        if "error" in line:
            assert "\n" not in line["error"]


def test_check_with_the_12_13_1_setting() -> None:
    hand = tiles("R12 R13 R1 B1 B2 B3 B4 Y7 B7 K7 Y9 Y10 Y11 Y12")
    assert run("check", {"kishpa": "K5", "hand": hand})[1] == [{"wins": False}]
    code, out = run("check", {"kishpa": "K5", "hand": hand}, extra=("--allow-12-13-1",))
    assert code == 0
    assert ["R12", "R13", "R1"] in out[0]["groups"]


def test_hint_lists_every_winning_discard() -> None:
    hand = [*WIN, "K13"]
    code, out = run("hint", {"kishpa": "R5", "hand": hand})
    assert code == 0
    assert out == [
        {
            "wins": True,
            "discards": [
                {
                    "discard": "K13",
                    "groups": [
                        ["R1", "R2", "R3", "R4"],
                        ["B7", "Y7", "K7"],
                        ["B9", "B10", "B11"],
                        ["Y1", "Y2", "Y3", "Y4"],
                    ],
                    "payout_per_loser": 2,
                }
            ],
        }
    ]


def test_hint_gives_best_groups_when_nothing_wins() -> None:
    hand = tiles("R1 R2 R3 R4 R5 B7 Y7 K7 B9 B10 B11 Y1 Y2 K3 K12")
    code, out = run("hint", {"kishpa": "R5", "hand": hand}, {"kishpa": "R5", "hand": WIN})
    assert code == 2
    assert out[0]["wins"] is False
    grouped = [t for g in out[0]["groups"] for t in g]
    assert sorted(grouped) == sorted(tiles("R1 R2 R3 R4 R5 B7 Y7 K7 B9 B10 B11"))
    assert "15 tiles" in out[1]["error"]


def test_settle_reports_a_bad_record_and_exits_2() -> None:
    code, out = run("settle", {"players": ["p1"]}, "[")
    assert code == 2
    assert len(out) == 2
    assert all(line.keys() == {"error"} for line in out)


def test_settle_takes_an_optional_stake_and_keeps_its_output_shape() -> None:
    """Issue 17: ``"stake"`` (default 1) multiplies the amounts; the output is unchanged in
    shape, one line per record, errors as before."""
    from tests.support.kishpa_records import WIN_HAND, record

    rec = record(end={"p3": WIN_HAND}, winner="p3", final_discard="Y3", bowl=15, last_round=True)
    staked = {**rec, "stake": 5, "bowl": 75}  # the bowl is written in tokens
    code, out = run("settle", rec, {**rec, "stake": 1}, staked, {**rec, "stake": 0})
    assert code == 2
    assert out[0] == out[1]
    assert out[0].keys() == out[2].keys() == {"start", "end"}
    assert out[3].keys() == {"error"}
    assert "stake" in out[3]["error"]
    # Stake 1: p1 holds a joker; p3 wins 2 from each; bowl 15 + 4 = 19 split 5, 5, 5, 4 from p3.
    # Stake 5: 5 and 10 from each; bowl 75 + 20 = 95 split 24, 24, 24, 23 from p3.
    assert [(p["to"], p["amount"], p["reason"]) for p in out[2]["start"]] == [
        *[("bowl", 5, "bowl_contribution")] * 4,
        *[("p1", 5, "bonus_joker")] * 3,
    ]
    assert [(p["from"], p["to"], p["amount"], p["reason"]) for p in out[2]["end"]] == [
        ("p1", "p3", 10, "win"),
        ("p2", "p3", 10, "win"),
        ("p4", "p3", 10, "win"),
        ("bowl", "p3", 24, "bowl_split"),
        ("bowl", "p4", 24, "bowl_split"),
        ("bowl", "p1", 24, "bowl_split"),
        ("bowl", "p2", 23, "bowl_split"),
    ]
