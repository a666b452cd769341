"""``kishpa bots`` as a real process against the real services (started as processes by the
``stack_env`` fixture of test_play_terminal): 20 four-seat tables of solver bots play their
rounds to the end with short timers, and the command exits 0 with no errors reported.
"""

from __future__ import annotations

import subprocess

import pexpect
import pytest

from tests.support.stack import KISHPA, redis_url, stack_env

pytestmark = pytest.mark.e2e

__all__ = ["redis_url", "stack_env"]  # fixtures, imported so pytest finds them here


def test_bots_fill_20_tables_and_play_them_to_the_end(stack_env: dict[str, str]) -> None:
    finished = subprocess.run(
        [KISHPA, "bots", "--tables", "20", "--rounds", "2", "--turn-seconds", "10"],
        env={**stack_env, "COLUMNS": "120"},
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    out = finished.stdout + finished.stderr
    assert finished.returncode == 0, out
    assert "tables closed" in out
    assert "20 / 20" in out
    assert "rounds played" in out
    assert "none" in out  # the errors row


def test_bots_report_failure_when_the_services_are_down(stack_env: dict[str, str]) -> None:
    env = {
        **stack_env,
        "KISHPA_MATCHMAKING_ADDR": "127.0.0.1:1",
        "KISHPA_TABLE_ADDR": "127.0.0.1:1",
    }
    finished = subprocess.run(
        [KISHPA, "bots", "--tables", "1", "--timeout", "30"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert finished.returncode == 1, finished.stdout + finished.stderr
    assert "UNAVAILABLE" in finished.stdout


def test_bots_and_play_take_a_stake(stack_env: dict[str, str]) -> None:
    """``--stake N`` reaches the services: a stake they offer plays to the end, one they do
    not offer is refused with the list of stakes (issue 17)."""
    env = {**stack_env, "COLUMNS": "120"}
    refused = subprocess.run(
        [KISHPA, "bots", "--tables", "1", "--seats", "2", "--stake", "7", "--timeout", "60"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    out = refused.stdout + refused.stderr
    assert refused.returncode == 1, out
    assert "stake must be one of: 1, 5, 10, 50, 100" in " ".join(out.split()), out
    played = subprocess.run(
        [KISHPA, "bots", "--tables", "1", "--seats", "2", "--stake", "50", "--pause-ms", "50"],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    out = played.stdout + played.stderr
    assert played.returncode == 0, out
    assert "1 / 1" in out

    child = pexpect.spawn(
        KISHPA, ["play", "--private", "--stake", "7"], env=env, encoding="utf-8", timeout=60
    )
    child.expect("stake must be one of: 1, 5, 10, 50, 100")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 1
    child = pexpect.spawn(
        KISHPA, ["play", "--seats", "3", "--stake", "100"], env=env, encoding="utf-8", timeout=60
    )
    child.expect("Looking for a 3-seat table at stake 100")
    child.sendintr()
    child.expect("Bye!")
    child.expect(pexpect.EOF)
    child.close()
