"""The table across rounds: rotation, streaks, bowl, last round, and tokens conserved."""

from __future__ import annotations

import hashlib
import json
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from games.fair import FairStream
from games.kishpa import round as kround
from games.kishpa.bot import BOT_TAG, choose_action
from games.kishpa.errors import IllegalMoveError
from games.kishpa.game import GameState, apply_action, new_game, press_last_round, start_round
from games.kishpa.ledger import BOWL, Posting
from games.kishpa.record import end_postings, start_postings

pytestmark = pytest.mark.unit

PLAYERS = ["ann", "ben", "cat", "dan"]


def seed_of(text: str) -> bytes:
    return hashlib.sha512(text.encode()).digest() + bytes(16)


def play_round(game: GameState, seed: bytes) -> tuple[GameState, list[Posting], list[Posting]]:
    """Start and finish one round with bots; returns the start and end postings."""
    game, _ = start_round(game, seed, [None] * len(game.players))
    stream = FairStream(seed, [], BOT_TAG)
    start: list[Posting] | None = None
    while game.round_in_progress:
        state = game.round
        assert state is not None
        if start is None and state.phase != kround.START_REVEAL:
            start = start_postings(kround.start_record(state))
        action = None
        for seat in kround.seats_to_act(state):
            action = choose_action(kround.view_for(state, seat), stream)
            if action is not None:
                break
        game, _ = apply_action(game, action if action is not None else kround.CloseWindow())
    assert game.round is not None
    if start is None:
        start = start_postings(kround.start_record(game.round))
    return game, start, end_postings(kround.end_record(game.round))


def apply_postings(balances: Counter[str], postings: list[Posting]) -> None:
    for posting in postings:
        balances[posting.from_account] -= posting.amount
        balances[posting.to_account] += posting.amount


def test_the_starter_rotates_clockwise() -> None:
    game = new_game(PLAYERS, first_starter=2)
    starters = []
    for k in range(5):
        game, _, _ = play_round(game, seed_of(f"rot-{k}"))
        assert game.round is not None
        starters.append(game.round.starter)
    assert starters == [2, 3, 0, 1, 2]


def test_a_round_cannot_start_while_one_is_played_and_state_round_trips() -> None:
    game, _ = start_round(new_game(PLAYERS), seed_of("busy"))
    with pytest.raises(IllegalMoveError) as info:
        start_round(game, seed_of("again"))
    assert info.value.reason == "ROUND_IN_PROGRESS"
    stored = json.loads(json.dumps(game.to_dict()))
    assert GameState.from_dict(stored, game.players, game.ruleset) == game


def test_bad_tables_are_refused() -> None:
    for players in (["solo"], ["a", "a"], ["a", "b", "c", "d", "e"]):
        with pytest.raises(IllegalMoveError) as info:
            new_game(players)
        assert info.value.reason == "BAD_SEATS"


def test_last_round_pressed_mid_round_makes_the_next_round_final_then_the_table_closes() -> None:
    game, _ = start_round(new_game(PLAYERS), seed_of("lr-1"))
    game, events = press_last_round(game)
    # The table service's vocabulary: the event names the round that will be the last.
    assert [(e.type, e.data) for e in events] == [("last_round_pressed", {"next_round": 2})]
    with pytest.raises(IllegalMoveError) as again:
        press_last_round(game)
    assert again.value.reason == "ALREADY_PRESSED"
    assert game.round is not None
    assert not game.round.last_round  # the round being played is not the final one
    # Finish round 1 by timeouts (nobody wins), then play the final round.
    while game.round_in_progress:
        state = game.round
        assert state is not None
        waiting = kround.waiting_for(state)
        action = kround.TurnTimeout(state.turn) if waiting == "turn" else kround.CloseWindow()
        game, _ = apply_action(game, action)
    assert not game.closed
    bowl_before = game.bowl
    game, _, end = play_round(game, seed_of("lr-2"))
    assert game.round is not None
    assert game.round.last_round
    assert game.closed
    assert game.bowl == 0
    contributions = 4 * (2 if game.round.kishpa.number == 1 else 1)
    paid_out = sum(p.amount for p in end if p.from_account == BOWL)
    assert paid_out == bowl_before + contributions
    with pytest.raises(IllegalMoveError) as info:
        start_round(game, seed_of("lr-3"))
    assert info.value.reason == "TABLE_CLOSED"


def test_no_winner_breaks_every_streak_and_the_bowl_stays() -> None:
    game = new_game(PLAYERS)
    game.streaks["ben"] = 1
    game, _ = start_round(game, seed_of("nowin"))
    assert game.round is not None
    assert game.round.previous_winner == "ben"
    bowl_after_start = None
    while game.round_in_progress:
        state = game.round
        assert state is not None
        if state.phase != kround.START_REVEAL and bowl_after_start is None:
            bowl_after_start = game.bowl
        waiting = kround.waiting_for(state)
        action = kround.TurnTimeout(state.turn) if waiting == "turn" else kround.CloseWindow()
        game, _ = apply_action(game, action)
    assert game.round is not None
    assert game.round.winner is None
    assert game.streaks == dict.fromkeys(PLAYERS, 0)
    assert game.bowl == bowl_after_start
    assert game.bowl in (4, 8)


@settings(max_examples=6)
@given(tag=st.text(min_size=1, max_size=8), seats=st.integers(2, 4), rounds=st.integers(2, 5))
def test_tokens_are_conserved_and_the_bowl_matches_the_ledger(
    tag: str, seats: int, rounds: int
) -> None:
    players = PLAYERS[:seats]
    game = new_game(players)
    balances: Counter[str] = Counter(dict.fromkeys(players, 2000))
    total = sum(balances.values())
    for k in range(rounds):
        if k == rounds - 1:
            game, _ = press_last_round(game)
        before = dict(game.streaks)
        game, start, end = play_round(game, seed_of(f"{tag}-{k}"))
        apply_postings(balances, start)
        apply_postings(balances, end)
        assert sum(balances.values()) == total
        assert balances[BOWL] == game.bowl
        state = game.round
        assert state is not None
        winner = None if state.winner is None else players[state.winner]
        if winner is not None and before.get(winner) == 1:
            assert game.bowl == 0  # two in a row took the bowl
            assert game.streaks[winner] == 0
        elif winner is not None:
            assert game.streaks[winner] == 1
    assert game.closed
    assert balances[BOWL] == 0


def test_two_wins_in_a_row_take_the_bowl_and_restart_the_streak() -> None:
    seed = seed_of("twice")
    first, _, _ = play_round(new_game(PLAYERS), seed)
    assert first.round is not None
    assert first.round.winner is not None
    winner = PLAYERS[first.round.winner]
    # Replay the same round (same seed, same starter, same bots) for a player one win short.
    game = new_game(PLAYERS)
    game.streaks[winner] = 1
    game.bowl = 10
    game, start, end = play_round(game, seed)
    assert game.round is not None
    assert game.round.previous_winner == winner
    assert game.round.winner == first.round.winner
    taken = [p for p in end if p.reason.value == "bowl_win"]
    contributions = sum(p.amount for p in start if p.to_account == BOWL)
    assert [(p.to_account, p.amount) for p in taken] == [(winner, 10 + contributions)]
    assert game.bowl == 0
    assert game.streaks == dict.fromkeys(PLAYERS, 0)
