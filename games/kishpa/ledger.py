"""The ledger view of a round (RULES.md section 10): ordered double-entry postings.

A posting moves ``amount`` tokens from one account to another for a closed set of reasons.
Accounts here are the player ids and :data:`BOWL` (the table's bowl); the settlement worker
maps them to wallet accounts. Postings are listed in a fixed order so that the same round
always yields the same batch (the wallet's idempotency compares batch bodies).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum

BOWL = "bowl"
"""The account name of the table's bowl in postings."""


class Reason(StrEnum):
    """Why tokens move (``bank_load`` belongs to the wallet and never appears here)."""

    BOWL_CONTRIBUTION = "bowl_contribution"
    BONUS_DOLL = "bonus_doll"
    BONUS_JOKER = "bonus_joker"
    BONUS_ONE = "bonus_one"
    BONUS_KISHPA = "bonus_kishpa"
    WIN = "win"
    BOWL_WIN = "bowl_win"
    BOWL_SPLIT = "bowl_split"


@dataclass(frozen=True, slots=True)
class Posting:
    """One movement of tokens: ``amount`` (> 0) from ``from_account`` to ``to_account``."""

    from_account: str
    to_account: str
    amount: int
    reason: Reason

    def __post_init__(self) -> None:
        if isinstance(self.amount, bool) or not isinstance(self.amount, int) or self.amount <= 0:
            raise ValueError(f"a posting moves a positive whole number of tokens: {self.amount!r}")
        if self.from_account == self.to_account:
            raise ValueError(f"a posting cannot move tokens from {self.from_account} to itself")

    def to_dict(self) -> dict[str, str | int]:
        """The wire form used by ``kishpa rules settle`` and the outbox records."""
        return {
            "from": self.from_account,
            "to": self.to_account,
            "amount": self.amount,
            "reason": self.reason.value,
        }

    @classmethod
    def from_dict(cls, obj: dict[str, object]) -> Posting:
        """Parse the wire form back (raises ``ValueError`` on anything malformed)."""
        amount = obj["amount"]
        if not isinstance(amount, int):
            raise ValueError("a posting amount must be an integer")
        return cls(str(obj["from"]), str(obj["to"]), amount, Reason(str(obj["reason"])))


def from_every_other(
    players: Sequence[str], receiver: str, amount: int, reason: Reason
) -> list[Posting]:
    """``receiver`` gets ``amount`` from every other seated player, in seat order."""
    if amount <= 0:
        return []
    return [Posting(p, receiver, amount, reason) for p in players if p != receiver]


def net_movements(postings: Iterable[Posting]) -> dict[str, int]:
    """Each account's net change (positive = received). The values always sum to zero."""
    net: Counter[str] = Counter()
    for posting in postings:
        net[posting.from_account] -= posting.amount
        net[posting.to_account] += posting.amount
    return dict(net)


def postings_to_dicts(postings: Iterable[Posting]) -> list[dict[str, str | int]]:
    """The wire form of a list of postings."""
    return [p.to_dict() for p in postings]
