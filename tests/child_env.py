"""Per-player request limits for every server the tests start.

The suites drive tables at machine speed (bot loops, spies, whole stacks), which on a quiet
machine passes the production per-player limits. The limits have tests of their own with
explicit values (tests/integration/edge/test_limits.py). Servers started in process read
these from the environment; tests that build a child's environment keep every variable that
starts with ``TEST_LIMITS_PREFIX``.
"""

from __future__ import annotations

import os

TEST_LIMITS_PREFIX = "KISHPA_LIMIT_PLAYER_"


def use_generous_player_limits() -> None:
    """Raise the per-player limits for this test run (an explicit setting still wins)."""
    os.environ.setdefault("KISHPA_LIMIT_PLAYER_READS", "100000/second")
    os.environ.setdefault("KISHPA_LIMIT_PLAYER_WRITES", "100000/second")
