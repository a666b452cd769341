"""The docs' terminal captures keep the round's end: the last board through the verdict."""

from __future__ import annotations

import pytest

from devkit.terminal_capture import round_end

pytestmark = pytest.mark.unit


def test_the_capture_is_the_last_board_through_the_verdict_without_cleared_prompts() -> None:
    log = (
        "╭─ Round 1 ─╮\n│ old │\n╰──╯\nkishpa> draw\n"
        "╭─ Round 1 ─╮\n│ \x1b[1;33mY9\x1b[0m │\n╰──╯\r\n"
        "kishpa> \n\x1b[2KBot Ada won.\n"
        "\x1b[32mRound 1: table verified (commitment)\x1b[0m\n"
        "kishpa> help\n"
    )
    assert round_end(log) == (
        "╭─ Round 1 ─╮\n│ \x1b[1;33mY9\x1b[0m │\n╰──╯\n"
        "Bot Ada won.\n\x1b[32mRound 1: table verified (commitment)\x1b[0m\n"
    )


def test_a_capture_without_a_verdict_is_refused() -> None:
    with pytest.raises(ValueError, match="table verified"):
        round_end("kishpa> quit\nBye!\n")
