"""An independent reference for what a settlement phase moves, for tests' expected balances.

Written straight from the rules text (docs/rules/kishpa.md sections 2, 5, 6, 8 and 9;
docs/rules/hand.md "The pot"), sharing no code with ``games/``: it reads the phase record
(the outbox's JSON, tiles in notation) itself and returns each account's net movement in
tokens (players by id, plus ``"bowl"`` or ``"pot"``), and, per reason (the ledger's reasons,
docs/wallet.md "What every reason means"), the tokens the phase moves and each account's net
movement (``*_phase``). It does not validate records; the production parser does that.
``tests/unit/test_reference_settlement.py`` checks it against the production posting
functions over generated records and against hand-computed literals.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

BOWL = "bowl"
POT = "pot"
DOLLS = frozenset({"DR", "DK"})

Tile = tuple[str, int]  # (colour letter, number); dolls are not numbered tiles


def _tile(text: str) -> Tile | None:
    """``"R7"`` -> ``("R", 7)``; a doll -> ``None`` (a doll is never a joker, 1 or kishpa)."""
    return None if text in DOLLS else (text[0], int(text[1:]))


def _joker(kishpa: Tile) -> Tile:
    """Section 2: the next number in the kishpa's colour; 13 is followed by 1."""
    colour, number = kishpa
    return (colour, 1 if number == 13 else number + 1)


def _count(hand: Sequence[str], face: Tile) -> int:
    return sum(1 for t in hand if _tile(t) == face)


def _add(moves: dict[str, int], account: str, amount: int) -> None:
    moves[account] = moves.get(account, 0) + amount


@dataclass
class Phase:
    """What one settlement phase moves, as the rules say."""

    moves: dict[str, int] = field(default_factory=dict)
    """Each account's net movement."""
    tokens: Counter[str] = field(default_factory=Counter)
    """Per reason, the tokens paid (every payment counted once, as the ledger's postings)."""
    by_reason: dict[str, dict[str, int]] = field(default_factory=dict)
    """Per reason, each account's net movement."""

    def pay(self, source: str, target: str, amount: int, reason: str) -> None:
        """``source`` pays ``target`` ``amount`` tokens for ``reason`` (nothing if 0)."""
        if amount <= 0:
            return
        _add(self.moves, source, -amount)
        _add(self.moves, target, amount)
        self.tokens[reason] += amount
        nets = self.by_reason.setdefault(reason, {})
        _add(nets, source, -amount)
        _add(nets, target, amount)


def _from_every_other(
    book: Phase, players: Sequence[str], holder: str, each: int, reason: str
) -> None:
    """ "From every other player": each other seated player pays the holder ``each``."""
    for player in players:
        if player != holder:
            book.pay(player, holder, each, reason)


class _Round:
    """The facts of one Kishpa round a phase needs, read from its record."""

    def __init__(self, record: Mapping[str, Any]) -> None:
        self.players: list[str] = list(record["players"])
        self.stake: int = record.get("stake") or 1
        first = _tile(record["kishpa"])
        assert first is not None
        replacement = record.get("replacement")
        self.replaced = replacement is not None
        # Once replaced, "the kishpa" and "the joker" are the new ones in every payment.
        final = first if replacement is None else _tile(replacement)
        assert final is not None
        self.kishpa: Tile = final
        self.joker = _joker(final)
        self.one: Tile = (final[0], 1)
        self.one_value = 2 if final[1] == 1 else 1
        self.contribution = (2 if final[1] == 1 else 1) * self.stake
        self.start_hands: dict[str, list[str]] = record["start_hands"]
        self.start_reveal: str | None = record.get("start_reveal")
        hands = self.start_hands
        self.start_jokers = {p: _count(hands[p], self.joker) for p in self.players}
        self.start_ones = {p: _count(hands[p], self.one) for p in self.players}
        self.starter = max(self.players, key=lambda p: len(hands[p]))


def kishpa_start_phase(record: Mapping[str, Any]) -> Phase:
    """The start phase: every player pays into the bowl; the start bonuses (section 6):
    jokers (``bonus_joker``), 1s (``bonus_one``), dolls (``bonus_doll``, not after a
    replacement) and the kishpa shown (``bonus_kishpa``)."""
    r = _Round(record)
    book = Phase()
    for player in r.players:
        book.pay(player, BOWL, r.contribution, "bowl_contribution")
    for player in r.players:
        hand = r.start_hands[player]
        bonuses = (
            ("bonus_joker", r.start_jokers[player]),
            ("bonus_one", r.start_ones[player] * r.one_value),
            # After a replacement the dolls pay nothing this round.
            ("bonus_doll", 0 if r.replaced else sum(1 for t in hand if t in DOLLS)),
            ("bonus_kishpa", 1 if r.start_reveal == player else 0),
        )
        for reason, units in bonuses:
            _from_every_other(book, r.players, player, units * r.stake, reason)
    return book


def kishpa_start_movements(record: Mapping[str, Any]) -> dict[str, int]:
    """The start phase's net movement per account."""
    return kishpa_start_phase(record).moves


def win_per_loser(hand: Sequence[str], final_discard: str, kishpa: Tile) -> int:
    """Section 8: 2, +1 per joker among the 14, +1 holding the kishpa, +2 for a joker discarded."""
    joker = _joker(kishpa)
    return (
        2
        + _count(hand, joker)
        + (1 if _count(hand, kishpa) else 0)
        + (2 if _tile(final_discard) == joker else 0)
    )


def kishpa_end_phase(record: Mapping[str, Any]) -> Phase:
    """The end phase: the win, the end bonuses, then the bowl (sections 6, 8 and 9)."""
    r = _Round(record)
    end_hands: dict[str, list[str]] = record["end_hands"]
    winner: str | None = record.get("winner")
    book = Phase()
    if winner is not None:
        each = win_per_loser(end_hands[winner], record["final_discard"], r.kishpa)
        _from_every_other(book, r.players, winner, each * r.stake, "win")
    for player in r.players:
        hand = end_hands[player]
        # Once per round per kind: only who was paid nothing for it at the start. The
        # winner's jokers are paid through the win table; his 1s are paid here.
        jokers = 0
        if r.start_jokers[player] == 0 and player != winner:
            jokers = _count(hand, r.joker)
        ones = _count(hand, r.one) * r.one_value if r.start_ones[player] == 0 else 0
        shown = 1 if record.get("end_reveal") == player else 0
        for reason, units in (
            ("bonus_joker", jokers),
            ("bonus_one", ones),
            ("bonus_kishpa", shown),
        ):
            _from_every_other(book, r.players, player, units * r.stake, reason)
    bowl = record["bowl"] + r.contribution * len(r.players)
    if winner is not None and winner == record.get("previous_winner"):
        book.pay(BOWL, winner, bowl, "bowl_win")  # two wins in a row: he takes the bowl
    elif record.get("last_round"):
        # Split equally; odd tokens one each in seat order from the winner (or the starter).
        first = r.players.index(winner if winner is not None else r.starter)
        share, odd = divmod(bowl, len(r.players))
        for i in range(len(r.players)):
            player = r.players[(first + i) % len(r.players)]
            book.pay(BOWL, player, share + (1 if i < odd else 0), "bowl_split")
    return book


def kishpa_end_movements(record: Mapping[str, Any]) -> dict[str, int]:
    """The end phase's net movement per account."""
    return kishpa_end_phase(record).moves


def kishpa_phase(phase: str, record: Mapping[str, Any]) -> Phase:
    """One Kishpa phase (``"start"`` or ``"end"``) of a round record."""
    return kishpa_start_phase(record) if phase == "start" else kishpa_end_phase(record)


def kishpa_movements(phase: str, record: Mapping[str, Any]) -> dict[str, int]:
    """One Kishpa phase's net movement per account."""
    return kishpa_phase(phase, record).moves


def hand_pot_shares(totals: Sequence[int], pot: int) -> list[int]:
    """docs/rules/hand.md "The pot": what each seat is paid from the pot."""
    best = max(totals)
    shared = pot * 25 // 100  # the winner receives at least 75%
    weights = [0 if t == best else max(0, 50 - (best - t)) for t in totals]
    weight = sum(weights)
    shares = [shared * w // weight if weight else 0 for w in weights]
    winners = [i for i, t in enumerate(totals) if t == best]
    each, odd = divmod(pot - sum(shares), len(winners))
    for n, seat in enumerate(winners):  # tied first places split it, odd tokens earlier seats
        shares[seat] = each + (1 if n < odd else 0)
    return shares


def hand_phase(phase: str, record: Mapping[str, Any]) -> Phase:
    """One Hand phase (``"buy_in"``: ``pot_buy_in``; ``"payout"``: ``pot_payout``)."""
    players: list[str] = list(record["players"])
    book = Phase()
    if phase == "buy_in":
        for player in players:
            book.pay(player, POT, record["stake"], "pot_buy_in")
        return book
    totals = [record["totals"][p] for p in players]
    for player, share in zip(players, hand_pot_shares(totals, record["pot"]), strict=True):
        book.pay(POT, player, share, "pot_payout")
    return book


def hand_movements(phase: str, record: Mapping[str, Any]) -> dict[str, int]:
    """One Hand phase: every account's net movement."""
    return hand_phase(phase, record).moves


def add_movements(total: dict[str, int], moves: Mapping[str, int]) -> dict[str, int]:
    """``total`` with ``moves`` added in (returned for chaining)."""
    for account, amount in moves.items():
        _add(total, account, amount)
    return total
