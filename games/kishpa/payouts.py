"""The win payout (docs/rules/kishpa.md section 8): what every loser pays the winner."""

from __future__ import annotations

from collections.abc import Sequence

from games.kishpa.ruleset import DEFAULT_RULES, RuleSet
from games.kishpa.tiles import Face, joker_of

__all__ = ["win_payout"]


def win_payout(
    winning_hand: Sequence[Face],
    final_discard: Face,
    kishpa: Face,
    rules: RuleSet = DEFAULT_RULES,
) -> int:
    """Tokens each loser pays the winner (the units below times ``rules.stake``).

    ``win_base``, plus ``win_per_joker`` per joker among the 14 tiles left in hand, plus
    ``win_kishpa`` if the kishpa's face is among them, plus ``win_joker_discard`` if the last
    discard was a joker. A joker discarded last counts only as the discard; a doll is never
    a joker. Raises ``ValueError`` if the hand is not ``rules.hand_size`` tiles.
    """
    if len(winning_hand) != rules.hand_size:
        raise ValueError(
            f"a winning hand has {rules.hand_size} tiles after the discard, got {len(winning_hand)}"
        )
    joker = joker_of(kishpa)
    payout = rules.win_base
    payout += rules.win_per_joker * sum(1 for face in winning_hand if face == joker)
    if kishpa in winning_hand:
        payout += rules.win_kishpa
    if final_discard == joker:
        payout += rules.win_joker_discard
    return rules.tokens(payout)
