"""The pot's postings for the wallet: buying in at the start, the payout at the end.

Accounts are the player ids and ``"pot"`` (the wallet maps them to its own account names).
Each posting moves a positive whole number of tokens from one account to another, so every
batch sums to zero. Order is deterministic: seat order.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from games.hand.pot import split_pot
from games.hand.ruleset import DEFAULT_RULES, RuleSet

POT = "pot"
POT_BUY_IN = "pot_buy_in"
POT_PAYOUT = "pot_payout"


@dataclass(frozen=True, slots=True)
class Posting:
    """One movement of ``amount`` (> 0) tokens from one account to another."""

    from_account: str
    to_account: str
    amount: int
    reason: str

    def __post_init__(self) -> None:
        if isinstance(self.amount, bool) or not isinstance(self.amount, int) or self.amount <= 0:
            raise ValueError(f"a posting moves a positive whole number of tokens: {self.amount!r}")
        if self.from_account == self.to_account:
            raise ValueError(f"a posting cannot move tokens from {self.from_account} to itself")
        if self.reason not in (POT_BUY_IN, POT_PAYOUT):
            raise ValueError(f"unknown posting reason {self.reason!r}")

    def to_dict(self) -> dict[str, Any]:
        """The record form: ``{"from", "to", "amount", "reason"}``."""
        return {
            "from": self.from_account,
            "to": self.to_account,
            "amount": self.amount,
            "reason": self.reason,
        }


def _check_players(players: Sequence[str]) -> None:
    if not players or len(set(players)) != len(players) or POT in players:
        raise ValueError(f"players must be distinct ids other than {POT!r}: {list(players)}")


def buy_in_postings(players: Sequence[str], stake: int) -> list[Posting]:
    """Every player buys the table's stake into the pot when the game starts."""
    _check_players(players)
    if stake < 0:
        raise ValueError("a stake is never negative")
    if stake == 0:
        return []
    return [Posting(p, POT, stake, POT_BUY_IN) for p in players]


def payout_postings(
    players: Sequence[str],
    totals: Mapping[str, int] | Sequence[int],
    pot: int,
    rules: RuleSet = DEFAULT_RULES,
) -> list[Posting]:
    """The pot paid out by the game totals (by player id, or in seat order)."""
    _check_players(players)
    if isinstance(totals, Mapping):
        if set(totals) != set(players):
            raise ValueError("totals must name exactly the players")
        seat_totals = [totals[p] for p in players]
    else:
        if len(totals) != len(players):
            raise ValueError("one total per player")
        seat_totals = list(totals)
    shares = split_pot(seat_totals, pot, rules)
    return [Posting(POT, p, s, POT_PAYOUT) for p, s in zip(players, shares, strict=True) if s]


def net_movements(postings: Iterable[Posting]) -> dict[str, int]:
    """Each account's net change; the values always sum to zero."""
    net: Counter[str] = Counter()
    for p in postings:
        net[p.from_account] -= p.amount
        net[p.to_account] += p.amount
    return dict(net)
