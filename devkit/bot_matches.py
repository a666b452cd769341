"""Seeded games between house bots of different levels, played on the pure rules engines.

What ``benchmarks/bench_bots.py`` measures and ``tests/unit/test_bot_levels.py`` checks: does
the solver bot (``normal``) beat the draw-and-discard bot (``easy``)? Two seats, one bot of
each level; who starts alternates from game to game so neither level keeps the starter's
extra tile.

* A Kishpa game is one round (the money is settled round by round); its winner is the
  round's winner, or nobody when the pile runs out.
* A Hand game is the table's whole game of ``deals_per_game`` deals (7); its winner is the
  seat with the highest total, or nobody on a tie for first.

Every move goes through the rules' own ``apply``, which refuses an illegal one: a bot that
proposed an illegal move would raise here. Nothing reads a clock or draws randomness it was
not handed (the seeds name the decks and the bots' tie-breaks).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from games import hand as hand_rules
from games.fair import SERVER_SEED_BYTES, FairStream
from games.hand.bot import play_bot_turn
from games.kishpa import bot as kishpa_bot
from games.kishpa import round as kround

MAX_ROUND_ACTIONS = 1000
"""A Kishpa round is far shorter (106 tiles); the cap turns a stuck bot into an error."""


@dataclass(frozen=True, slots=True)
class GameOutcome:
    """Who won one game: the winning seat (and its level), or ``None`` (pile out, tie for
    first); who started; how long it took and, at Hand, the deals each seat won and its
    total."""

    winner: str | None
    starter_level: str
    winner_seat: int | None = None
    turns: int = 0
    deals_won: tuple[int, ...] = ()
    totals: tuple[int, ...] = ()


def seed_for(game: str, index: int, part: int = 0) -> bytes:
    """The seed of a benchmark game's deal (``part``: the deal number within a Hand game)."""
    digest = hashlib.sha512(f"bot-matches/{game}/{index}/{part}".encode()).digest()
    return (digest * 2)[:SERVER_SEED_BYTES]


def kishpa_game(levels: Sequence[str], index: int) -> GameOutcome:
    """One Kishpa round between bots of ``levels`` (one per seat); seat ``index % seats``
    starts."""
    seats = len(levels)
    starter = index % seats
    seed = seed_for("kishpa", index)
    players = [f"{level}-{seat}" for seat, level in enumerate(levels)]
    state, _ = kround.new_round(players, starter, seed, [None] * seats)
    stream = FairStream(seed, (), kishpa_bot.BOT_TAG)
    rules = state.ruleset
    for _ in range(MAX_ROUND_ACTIONS):
        if state.phase == kround.ENDED:
            winner = None if state.winner is None else levels[state.winner]
            return GameOutcome(winner, levels[starter], state.winner, state.turns_played)
        action: kround.Action | None = None
        for seat in kround.seats_to_act(state):
            action = kishpa_bot.action_at(levels[seat], kround.view_for(state, seat), stream, rules)
            if action is not None:
                break
        # A window nobody acts in closes (its timer, at a table).
        state, _ = kround.apply(state, action if action is not None else kround.CloseWindow())
    raise AssertionError(f"Kishpa game {index} did not end in {MAX_ROUND_ACTIONS} actions")


def hand_game(levels: Sequence[str], index: int) -> GameOutcome:
    """One whole game of Hand between bots of ``levels``; seat ``index % seats`` starts the
    first deal (the starter then rotates as at a table)."""
    seats = len(levels)
    players = [f"{level}-{seat}" for seat, level in enumerate(levels)]
    game, _ = hand_rules.start_game(players, 1, first_starter=index % seats)
    starter_level = levels[index % seats]
    deal_no = 0
    turns = 0
    while not game.finished:
        seed = seed_for("hand", index, deal_no)
        deal, _ = hand_rules.start_deal(game, seed)
        stream = FairStream(seed, (), "bot-matches/hand")
        while deal.phase is not hand_rules.Phase.ENDED:
            deal, _ = play_bot_turn(deal, stream, levels[deal.turn])
        game, _ = hand_rules.record_deal(game, deal)
        turns += deal.turn_no + 1
        deal_no += 1
    leaders = game.leaders()
    seat = leaders[0] if len(leaders) == 1 else None
    deals_won = tuple(sum(r.winner == s for r in game.results) for s in range(seats))
    return GameOutcome(
        None if seat is None else levels[seat],
        starter_level,
        seat,
        turns,
        deals_won,
        tuple(game.totals),
    )


GAMES = {"kishpa": kishpa_game, "hand": hand_game}
"""The game runners by the table's game name."""
