"""Start-of-round and end-of-round bonuses (docs/rules/kishpa.md sections 6 and 7).

Pure functions of faces. Every bonus is "receives N from every other player"; the
once-per-round rule is keyed by (player, situation): a player paid for jokers at the start
is paid nothing for jokers at the end, the same for the 1s of the kishpa's colour, and the
kishpa reveal pays once per round in all. For bonuses a doll is only a doll.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from games.kishpa.ledger import Posting, Reason, from_every_other
from games.kishpa.ruleset import DEFAULT_RULES, RuleSet
from games.kishpa.tiles import DOLLS, Face, joker_of


@dataclass(frozen=True, slots=True)
class KishpaFacts:
    """The round's kishpa(s): the tile turned first and, when nobody held a joker, its
    replacement. From the replacement on, *the kishpa* and *the joker* mean the new ones."""

    first: Face
    replacement: Face | None = None

    @property
    def final(self) -> Face:
        """The kishpa every payment except the start reveal is computed against."""
        return self.replacement if self.replacement is not None else self.first

    @property
    def joker(self) -> Face:
        return joker_of(self.final)

    @property
    def one(self) -> Face:
        """The 1 of the final kishpa's colour."""
        return Face(self.final.colour, 1)

    @property
    def kishpa_is_one(self) -> bool:
        return self.final.number == 1


def count_jokers(hand: Sequence[Face], facts: KishpaFacts) -> int:
    """Jokers held (dolls are never jokers for bonuses)."""
    joker = facts.joker
    return sum(1 for face in hand if face == joker)


def count_ones(hand: Sequence[Face], facts: KishpaFacts) -> int:
    """1s of the final kishpa's colour held."""
    one = facts.one
    return sum(1 for face in hand if face == one)


def one_bonus(facts: KishpaFacts, rules: RuleSet = DEFAULT_RULES) -> int:
    """Tokens each other player pays per 1 of the kishpa's colour (2 when the kishpa is a 1),
    times the stake."""
    return rules.tokens(rules.one_bonus_kishpa_one if facts.kishpa_is_one else rules.one_bonus)


def start_bonus_postings(
    players: Sequence[str],
    start_hands: Mapping[str, Sequence[Face]],
    facts: KishpaFacts,
    start_reveal: str | None,
    rules: RuleSet = DEFAULT_RULES,
) -> list[Posting]:
    """Bonuses paid right after the deal (and the replacement, if any), in a fixed order:
    dolls (DR, DK), jokers, 1s, then the start reveal."""
    postings: list[Posting] = []
    if facts.replacement is None:
        # After a replacement the dolls pay nothing this round.
        for doll in DOLLS:
            for player in players:
                if doll in start_hands[player]:
                    postings += from_every_other(
                        players, player, rules.tokens(rules.doll_bonus), Reason.BONUS_DOLL
                    )
    for player in players:
        jokers = count_jokers(start_hands[player], facts)
        postings += from_every_other(
            players, player, rules.tokens(jokers * rules.joker_bonus), Reason.BONUS_JOKER
        )
    per_one = one_bonus(facts, rules)
    for player in players:
        ones = count_ones(start_hands[player], facts)
        postings += from_every_other(players, player, ones * per_one, Reason.BONUS_ONE)
    if start_reveal is not None:
        postings += from_every_other(
            players, start_reveal, rules.tokens(rules.kishpa_bonus), Reason.BONUS_KISHPA
        )
    return postings


def end_bonus_postings(
    players: Sequence[str],
    start_hands: Mapping[str, Sequence[Face]],
    end_hands: Mapping[str, Sequence[Face]],
    facts: KishpaFacts,
    winner: str | None,
    start_reveal: str | None,
    end_reveal: str | None,
    rules: RuleSet = DEFAULT_RULES,
) -> list[Posting]:
    """Bonuses paid when the round ends, in a fixed order: jokers, 1s, the end reveal.

    The winner's jokers and kishpa are paid through the win table, not here; his 1s are.
    """
    postings: list[Posting] = []
    for player in players:
        if player == winner or count_jokers(start_hands[player], facts) > 0:
            continue
        jokers = count_jokers(end_hands[player], facts)
        postings += from_every_other(
            players, player, rules.tokens(jokers * rules.joker_bonus), Reason.BONUS_JOKER
        )
    per_one = one_bonus(facts, rules)
    for player in players:
        if count_ones(start_hands[player], facts) > 0:
            continue
        ones = count_ones(end_hands[player], facts)
        postings += from_every_other(players, player, ones * per_one, Reason.BONUS_ONE)
    if end_reveal is not None and start_reveal is None and end_reveal != winner:
        postings += from_every_other(
            players, end_reveal, rules.tokens(rules.kishpa_bonus), Reason.BONUS_KISHPA
        )
    return postings
