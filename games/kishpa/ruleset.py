"""The rule set: every ruling of docs/rules/kishpa.md that a table could set differently, in one value.

Defaults are the rulings of docs/rules/kishpa.md. A table carries its ``RuleSet``; code never scatters
an ``if`` for a ruling anywhere else.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Any


@dataclass(frozen=True, slots=True)
class RuleSet:
    # Seats (section 4).
    min_seats: int = 2
    max_seats: int = 4
    default_seats: int = 4
    hand_size: int = 14
    """Tiles dealt to every player; the starter gets one more."""

    # Groups and winning (section 3).
    min_group_size: int = 3
    max_run_length: int = 13
    min_long_run: int = 4
    """A winning hand needs at least one run of this length or more."""
    allow_run_12_13_1: bool = False
    """Classic Okey's 12-13-1 run (never 13-1-2). Off by default."""
    starter_may_win_at_once: bool = True

    # The kishpa (sections 2, 6, 7).
    max_kishpa_replacements: int = 1
    reveal_window_seconds: int = 15
    reveal_window_waits_for_all: bool = True
    """Ruling (docs/rules/kishpa.md is silent): a reveal window closes early only when every seat that
    could hold the kishpa has revealed or passed, not merely every holder. Otherwise a window
    that closes at once would tell the table that nobody holds the kishpa's twin."""
    turn_seconds: int = 30
    timeouts_before_autoplay: int = 3

    # Bowl (section 9).
    bowl_contribution: int = 1
    bowl_contribution_kishpa_one: int = 2
    bowl_streak_to_win: int = 2
    abandoned_ends_with_round: bool = True
    """Ruling (docs/rules/kishpa.md, "leaving the table"): when the last player leaves a table
    where only bots remain, the round in progress becomes the table's last round (its end
    pays the bowl as a last round does, then the table closes), so he pays nothing for a
    round dealt after he left. False: the next round to start is the last one."""

    # Bonuses (section 6).
    doll_bonus: int = 1
    joker_bonus: int = 1
    one_bonus: int = 1
    one_bonus_kishpa_one: int = 2
    kishpa_bonus: int = 1

    # Win payout (section 8): base + per joker in hand + kishpa + joker discarded last.
    win_base: int = 2
    win_per_joker: int = 1
    win_kishpa: int = 1
    win_joker_discard: int = 2

    # Stake: every amount above is in units of the table's stake.
    stake: int = 1
    """Tokens per unit: the stake multiplies every amount the rules move (bowl contributions,
    start and end bonuses, the win table). Bank loads and the starting grant are wallet
    amounts and are never multiplied."""
    bowl_split_in_stakes: bool = False
    """Ruling (docs/rules/kishpa.md decides the last-round split only at stake 1): the bowl's tokens are
    split equally and the tokens that do not divide go one each in seat order from the
    winner (or the starter), so a 35-token bowl among 4 at stake 5 is 9, 9, 9, 8, as even as
    tokens allow. True splits whole stakes instead (10, 10, 10, 5): exactly the stake-1
    split multiplied, at the price of a less even split."""

    # Wallet (section 5).
    starting_tokens: int = 2000
    load_tokens: int = 50
    ils_per_token: int = 2

    def __post_init__(self) -> None:
        if not 2 <= self.min_seats <= self.default_seats <= self.max_seats <= 4:
            raise ValueError("seats must satisfy 2 <= min <= default <= max <= 4")
        if self.max_kishpa_replacements not in (0, 1):
            raise ValueError("the kishpa is replaced at most once per round")
        if isinstance(self.stake, bool) or not isinstance(self.stake, int) or self.stake < 1:
            raise ValueError(f"a stake is a whole number of tokens >= 1, not {self.stake!r}")

    def tokens(self, units: int) -> int:
        """The tokens ``units`` of the rules' amounts move at this table's stake."""
        return units * self.stake


DEFAULT_RULES = RuleSet()


def rules_dict(rules: RuleSet) -> dict[str, Any]:
    """``asdict(rules)``, the stored form, as a fresh dict. Every loaded table state builds
    it, and ``asdict`` copies field by field (tens of µs): it is cached per rule set."""
    return dict(_rules_dict(rules))


@lru_cache(maxsize=256)
def _rules_dict(rules: RuleSet) -> dict[str, Any]:
    return asdict(rules)


def ruleset_from(rules: Mapping[str, Any]) -> RuleSet:
    """``RuleSet(**rules)``: the stored form read back. The rules read it many times an action
    and a frozen dataclass of 30-odd fields is slow to build, so one value is kept per stored
    form (a rule set is immutable; an invalid one raises as it would, and is never kept)."""
    try:
        # The values' types are part of the key: 1 and True are equal keys, not equal rules.
        return _ruleset(tuple(rules.items()), tuple(map(type, rules.values())))
    except TypeError:  # a value that cannot be a key (a list): built, and refused, as before
        return RuleSet(**rules)


@lru_cache(maxsize=256)
def _ruleset(items: tuple[tuple[str, Any], ...], _types: tuple[type, ...]) -> RuleSet:
    return RuleSet(**dict(items))
