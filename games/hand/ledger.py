"""The pot's postings for the wallet: buying in at the start, the payout at the end.

Accounts are the player ids and ``"pot"`` (the wallet maps them to its own account names);
a posting is ``games.ledger.Posting``, the one type the games, the workers and the wallet share.
Each posting moves a positive whole number of tokens from one account to another, so every
batch sums to zero. Order is deterministic: seat order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from games.hand.pot import split_pot
from games.hand.ruleset import DEFAULT_RULES, RuleSet
from games.ledger import Posting, Reason, net_movements, posting

__all__ = [
    "POT",
    "POT_BUY_IN",
    "POT_PAYOUT",
    "Posting",
    "buy_in_postings",
    "net_movements",
    "payout_postings",
]

POT = "pot"
POT_BUY_IN = Reason.POT_BUY_IN
POT_PAYOUT = Reason.POT_PAYOUT


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
    return [posting(p, POT, stake, POT_BUY_IN) for p in players]


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
    return [posting(POT, p, s, POT_PAYOUT) for p, s in zip(players, shares, strict=True) if s]
