"""Splitting the table's pot at the end of a game.

The winner (highest total) receives at least 75% of the pot. The other 25% is shared among
the other players within 50 points of the winner, each weighted ``50 − (winner's total − his
total)``, in whole tokens rounding down; whatever is left (all of it when nobody is within
50) goes to the winner. Players tied for first split the winner's part equally; the tokens
that do not divide go one each to the tied players in seat order (the earlier seat first).
"""

from __future__ import annotations

from collections.abc import Sequence

from games.hand.ruleset import DEFAULT_RULES, RuleSet


def share_weights(totals: Sequence[int], rules: RuleSet = DEFAULT_RULES) -> list[int]:
    """Each seat's weight in the shared part: 0 for the winners and for anyone 50+ behind."""
    best = max(totals)
    return [0 if t == best else max(0, rules.share_window - (best - t)) for t in totals]


def split_pot(totals: Sequence[int], pot: int, rules: RuleSet = DEFAULT_RULES) -> list[int]:
    """Tokens each seat receives from a pot of ``pot`` tokens, given the game totals."""
    if not totals:
        raise ValueError("nobody to pay")
    if pot < 0:
        raise ValueError("a pot is never negative")
    best = max(totals)
    winners = [seat for seat, t in enumerate(totals) if t == best]
    weights = share_weights(totals, rules)
    weight_sum = sum(weights)
    shared = pot * (100 - rules.winner_min_percent) // 100
    shares = [shared * w // weight_sum if weight_sum else 0 for w in weights]
    winners_part = pot - sum(shares)
    each, extra = divmod(winners_part, len(winners))
    for rank, seat in enumerate(winners):
        shares[seat] = each + (1 if rank < extra else 0)
    return shares
