"""What each viewer of a Hand table sees, and the advice a seat may ask for.

The table keeps the game (:meth:`GameState.to_dict`) and the current deal
(:meth:`DealState.to_dict`); every view is read from the stored deal as it is, because every
view of every action would otherwise rebuild and re-check the whole deal
(``DealState.from_dict``), which the move that wrote it already did.

What stays hidden is decided here: another seat's cards (only their count, until the deal is
over and the hands left are shown to justify the penalties), the stock's order (only its
size), the card a seat must still use (only to that seat, on its turn) and the deal's server
seed (until the deal is over). Once the game is over the pot is paid out and shows 0.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from games.hand.deal_state import DealState, Phase
from games.hand.game import GameState, available_actions, is_last_deal
from games.hand.meld_search import best_meld_specs
from games.view import PublicFacts


@dataclass(frozen=True, slots=True)
class MeldView:
    """A meld on the table as every viewer sees it (its stored form, with its id)."""

    id: int
    kind: str
    cards: list[int]
    rank: int
    suit: str | None
    owner: int


@dataclass(frozen=True, slots=True, kw_only=True)
class HandPublic(PublicFacts):
    """A Hand deal's facts (with :class:`PublicFacts`'), the same for every viewer but
    ``must_use`` (the viewer's own turn only)."""

    deal_no: int
    deals: int
    pot: int
    stake: int
    melds: list[MeldView]
    opened: list[bool]
    must_use: int | None
    hand_win: bool
    deal_scores: list[int] | None
    totals: list[int]
    hands: list[list[int]] | None
    """Every seat's cards once the deal is over (they justify the penalties); else None."""
    payouts: list[int] | None


@dataclass(frozen=True, slots=True)
class SeatSummary:
    """One seat as every viewer sees it."""

    seat: int
    player: str
    cards: int
    """How many cards the seat holds (never which)."""
    deals_won: int
    total: int
    """The seat's points over the deals played (the highest total wins the game)."""


@dataclass(frozen=True, slots=True)
class SeatView:
    """A Hand table as one seat (or a spectator, ``seat is None``) may see it."""

    deal_no: int
    """The deal being played or just played, from 1."""
    phase: str
    """The deal's phase (``draw``, ``play``, ``ended``)."""
    ended: bool
    seats: list[SeatSummary]
    my_cards: list[int]
    """The viewer's own cards (none for a spectator)."""
    discards: list[int]
    turn: int | None
    """The seat to act (``None`` once the deal ended)."""
    actions: list[str]
    """What the viewer may do now (:func:`available_actions`)."""
    commitment: str
    server_seed: str
    """The deal's server seed, hex, once the deal ended (``""`` before)."""
    public: HandPublic
    """Every other fact, the same for every viewer but ``must_use`` (the viewer's turn only)."""


def view_for(
    game: GameState,
    deal: Mapping[str, Any],
    seat: int | None,
    *,
    server_seed_hex: str,
    client_seeds: Sequence[str | None],
) -> SeatView:
    """What ``seat`` (``None``: a spectator) sees of ``game`` while ``deal`` (the stored
    :meth:`DealState.to_dict` of its current deal) is played or just ended."""
    totals = game.totals
    hands: list[list[int]] = deal["hands"]
    wins = [sum(1 for r in game.results if r.winner == s) for s in range(game.seats)]
    seats = [
        SeatSummary(s, p, len(hands[s]), deals_won=wins[s], total=totals[s])
        for s, p in enumerate(game.players)
    ]
    phase = str(deal["phase"])
    ended = phase == Phase.ENDED.value
    turn = int(deal["turn"])
    my_turn = seat is not None and not ended and turn == seat
    scores = deal["scores"]
    public = HandPublic(
        deal_no=int(deal["deal_no"]) + 1,
        deals=game.deals,
        starter=int(deal["starter"]),
        drew=deal["phase"] == Phase.PLAY.value,
        pile=len(deal["stock"]),
        pot=0 if game.finished else game.pot,
        stake=game.stake,
        melds=[
            MeldView(i, str(m["kind"]), list(m["cards"]), m["rank"], m["suit"], int(m["owner"]))
            for i, m in enumerate(deal["melds"])
        ],
        opened=[int(t) >= 0 for t in deal["opened_turn"]],
        must_use=deal["must_use"] if my_turn else None,
        winner=deal["winner"],
        hand_win=bool(deal["hand_win"]),
        deal_scores=None if scores is None else list(scores),
        totals=totals,
        # The deal is over: the hands left are shown to justify the penalties.
        hands=[list(h) for h in hands] if ended else None,
        payouts=game.payouts() if game.finished else None,
        last_round=is_last_deal(game, ended),
        client_seeds=list(client_seeds),
    )
    return SeatView(
        deal_no=int(deal["deal_no"]) + 1,
        phase=phase,
        ended=ended,
        seats=seats,
        my_cards=[] if seat is None else list(hands[seat]),
        discards=list(deal["discard_pile"]),
        turn=None if ended else turn,
        actions=available_actions(deal, seat),
        commitment=str(deal["commitment"]),
        server_seed=server_seed_hex if ended else "",
        public=public,
    )


@dataclass(frozen=True, slots=True)
class Advice:
    """The melds that would lay down the most of a hand now, as ``(kind, card ids)``
    (``run``/``set``), and the cards left over."""

    groups: tuple[tuple[str, tuple[int, ...]], ...]
    loose: tuple[int, ...]


def advice_for(deal: DealState, seat: int) -> Advice:
    """The advice for the seat's hand in a deal being played (each meld with the kind it
    was found as: ``J1 KH J2`` is a run Q K A, not a set of kings)."""
    cards = list(deal.hands[seat])
    melds, _value = best_meld_specs(cards, deal.rules)
    grouped = {c for ids, _kind in melds for c in ids}
    return Advice(
        groups=tuple((kind.value, tuple(ids)) for ids, kind in melds),
        loose=tuple(c for c in cards if c not in grouped),
    )
