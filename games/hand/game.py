"""A game of Hand across deals: seats, the starter's rotation, totals, the pot.

A game is ``rules.deals_per_game`` deals (7 by default). Every player buys the stake into
the pot when the game starts; when the last deal is recorded the pot is paid out by the
totals (see ``pot``). The state is stored by the table service as :meth:`GameState.to_dict`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from games.hand.deal import new_deal
from games.hand.deal_state import DealState, Phase
from games.hand.errors import HandMoveError, Reason
from games.hand.events import Event
from games.hand.ledger import Posting, buy_in_postings, payout_postings
from games.hand.pot import split_pot
from games.hand.ruleset import DEFAULT_RULES, RuleSet
from games.table import BadTableRequest


@dataclass(frozen=True, slots=True)
class DealResult:
    """What a finished deal adds to the game."""

    deal_no: int
    starter: int
    winner: int | None
    hand_win: bool
    scores: tuple[int, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "deal_no": self.deal_no,
            "starter": self.starter,
            "winner": self.winner,
            "hand": self.hand_win,
            "scores": list(self.scores),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DealResult:
        winner = data["winner"]
        return cls(
            deal_no=int(data["deal_no"]),
            starter=int(data["starter"]),
            winner=None if winner is None else int(winner),
            hand_win=bool(data["hand"]),
            scores=tuple(int(s) for s in data["scores"]),
        )


@dataclass(frozen=True, slots=True)
class GameState:
    """The table across deals."""

    players: tuple[str, ...]
    stake: int
    rules: RuleSet = DEFAULT_RULES
    first_starter: int = 0
    results: tuple[DealResult, ...] = field(default=())
    ends_after: int = 0
    """The game ends after this many deals instead of ``rules.deals_per_game`` (0: it
    does not): every player left a table where only bots remain (:func:`end_early`)."""

    @property
    def seats(self) -> int:
        return len(self.players)

    @property
    def pot(self) -> int:
        return self.stake * self.seats

    @property
    def deals_played(self) -> int:
        return len(self.results)

    @property
    def deals(self) -> int:
        """How many deals this game has: the rules' number, or fewer once it ended early."""
        return min(self.ends_after or self.rules.deals_per_game, self.rules.deals_per_game)

    @property
    def finished(self) -> bool:
        return self.deals_played >= self.deals

    @property
    def totals(self) -> list[int]:
        """Each seat's points summed over the deals played."""
        return [sum(r.scores[s] for r in self.results) for s in range(self.seats)]

    @property
    def next_starter(self) -> int:
        """The starter of the next deal: one seat clockwise each deal."""
        return (self.first_starter + self.deals_played) % self.seats

    def leaders(self) -> list[int]:
        """The seats with the highest total (more than one on a tie)."""
        totals = self.totals
        best = max(totals)
        return [s for s, t in enumerate(totals) if t == best]

    def payouts(self) -> list[int]:
        """Tokens each seat would receive if the game ended now."""
        return split_pot(self.totals, self.pot, self.rules)

    def to_dict(self) -> dict[str, Any]:
        return {
            "players": list(self.players),
            "stake": self.stake,
            "rules": self.rules.to_dict(),
            "first_starter": self.first_starter,
            "results": [r.to_dict() for r in self.results],
            **({"ends_after": self.ends_after} if self.ends_after else {}),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GameState:
        try:
            return start_game(
                [str(p) for p in data["players"]],
                int(data["stake"]),
                RuleSet.from_dict(dict(data["rules"])),
                first_starter=int(data["first_starter"]),
                results=[DealResult.from_dict(r) for r in data["results"]],
                ends_after=int(data.get("ends_after") or 0),
            )[0]
        except (KeyError, TypeError, ValueError) as exc:
            raise HandMoveError(f"malformed game state: {exc}", Reason.INVALID_STATE) from exc


def start_game(
    players: Sequence[str],
    stake: int,
    rules: RuleSet = DEFAULT_RULES,
    *,
    first_starter: int = 0,
    results: Sequence[DealResult] = (),
    ends_after: int = 0,
) -> tuple[GameState, list[Posting]]:
    """A new game and its buy-in postings (every player pays the stake into the pot)."""
    if not rules.min_seats <= len(players) <= rules.max_seats:
        raise HandMoveError(
            f"Hand is played by {rules.min_seats}-{rules.max_seats} players", Reason.UNKNOWN_SEAT
        )
    if not 0 <= first_starter < len(players):
        raise HandMoveError(f"no seat {first_starter} to start", Reason.UNKNOWN_SEAT)
    postings = buy_in_postings(players, stake)
    if len(results) > rules.deals_per_game or any(len(r.scores) != len(players) for r in results):
        raise ValueError("deal results do not fit this game")
    game = GameState(tuple(players), stake, rules, first_starter, tuple(results), ends_after)
    return game, postings


def start_deal(
    game: GameState, server_seed: bytes, client_seeds: Sequence[str | None] = ()
) -> tuple[DealState, list[Event]]:
    """Deal the game's next deal from a fresh server seed (and the players' client seeds)."""
    if game.finished:
        raise HandMoveError("the game is over", Reason.GAME_OVER)
    return new_deal(
        server_seed,
        client_seeds,
        game.seats,
        game.next_starter,
        game.rules,
        deal_no=game.deals_played,
    )


def record_deal(game: GameState, deal: DealState) -> tuple[GameState, list[Event]]:
    """Add a finished deal's scores; after the last deal the game is over.

    The events say the deal's scores and the totals; the last one also the pot's payout.
    """
    if game.finished:
        raise HandMoveError("the game is over", Reason.GAME_OVER)
    if deal.phase is not Phase.ENDED or deal.scores is None:
        raise HandMoveError("the deal is still being played", Reason.INVALID_STATE)
    if deal.rules != game.rules:
        raise HandMoveError("the deal was played under other rules", Reason.INVALID_STATE)
    if deal.deal_no != game.deals_played or deal.seats != game.seats:
        raise HandMoveError(
            f"deal {deal.deal_no} is not this game's next deal ({game.deals_played})",
            Reason.INVALID_STATE,
        )
    result = DealResult(deal.deal_no, deal.starter, deal.winner, deal.hand_win, tuple(deal.scores))
    new = replace(game, results=(*game.results, result))
    events = [Event("deal_scored", data={**result.to_dict(), "totals": new.totals})]
    if new.finished:
        events.append(game_ended_event(new))
    return new, events


def game_ended_event(game: GameState) -> Event:
    """``game_ended``: the final totals, the leaders and the pot's payout."""
    data: dict[str, Any] = {
        "totals": game.totals,
        "winners": game.leaders(),
        "pot": game.pot,
        "payouts": game.payouts(),
    }
    if game.deals < game.rules.deals_per_game:
        data["ended_early"] = True
    return Event("game_ended", data=data)


def end_early(game: GameState, deal_ended: bool) -> GameState:
    """Every player left a table where only bots remain: with ``abandoned_ends_with_deal``
    the game ends with the deal in progress (``deal_ended``: between deals, with the deal
    just played). Unchanged when the ruling is off or the game is over already."""
    if game.finished or not game.rules.abandoned_ends_with_deal:
        return game
    return replace(game, ends_after=game.deals_played + (0 if deal_ended else 1))


def game_payout_postings(game: GameState) -> list[Posting]:
    """The pot's payout by the final totals (only once every deal is played)."""
    if not game.finished:
        raise HandMoveError("the game is still being played", Reason.INVALID_STATE)
    return payout_postings(game.players, game.totals, game.pot, game.rules)


def check_table(seats: int, stake: int, rules: RuleSet = DEFAULT_RULES) -> None:
    """A Hand table seats ``min_seats``-``max_seats`` players; the stake is never negative."""
    if not rules.min_seats <= seats <= rules.max_seats:
        raise BadTableRequest(
            f"Hand seats {rules.min_seats}-{rules.max_seats} players", "BAD_SEATS"
        )
    if stake < 0:
        raise BadTableRequest("the stake is never negative", "BAD_STAKE")


def started_event(game: GameState) -> Event:
    """``game_started``: every player bought the stake into the pot; the deals to come."""
    return Event(
        "game_started",
        data={
            "game": "hand",
            "stake": game.stake,
            "pot": game.pot,
            "deals": game.rules.deals_per_game,
            "players": list(game.players),
        },
    )


def seed_revealed_event(
    server_seed_hex: str, commitment: str, client_seeds: Sequence[str | None]
) -> Event:
    """``seed_revealed``: a finished deal's server seed and the client seeds mixed into its
    shuffle, so anyone can recompute its deck."""
    data = {
        "server_seed": server_seed_hex,
        "commitment": commitment,
        "client_seeds": list(client_seeds),
    }
    return Event("seed_revealed", data=data)


def is_last_deal(game: GameState, deal_ended: bool) -> bool:
    """Is the deal being played (or, once ended, the one just played) the game's last?"""
    return game.deals_played + (0 if deal_ended else 1) >= game.deals


def available_actions(deal: Mapping[str, Any], seat: int | None) -> list[str]:
    """What the seat may do now, read from a stored deal (:meth:`DealState.to_dict`):
    ``draw``; then ``lay_melds``, once opened ``lay_off``/``release_joker``, ``discard``
    unless a picked-up discard must be used first, ``undo_turn`` when there is one."""
    if seat is None or deal["phase"] == Phase.ENDED.value or int(deal["turn"]) != seat:
        return []
    if deal["phase"] == Phase.DRAW.value:
        return ["draw"]
    actions = ["lay_melds"]
    if int(deal["opened_turn"][seat]) >= 0:
        actions += ["lay_off", "release_joker"]
    if deal["must_use"] is None:
        actions.append("discard")
    if deal["undo"] is not None:
        actions.append("undo_turn")
    return actions
