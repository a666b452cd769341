"""What each viewer of a Kishpa table sees, and the advice a seat may ask for.

What stays hidden is decided here (through :func:`games.kishpa.round.view_for`): another
seat's tiles (only their count), the pile's order (only its size), who may reveal (only to
that seat) and the round's server seed (until the round is over).
"""

from __future__ import annotations

from dataclasses import dataclass

from games.kishpa.game import GameState, available_actions, round_win_payout
from games.kishpa.round import ENDED, view_for, winning_group_kinds
from games.view import PublicFacts


@dataclass(frozen=True, slots=True, kw_only=True)
class KishpaPublic(PublicFacts):
    """A Kishpa round's facts, the same for every viewer (with :class:`PublicFacts`')."""

    kishpa_ids: list[int]
    """The kishpas turned this round, first to last (the last one counts)."""
    kishpa: str
    kishpas: list[str]
    joker: str
    start_reveal: int | None
    end_reveal: int | None
    final_discard: str | None
    final_discard_id: int | None
    winning_groups: list[list[int]]
    winning_group_kinds: list[str]
    win_payout: int
    bowl_taken: bool


@dataclass(frozen=True, slots=True)
class SeatSummary:
    """One seat as every viewer sees it."""

    seat: int
    player: str
    tiles: int
    """How many tiles the seat holds (never which)."""
    streak: int
    rounds_won: int


@dataclass(frozen=True, slots=True)
class SeatView:
    """A Kishpa table as one seat (or a spectator, ``seat is None``) may see it."""

    round_no: int
    phase: str
    """The round's phase (``start_reveal``, ``first_discard``, ``turns``, ``end_reveal``,
    ``ended``)."""
    ended: bool
    seats: list[SeatSummary]
    my_tiles: list[int]
    """The viewer's own tiles (none for a spectator)."""
    discards: list[int]
    turn: int | None
    """The seat to act (``None`` outside the turns)."""
    actions: list[str]
    commitment: str
    server_seed: str
    """The round's server seed, hex, once the round ended (``""`` before)."""
    public: KishpaPublic
    """Every other fact, the same for every viewer."""


def table_view(game: GameState, seat: int | None) -> SeatView | None:
    """What ``seat`` (``None``: a spectator) sees of ``game``; None before the first deal."""
    state = game.round
    if state is None:
        return None
    raw = view_for(state, seat)
    seats = [
        SeatSummary(s, p, len(state.hands[s]), game.streaks.get(p, 0), game.wins.get(p, 0))
        for s, p in enumerate(state.players)
    ]
    public = KishpaPublic(
        kishpa_ids=list(state.kishpa_tiles),
        kishpa=raw["kishpa"],
        kishpas=raw["kishpas"],
        joker=raw["joker"],
        starter=state.starter,
        drew=state.drew,
        pile=raw["pile"],
        bowl=game.bowl,
        last_round=state.last_round,
        last_round_pressed=game.last_round_pressed,
        start_reveal=raw["start_reveal"],
        end_reveal=raw["end_reveal"],
        winner=raw["winner"],
        final_discard=raw["final_discard"],
        winning_groups=[list(g) for g in state.winning_groups],
        winning_group_kinds=winning_group_kinds(state),
        final_discard_id=state.final_discard,
        win_payout=round_win_payout(state),
        bowl_taken=game.bowl_outcome == "taken",
        client_seeds=raw["client_seeds"],
    )
    return SeatView(
        round_no=state.round_no,
        phase=state.phase,
        ended=state.phase == ENDED,
        seats=seats,
        my_tiles=[] if seat is None else list(state.hands[seat]),
        discards=list(state.discards),
        turn=raw["turn"],
        actions=available_actions(game, seat),
        commitment=state.commitment,
        server_seed=raw["server_seed"] or "",
        public=public,
    )
