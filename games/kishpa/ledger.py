"""The ledger view of a round (docs/rules/kishpa.md section 10): ordered double-entry postings.

A posting (``games.ledger.Posting``, the one type the games, the workers and the wallet share)
moves ``amount`` tokens from one account to another for a closed set of reasons.
Accounts here are the player ids and :data:`BOWL` (the table's bowl); the settlement worker
maps them to wallet accounts. Postings are listed in a fixed order so that the same round
always yields the same batch (the wallet's idempotency compares batch bodies).
"""

from __future__ import annotations

from collections.abc import Sequence

from games.ledger import Posting, Reason, net_movements, posting, postings_to_dicts

__all__ = [
    "BOWL",
    "Posting",
    "Reason",
    "from_every_other",
    "net_movements",
    "posting",
    "postings_to_dicts",
]

BOWL = "bowl"
"""The account name of the table's bowl in postings."""


def from_every_other(
    players: Sequence[str], receiver: str, amount: int, reason: Reason
) -> list[Posting]:
    """``receiver`` gets ``amount`` from every other seated player, in seat order."""
    if amount <= 0:
        return []
    return [posting(p, receiver, amount, reason) for p in players if p != receiver]
