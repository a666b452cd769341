"""The table across rounds: the starter's rotation, streaks, the bowl, last round, closing.

The one place these rules live (the table service's Kishpa engine only translates). Like the
round it is pure data plus pure transitions:

* :func:`new_game` — a table's game for its seated players;
* :func:`start_round` — deal the next round (with a server seed handed in from the service
  edge); a table where every seat is on auto-play makes it the last one;
* :func:`apply_action` — a round action, keeping the bowl and the streaks as the rules know
  them: the contributions go in once the start phase is over, and when the round ends the
  bowl is taken (two wins in a row), split (the last round) or kept;
* :func:`press_last_round` — the next round to start is the final one;
* :func:`autoplay_turn` — the turn of a seat on auto-play (``games.kishpa.autoplay``).

Events are :class:`games.kishpa.round.Event` values, in the table stream's vocabulary:
``bowl`` ``{outcome: kept|taken|split, amount, bowl, winner, streaks}`` when a round ends and
``last_round_pressed`` ``{next_round[, reason]}``. The bowl here is what the rules say it
holds; the wallet's bowl account follows once the phase batches settle.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from collections.abc import Collection

from games.fair import SERVER_SEED_BYTES, FairStream
from games.kishpa import bot
from games.kishpa import round as kround
from games.kishpa.autoplay import AUTOPLAY_TAG, autoplay_action
from games.kishpa.bowl import completes_streak, contribution, next_streaks, previous_winner_of
from games.kishpa.errors import IllegalMoveError
from games.kishpa.payouts import win_payout
from games.kishpa.ruleset import DEFAULT_RULES, RuleSet, rules_dict, ruleset_from
from games.kishpa.tiles import face_of

KEPT = "kept"
TAKEN = "taken"
SPLIT = "split"
ABANDONED = "every seat on auto-play"
"""The reason of a last round the table pressed by itself."""
MAX_AUTOPLAY_MOVES = 3
"""An auto-played turn is at most a draw, a discard or a win, and a timeout."""


@dataclass(slots=True)
class GameState:
    """A table's game: everything that outlives one round, and the current round."""

    players: list[str]
    rules: dict[str, Any]
    next_starter: int = 0
    round_no: int = 0
    streaks: dict[str, int] = field(default_factory=dict)
    wins: dict[str, int] = field(default_factory=dict)
    """Rounds won per player."""
    bowl: int = 0
    """What the bowl holds now: the carried bowl during the start phase, plus this round's
    contributions once it is over, and after the round ends what it leaves behind."""
    bowl_outcome: str | None = None
    """How the last ended round left the bowl (``kept``, ``taken``, ``split``)."""
    last_round_pressed: bool = False
    closed: bool = False
    round: kround.RoundState | None = None

    def to_dict(self) -> dict[str, Any]:
        """The stored form (JSON-able), as the table service has always stored it::

            {"round": <RoundState dict> | None, "round_no": int, "starter": int,
             "bowl_before": int, "bowl_after": int | None, "bowl_outcome": str | None,
             "streaks": {player: int}, "wins": {player: int}, "last_round_pressed": bool}

        Replicas of older and newer code share live tables, so the shape does not change;
        the players and the rules are the table's (see :meth:`from_dict`).
        """
        state = self.round
        ended = state is not None and state.phase == kround.ENDED
        return {
            "round": None if state is None else state.to_dict(),
            "round_no": self.round_no,
            "starter": self.next_starter if state is None else state.starter,
            "bowl_before": self.bowl if state is None else state.bowl,
            "bowl_after": self.bowl if ended else None,
            "bowl_outcome": self.bowl_outcome,
            "streaks": dict(self.streaks),
            "wins": dict(self.wins),
            "last_round_pressed": self.last_round_pressed,
        }

    @classmethod
    def from_dict(
        cls, obj: dict[str, Any], players: list[str], rules: RuleSet = DEFAULT_RULES
    ) -> GameState:
        """Read :meth:`to_dict` back for the table's seated ``players`` and its ``rules``
        (the rules of the rounds still to deal; a round keeps its own)."""
        raw = obj.get("round")
        state = None if raw is None else kround.RoundState.from_dict(raw)
        starter = int(obj.get("starter", 0))
        bowl = int(obj.get("bowl_before") or 0)
        if state is not None:
            if state.phase == kround.ENDED:
                bowl = int(obj.get("bowl_after") or 0)
            elif state.phase != kround.START_REVEAL:
                bowl = state.bowl + contribution(state.kishpa, state.ruleset) * len(players)
            else:
                bowl = state.bowl
        return cls(
            players=list(players),
            rules=rules_dict(rules),
            next_starter=starter if state is None else (starter + 1) % len(players),
            round_no=int(obj.get("round_no", 0)),
            streaks={str(k): int(v) for k, v in obj.get("streaks", {}).items()},
            wins={str(k): int(v) for k, v in obj.get("wins", {}).items()},
            bowl=bowl,
            bowl_outcome=obj.get("bowl_outcome"),
            last_round_pressed=bool(obj.get("last_round_pressed", False)),
            closed=state is not None and state.phase == kround.ENDED and state.last_round,
            round=state,
        )

    @property
    def ruleset(self) -> RuleSet:
        return ruleset_from(self.rules)

    @property
    def round_in_progress(self) -> bool:
        return self.round is not None and self.round.phase != kround.ENDED

    @property
    def final_round_next(self) -> bool:
        """Has *last round* been pressed, so that the next round to start is the final one?"""
        return self.last_round_pressed and not self.round_in_progress


def _copy(game: GameState, round_state: kround.RoundState | None) -> GameState:
    """A new state sharing nothing mutable with ``game`` (the round is replaced, not copied)."""
    return replace(
        game,
        players=list(game.players),
        rules=dict(game.rules),
        streaks=dict(game.streaks),
        wins=dict(game.wins),
        round=round_state,
    )


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
        rules=rules_dict(rules),
        next_starter=first_starter,
        streaks=dict.fromkeys(players, 0),
        wins=dict.fromkeys(players, 0),
    )


def start_round(
    game: GameState,
    server_seed: bytes,
    client_seeds: list[str | None] | None = None,
    *,
    abandoned: bool = False,
) -> tuple[GameState, list[kround.Event]]:
    """Deal the next round; the starter rotates clockwise each round.

    ``abandoned`` (every seat on auto-play: nobody plays any more) presses *last round* now,
    so the bowl is paid out and the table closes instead of bots playing it forever; the
    ``last_round_pressed`` event then comes first, before the deal.
    """
    if game.closed:
        raise IllegalMoveError("the table has closed", "TABLE_CLOSED")
    if game.round_in_progress:
        raise IllegalMoveError("a round is still being played", "ROUND_IN_PROGRESS")
    new = _copy(game, None)
    events: list[kround.Event] = []
    if abandoned and not new.last_round_pressed:
        new.last_round_pressed = True
        data = {"next_round": new.round_no + 1, "reason": ABANDONED}
        events.append(kround.Event("last_round_pressed", data=data))
    starter = new.next_starter
    new.round_no += 1
    new.next_starter = (starter + 1) % len(new.players)
    new.bowl_outcome = None
    state, dealt = kround.new_round(
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
    events += dealt
    events += _after_round_step(new, kround.START_REVEAL)
    return new, events


def apply_action(game: GameState, action: kround.Action) -> tuple[GameState, list[kround.Event]]:
    """Apply a round action and keep the bowl, streaks and closing in step with it."""
    if game.round is None or not game.round_in_progress:
        raise IllegalMoveError("the round is over; the next one starts shortly", "ROUND_ENDED")
    before = game.round.phase
    state, events = kround.apply(game.round, action)
    new = _copy(game, state)
    events += _after_round_step(new, before)
    return new, events


def autoplay_turn(
    game: GameState, seat: int, seed: bytes, level: str = bot.NORMAL
) -> tuple[GameState, list[kround.Event]]:
    """Play the whole turn of a seat on auto-play (draw, then discard or win; else the turn
    times out), with the policy of :func:`games.kishpa.autoplay.autoplay_action` at the bots'
    ``level`` (``easy``/``normal``)."""
    stream = FairStream(seed, (), AUTOPLAY_TAG)
    events: list[kround.Event] = []
    for _ in range(MAX_AUTOPLAY_MOVES):
        if game.round is None:
            break
        move = autoplay_action(game.round, seat, stream, level)
        if move is None:
            break
        game, more = apply_action(game, move)
        events += more
    if game.round is not None and _turn_of(game.round) == seat:
        game, more = apply_action(game, kround.TurnTimeout(seat))
        events += more
    return game, events


def bots_in_window(
    game: GameState, bot_seats: Collection[int]
) -> tuple[GameState, list[kround.Event]]:
    """The table's own bots reveal or pass as soon as a reveal window waits for them, so a
    window with bots lasts only as long as its human players take.

    The window waits for every seat that might hold the kishpa, so a bot's prompt answer
    tells nobody anything about its hand. No randomness is drawn (the stream is unused).
    """
    events: list[kround.Event] = []
    if not bot_seats:
        return game, events
    stream = FairStream(bytes(SERVER_SEED_BYTES), (), AUTOPLAY_TAG)
    for _ in range(2 * len(game.players)):  # a start window may be followed by another
        state = game.round
        if state is None or kround.waiting_for(state) != "window":
            break
        move = None
        for seat in [s for s in kround.window_waits_for(state) if s in bot_seats]:
            move = bot.choose_action(kround.view_for(state, seat), stream, state.ruleset)
            if move is not None:
                break
        if move is None:
            break
        game, more = apply_action(game, move)
        events += more
    return game, events


def _turn_of(state: kround.RoundState) -> int | None:
    return state.turn if state.phase in (kround.FIRST_DISCARD, kround.TURNS) else None


def abandon(game: GameState) -> tuple[GameState, list[kround.Event]]:
    """Every player left (only bots remain): with ``abandoned_ends_with_round`` the round in
    progress becomes the last one (``last_round_pressed`` for it, reason ``abandoned``);
    between rounds, or with the ruling off, nothing changes here and :func:`start_round`
    presses last round for the next round."""
    state = game.round
    if (
        game.closed
        or state is None
        or not game.round_in_progress
        or state.last_round
        or not game.ruleset.abandoned_ends_with_round
    ):
        return game, []
    new = _copy(game, replace(state, last_round=True))
    new.last_round_pressed = True
    data = {"next_round": new.round_no, "reason": ABANDONED}
    return new, [kround.Event("last_round_pressed", data=data)]


def press_last_round(game: GameState) -> tuple[GameState, list[kround.Event]]:
    """The next round to start is the final one (pressing it twice is refused)."""
    if game.closed:
        raise IllegalMoveError("the table has closed", "TABLE_CLOSED")
    if game.last_round_pressed or (game.round is not None and game.round.last_round):
        raise IllegalMoveError("last round was already pressed", "ALREADY_PRESSED")
    new = _copy(game, game.round)
    new.last_round_pressed = True
    return new, [kround.Event("last_round_pressed", data={"next_round": new.round_no + 1})]


def _after_round_step(game: GameState, phase_before: str) -> list[kround.Event]:
    """Bookkeeping when the round's start phase completes or the round ends."""
    state = game.round
    assert state is not None
    rules = game.ruleset
    events: list[kround.Event] = []
    if phase_before == kround.START_REVEAL and state.phase != kround.START_REVEAL:
        game.bowl += contribution(state.kishpa, rules) * len(game.players)
    if phase_before != kround.ENDED and state.phase == kround.ENDED:
        winner = None if state.winner is None else game.players[state.winner]
        amount = game.bowl
        took = completes_streak(winner, state.previous_winner, rules) and amount > 0
        game.streaks = next_streaks(game.streaks, winner, took)
        if winner is not None:
            game.wins[winner] = game.wins.get(winner, 0) + 1
        outcome = TAKEN if took else SPLIT if state.last_round else KEPT
        if outcome != KEPT:
            game.bowl = 0
        game.bowl_outcome = outcome
        if state.last_round:
            game.closed = True
        events.append(
            kround.Event(
                "bowl",
                seat=-1 if state.winner is None else state.winner,
                data={
                    "outcome": outcome,
                    "amount": amount,
                    "bowl": game.bowl,
                    "winner": winner,
                    "streaks": dict(game.streaks),
                },
            )
        )
    return events


def available_actions(game: GameState, seat: int | None) -> list[str]:
    """What the seat may do now: ``draw``; ``discard``/``win``; ``reveal``/``decline_reveal``.

    In a reveal window every seat the window waits for may pass, so that nobody learns who
    holds the kishpa from who is asked.
    """
    state = game.round
    if seat is None or state is None:
        return []
    if state.phase in (kround.START_REVEAL, kround.END_REVEAL):
        if seat in kround.eligible_to_reveal(state):
            return ["reveal", "decline_reveal"]
        if seat in kround.window_waits_for(state):
            return ["decline_reveal"]
        return []
    if _turn_of(state) != seat:
        return []
    if state.phase == kround.TURNS and not state.drew:
        return ["draw"]
    return ["discard", "win"]


def round_win_payout(state: kround.RoundState) -> int:
    """What every loser pays the round's winner (0 when nobody won)."""
    if state.winner is None or state.final_discard is None:
        return 0
    hand = [face_of(t) for t in state.hands[state.winner]]
    return win_payout(hand, face_of(state.final_discard), state.kishpa, state.ruleset)
