"""Hand's settlement phases for the workers: the pot's buy-in and payout postings.

The table service writes a Hand game's ``buy_in`` record when the game starts and its
``payout`` record when the last deal is scored (see ``games.hand.record``). The postings
move tokens between the player ids and ``"pot"``; the worker maps ``"pot"`` to the wallet
account ``pot:<table_id>``.
"""

from __future__ import annotations

from typing import Any

from games.hand.record import BUY_IN, PAYOUT, postings_for_phase
from games.ledger import Posting


def buy_in_postings(record: dict[str, Any]) -> list[Posting]:
    """Every player pays the stake into the pot (phase ``buy_in``)."""
    return postings_for_phase(BUY_IN, record)


def payout_postings(record: dict[str, Any]) -> list[Posting]:
    """The pot is paid out by the game's totals (phase ``payout``)."""
    return postings_for_phase(PAYOUT, record)
