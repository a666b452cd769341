"""The bowl (docs/rules/kishpa.md section 9): contributions, winning streaks, taking and splitting it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from games.kishpa.ledger import BOWL, Posting, Reason, posting
from games.kishpa.ruleset import DEFAULT_RULES, RuleSet
from games.kishpa.tiles import Face


def contribution(final_kishpa: Face, rules: RuleSet = DEFAULT_RULES) -> int:
    """Tokens every player pays into the bowl this round (2 when the final kishpa is a 1),
    times the stake."""
    if final_kishpa.number == 1:
        return rules.tokens(rules.bowl_contribution_kishpa_one)
    return rules.tokens(rules.bowl_contribution)


def contribution_postings(
    players: Sequence[str], final_kishpa: Face, rules: RuleSet = DEFAULT_RULES
) -> list[Posting]:
    """Every player pays the round's contribution into the bowl, in seat order."""
    amount = contribution(final_kishpa, rules)
    if amount <= 0:
        return []
    return [posting(p, BOWL, amount, Reason.BOWL_CONTRIBUTION) for p in players]


def completes_streak(
    winner: str | None, previous_winner: str | None, rules: RuleSet = DEFAULT_RULES
) -> bool:
    """Does this round's winner take the bowl by winning ``bowl_streak_to_win`` in a row?

    ``previous_winner`` is the player one win short of the streak (with the default 2: he
    won the round before and did not take the bowl then).
    """
    if winner is None:
        return False
    if rules.bowl_streak_to_win <= 1:
        return True
    return winner == previous_winner


def split_shares(
    amount: int, players: Sequence[str], first: str, unit: int = 1
) -> list[tuple[str, int]]:
    """Equal split in whole ``unit``s with the remainder one unit each in seat order starting
    with ``first``; tokens short of a whole unit then go one each, continuing the same order.

    Returns ``(player, share)`` in seat order starting with ``first``.
    """
    if amount < 0:
        raise ValueError("the bowl is never negative")
    if unit < 1:
        raise ValueError("the split's unit is at least one token")
    start = players.index(first)
    count = len(players)
    order = [players[(start + k) % count] for k in range(count)]
    units, loose = divmod(amount, unit)
    base, remainder = divmod(units, count)
    shares = [unit * (base + (1 if k < remainder else 0)) for k in range(count)]
    for j in range(loose):
        shares[(remainder + j) % count] += 1
    return list(zip(order, shares, strict=True))


def bowl_end_postings(
    players: Sequence[str],
    bowl_amount: int,
    winner: str | None,
    previous_winner: str | None,
    last_round: bool,
    starter: str,
    rules: RuleSet = DEFAULT_RULES,
) -> list[Posting]:
    """What leaves the bowl when the round ends (``bowl_amount`` includes this round's
    contributions): all of it to a winner completing his streak, else on the last round an
    equal split among the seated players, else nothing."""
    if bowl_amount <= 0:
        return []
    if completes_streak(winner, previous_winner, rules):
        assert winner is not None
        return [posting(BOWL, winner, bowl_amount, Reason.BOWL_WIN)]
    if not last_round:
        return []
    first = winner if winner is not None else starter
    unit = rules.stake if rules.bowl_split_in_stakes else 1
    return [
        posting(BOWL, player, share, Reason.BOWL_SPLIT)
        for player, share in split_shares(bowl_amount, players, first, unit)
        if share > 0
    ]


def next_streaks(streaks: Mapping[str, int], winner: str | None, took_bowl: bool) -> dict[str, int]:
    """Streaks after a round: the winner's grows (or restarts at 0 when he took the bowl),
    everyone else's breaks; a round with no winner breaks every streak."""
    updated = dict.fromkeys(streaks, 0)
    if winner is not None and not took_bowl:
        updated[winner] = streaks.get(winner, 0) + 1
    return updated


def previous_winner_of(streaks: Mapping[str, int], rules: RuleSet = DEFAULT_RULES) -> str | None:
    """The player one win short of taking the bowl, if any (for the round record)."""
    for player, streak in streaks.items():
        if streak > 0 and streak == rules.bowl_streak_to_win - 1:
            return player
    return None
