"""The table across rounds: seats, starter rotation, streaks, the bowl, last round, closing.

Like the round it is pure data plus pure transitions: ``start_round`` (with a server seed
handed in from the service edge), ``apply_action`` (delegates to the round and keeps the
bowl and streaks as the rules know them) and ``press_last_round``. The bowl here is what
the rules say it holds; the wallet's bowl account follows once the phase batches settle.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from games.kishpa import round as kround
from games.kishpa.bowl import completes_streak, contribution, next_streaks, previous_winner_of
from games.kishpa.errors import IllegalMoveError
from games.kishpa.ruleset import DEFAULT_RULES, RuleSet


@dataclass(slots=True)
class GameState:
    """A table's game: everything that outlives one round, and the current round."""

    players: list[str]
    rules: dict[str, Any]
    next_starter: int = 0
    round_no: int = 0
    streaks: dict[str, int] = field(default_factory=dict)
    bowl: int = 0
    last_round_pressed: bool = False
    closed: bool = False
    round: kround.RoundState | None = None

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able data (a deep copy); the round is nested as its own dict."""
        return asdict(self)

    @classmethod
    def from_dict(cls, obj: dict[str, Any]) -> GameState:
        data = dict(obj)
        data["players"] = list(data["players"])
        data["rules"] = dict(data["rules"])
        data["streaks"] = {str(k): int(v) for k, v in data.get("streaks", {}).items()}
        if data.get("round") is not None:
            data["round"] = kround.RoundState.from_dict(data["round"])
        return cls(**data)

    @property
    def ruleset(self) -> RuleSet:
        return RuleSet(**self.rules)

    @property
    def round_in_progress(self) -> bool:
        return self.round is not None and self.round.phase != kround.ENDED

    @property
    def final_round_next(self) -> bool:
        """Has *last round* been pressed, so that the next round to start is the final one?"""
        return self.last_round_pressed and not self.round_in_progress


def new_game(
    players: list[str], rules: RuleSet = DEFAULT_RULES, first_starter: int = 0
) -> GameState:
    """A fresh table game for these seated players (seat order = list order)."""
    if not rules.min_seats <= len(players) <= rules.max_seats:
        raise IllegalMoveError(
            f"a table seats {rules.min_seats} to {rules.max_seats} players", "BAD_SEATS"
        )
    if len(set(players)) != len(players):
        raise IllegalMoveError("a player cannot take two seats", "BAD_SEATS")
    if not 0 <= first_starter < len(players):
        raise IllegalMoveError("the first starter must be seated", "BAD_SEATS")
    return GameState(
        players=list(players),
        rules=asdict(rules),
        next_starter=first_starter,
        streaks=dict.fromkeys(players, 0),
    )


def start_round(
    game: GameState, server_seed: bytes, client_seeds: list[str | None] | None = None
) -> tuple[GameState, list[kround.Event]]:
    """Deal the next round; the starter rotates clockwise each round."""
    if game.closed:
        raise IllegalMoveError("the table has closed", "TABLE_CLOSED")
    if game.round_in_progress:
        raise IllegalMoveError("a round is still being played", "ROUND_IN_PROGRESS")
    new = GameState.from_dict(game.to_dict())
    starter = new.next_starter
    new.round_no += 1
    new.next_starter = (starter + 1) % len(new.players)
    state, events = kround.new_round(
        new.players,
        starter,
        server_seed,
        client_seeds,
        round_no=new.round_no,
        bowl=new.bowl,
        previous_winner=previous_winner_of(new.streaks, new.ruleset),
        last_round=new.last_round_pressed,
        rules=new.ruleset,
    )
    new.round = state
    events += _after_round_step(new, kround.START_REVEAL)
    return new, events


def apply_action(game: GameState, action: kround.Action) -> tuple[GameState, list[kround.Event]]:
    """Apply a round action and keep the bowl, streaks and closing in step with it."""
    if game.round is None or not game.round_in_progress:
        raise IllegalMoveError("no round is being played", "NO_ROUND")
    before = game.round.phase
    state, events = kround.apply(game.round, action)
    new = GameState.from_dict(game.to_dict())
    new.round = state
    events += _after_round_step(new, before)
    return new, events


def press_last_round(game: GameState) -> tuple[GameState, list[kround.Event]]:
    """The next round to start is the final one (pressing again changes nothing)."""
    if game.closed:
        raise IllegalMoveError("the table has closed", "TABLE_CLOSED")
    if game.last_round_pressed:
        return game, []
    new = GameState.from_dict(game.to_dict())
    new.last_round_pressed = True
    final_round = new.round_no + 1
    return new, [kround.Event("last_round_pressed", data={"final_round": final_round})]


def _after_round_step(game: GameState, phase_before: str) -> list[kround.Event]:
    """Bookkeeping when the round's start phase completes or the round ends."""
    state = game.round
    assert state is not None
    rules = game.ruleset
    events: list[kround.Event] = []
    if phase_before == kround.START_REVEAL and state.phase != kround.START_REVEAL:
        game.bowl += contribution(state.kishpa, rules) * len(game.players)
        events.append(kround.Event("bowl_changed", data={"bowl": game.bowl}))
    if phase_before != kround.ENDED and state.phase == kround.ENDED:
        winner = None if state.winner is None else game.players[state.winner]
        took = completes_streak(winner, state.previous_winner, rules)
        game.streaks = next_streaks(game.streaks, winner, took)
        if took or state.last_round:
            game.bowl = 0
            events.append(kround.Event("bowl_changed", data={"bowl": 0}))
        if state.last_round:
            game.closed = True
            events.append(kround.Event("table_closed", data={"rounds": game.round_no}))
    return events
