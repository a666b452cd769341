"""Scoring a deal: the winner's bonus and every loser's penalty."""

from __future__ import annotations

from collections.abc import Sequence

from games.hand.melds import hand_penalty
from games.hand.ruleset import RuleSet


def deal_scores(
    hands: Sequence[Sequence[int]], winner: int | None, hand_win: bool, rules: RuleSet
) -> list[int]:
    """Points of every seat for one deal.

    The winner scores +50 (+100 for a *hand*); each other seat scores minus the value of the
    cards left in his hand (a joker 25), doubled after a *hand*. With no winner (the stock ran
    out) every seat scores his hand as a penalty.
    """
    multiplier = rules.hand_penalty_multiplier if (winner is not None and hand_win) else 1
    scores = []
    for seat, hand in enumerate(hands):
        if seat == winner:
            scores.append(rules.hand_win_score if hand_win else rules.win_score)
        else:
            scores.append(-hand_penalty(hand, rules) * multiplier)
    return scores
