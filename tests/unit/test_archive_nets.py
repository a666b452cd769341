"""Property tests of the archive's money arithmetic: a game's nets, and drift's difference."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from archive.store import BANK_LOAD, net_tokens, result_of
from workers.drift import postings_difference

pytestmark = pytest.mark.unit

PLAYERS = ["ann", "ben", "cat"]
ACCOUNTS = [*(f"player:{p}" for p in PLAYERS), "bowl:t", "pot:t", "bank"]
REASONS = ["win", "bowl_contribution", "bonus_one", BANK_LOAD]

postings = st.lists(
    st.tuples(
        st.sampled_from(ACCOUNTS),
        st.sampled_from(ACCOUNTS),
        st.integers(1, 500),
        st.sampled_from(REASONS),
    ),
    max_size=30,
)


@given(postings)
def test_nets_are_each_players_tokens_in_minus_out_without_bank_loads(
    moves: list[tuple[str, str, int, str]],
) -> None:
    from archive.store import PhaseRow

    row = PhaseRow(
        "t", 1, "end", 0, "kishpa", "1",
        tuple({"from": f, "to": t, "amount": a, "reason": r} for f, t, a, r in moves),
    )  # fmt: skip
    nets = net_tokens([row], PLAYERS)
    # Independently: a ledger of balances, bank loads skipped.
    balance: Counter[str] = Counter()
    for source, target, amount, reason in moves:
        if reason != BANK_LOAD:
            balance[source] -= amount
            balance[target] += amount
    assert nets == {p: balance[f"player:{p}"] for p in PLAYERS}
    game_accounts = sum(balance[a] for a in ("bowl:t", "pot:t", "bank"))
    assert sum(nets.values()) == -game_accounts  # double entry: what players won, others lost
    assert all(
        result_of(n) == ("won" if n > 0 else "lost" if n < 0 else "even") for n in nets.values()
    )


@given(postings, postings)
def test_drift_reports_a_difference_exactly_when_the_postings_differ(
    want: list[tuple[str, str, int, str]], have: list[tuple[str, str, int, str]]
) -> None:
    text = postings_difference(sorted(want), sorted(have))
    if Counter(want) == Counter(have) and want:
        assert text == ""
    else:
        assert text  # always says what differs, never an empty message
        assert ", the ledger holds ," not in text
