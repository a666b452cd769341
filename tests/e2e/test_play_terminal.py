"""``kishpa play`` through a pseudo-terminal against the real services as processes.

The wallet (SQLite in a temporary directory), table and matchmaking services run as
``kishpa serve`` subprocesses on free ports, with the machine's Redis; the test types at
``kishpa play --bots 3`` like a person would and plays a round to its end.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pexpect
import pytest

from tests.support.stack import KISHPA, PROMPT, delete_table
from tests.support.stack import redis_url as redis_url  # a fixture
from tests.support.stack import stack_env as stack_env  # a fixture

pytestmark = pytest.mark.e2e


SCREENSHOTS = Path(
    os.environ.get(
        "KISHPA_SCREENSHOT_DIR", Path(__file__).resolve().parents[2] / "var" / "screenshots"
    )
)
"""Where the test leaves what the terminal showed (kishpa-play.log with its colours,
kishpa-verify.txt): the source of the captures in docs/fairness.md."""


def test_play_a_round_against_three_bots(stack_env: dict[str, str], redis_url: str) -> None:
    child = pexpect.spawn(
        KISHPA,
        ["play", "--name", "Ann", "--bots", "3", "--turn-seconds", "60", "--reveal-seconds", "3"],
        env={**stack_env, "COLUMNS": "100", "TERM": "xterm"},
        encoding="utf-8",
        timeout=60,
    )
    table_id = ""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    child.logfile_read = (SCREENSHOTS / "kishpa-play.log").open("w", encoding="utf-8")
    try:
        child.expect(r"Table (\S+) · invite code (?:\x1b\[[0-9;]*m)*([A-Z0-9]{6})")
        table_id = child.match.group(1)
        child.expect("Round 1")
        by_hand = 0
        while True:
            index = child.expect(
                [
                    "Your turn — you start",
                    "Your turn — draw",
                    "reveal the kishpa now",
                    "Round 1 is over",
                ],
                timeout=120,
            )
            if index == 3:
                break
            child.expect(PROMPT)
            if index == 2:
                child.sendline("reveal")
                child.expect("You revealed the kishpa")
            elif by_hand < 2:
                # The first turns by hand: draw (unless starting), then throw tile number 1.
                if index == 1:
                    child.sendline("draw")
                    child.expect("You drew")
                    child.expect("Now discard a tile")
                    child.expect(PROMPT)
                child.sendline("discard 1")
                child.expect("You discarded")
                by_hand += 1
            else:
                # Later turns: the bot's choice for the player ("auto").
                child.sendline("auto")
                child.expect("Auto: ")
        assert by_hand >= 1
        # The SDK recomputed the deal from the revealed seed (docs/fairness.md).
        child.expect(
            r"Round 1: table verified \(commitment, your client seed, your 1[45] dealt tiles"
        )
        child.sendline("help")
        child.expect("make the next round the last one")
        child.sendline("discard 99")
        child.expect("You have no tile '99'")
        child.sendline("quit")
        child.expect("Bye!")
        child.expect(pexpect.EOF, timeout=30)
        child.close()
        assert child.exitstatus == 0
        # Later, the same player checks the round again from the server's record of it.
        verify = subprocess.run(
            [KISHPA, "verify", "--table", table_id, "--round", "1"],
            env=stack_env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert verify.returncode == 0, verify.stdout + verify.stderr
        (SCREENSHOTS / "kishpa-verify.txt").write_text(
            f"$ kishpa verify --table {table_id} --round 1\n{verify.stdout}", encoding="utf-8"
        )
        assert "seat 1: table verified (commitment, your 15 dealt tiles" in verify.stdout
    finally:
        if child.isalive():
            child.terminate(force=True)
        if table_id:
            delete_table(redis_url, table_id)
