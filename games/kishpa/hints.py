"""Advice for a hand: the solver's best arrangement, the loose tiles, any winning discards."""

from __future__ import annotations

from dataclasses import dataclass

from games.kishpa import round as kround
from games.kishpa.solver import best_arrangement, winning_discards
from games.kishpa.tiles import face_of


@dataclass(frozen=True, slots=True)
class Advice:
    """Groups as ``(kind, tile ids)`` (``run``/``set``), loose tile ids, and the tiles whose
    discard wins, best-paying first."""

    groups: tuple[tuple[str, tuple[int, ...]], ...]
    loose: tuple[int, ...]
    winning_discards: tuple[int, ...]


def advice_for(state: kround.RoundState, seat: int) -> Advice:
    """The solver's advice for the seat's hand (the winning arrangement when one wins)."""
    ids = list(state.hands[seat])
    faces = [face_of(t) for t in ids]
    rules = state.ruleset
    groups = best_arrangement(faces, state.joker, rules)
    winners: list[int] = []
    if len(ids) == rules.hand_size + 1:
        wins = winning_discards(faces, state.kishpa, rules)
        winners = [ids[w.position] for w in sorted(wins, key=lambda w: -w.payout_per_loser)]
        if wins:  # show the arrangement that wins (the best-paying one)
            groups = max(wins, key=lambda w: w.payout_per_loser).arrangement
    grouped = {p for g in groups for p in g.positions}
    return Advice(
        groups=tuple((g.kind, tuple(ids[p] for p in g.positions)) for g in groups),
        loose=tuple(ids[p] for p in range(len(ids)) if p not in grouped),
        winning_discards=tuple(winners),
    )
