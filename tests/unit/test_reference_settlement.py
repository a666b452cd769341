"""The tests' settlement reference (tests/reference_settlement.py) against the production
posting functions, over many generated phase records, and against hand-computed literals.

The reference gives the integration tests their expected balances, so it must agree with the
rules engine wherever a record is valid; where both agree with hand computations from the
rules text, neither is copying the other's mistake.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from devkit.phase_samples import round_record
from games.hand.record import postings_for_phase
from games.kishpa.record import end_postings, start_postings
from tests.reference_settlement import (
    add_movements,
    hand_movements,
    hand_phase,
    hand_pot_shares,
    kishpa_movements,
    kishpa_phase,
    win_per_loser,
)

COLOURS = "RBYK"
NEXT = {n: 1 if n == 13 else n + 1 for n in range(1, 14)}


def _full_set() -> list[str]:
    return [f"{c}{n}" for _ in range(2) for c in COLOURS for n in range(1, 14)] + ["DR", "DK"]


def _net(postings: Iterable[Any]) -> dict[str, int]:
    """Each account's net change, summed here (not with the production helper)."""
    net: dict[str, int] = {}
    for p in postings:
        net[p.from_account] = net.get(p.from_account, 0) - p.amount
        net[p.to_account] = net.get(p.to_account, 0) + p.amount
    return _nonzero(net)


def _by_reason(postings: Iterable[Any]) -> tuple[dict[str, int], dict[str, dict[str, int]]]:
    """Per reason: the tokens of the postings, and each account's net change."""
    tokens: dict[str, int] = {}
    nets: dict[str, list[Any]] = {}
    for p in postings:
        tokens[str(p.reason)] = tokens.get(str(p.reason), 0) + p.amount
        nets.setdefault(str(p.reason), []).append(p)
    return tokens, {reason: _net(ps) for reason, ps in nets.items()}


def _nonzero(moves: Mapping[str, int]) -> dict[str, int]:
    return {a: m for a, m in moves.items() if m}


def _winning_hand(rng: random.Random, joker: str, pool: list[str]) -> list[str] | None:
    """14 tiles that win: a run of five and three runs of three, one colour each, with up
    to two places filled by jokers. ``None`` when the pool cannot supply them."""
    colours = rng.sample(COLOURS, 4)
    hand: list[str] = []
    for colour, length in zip(colours, (5, 3, 3, 3), strict=True):
        start = rng.randint(1, 14 - length)
        hand += [f"{colour}{n}" for n in range(start, start + length)]
    for _ in range(rng.choice((0, 0, 1, 2))):
        hand[rng.randrange(len(hand))] = joker
    left = list(pool)
    try:
        for tile in hand:
            left.remove(tile)
    except ValueError:
        return None
    return hand


@st.composite
def kishpa_records(draw: st.DrawFn) -> dict[str, Any]:
    """A whole round record the production parser accepts, with every option exercised."""
    rng = draw(st.randoms(use_true_random=False))
    n = draw(st.integers(2, 4))
    players = [f"p{i}" for i in range(n)]
    starter = draw(st.integers(0, n - 1))
    numbered = [t for t in _full_set() if t not in ("DR", "DK")]
    kishpa = rng.choice(numbered)
    pool = _full_set()
    pool.remove(kishpa)
    rng.shuffle(pool)
    start_hands = {}
    for seat, player in enumerate(players):
        size = 15 if seat == starter else 14
        start_hands[player], pool = pool[:size], pool[size:]
    first_joker = f"{kishpa[0]}{NEXT[int(kishpa[1:])]}"
    record: dict[str, Any] = {
        "players": players,
        "kishpa": kishpa,
        "start_hands": start_hands,
        "bowl": draw(st.integers(0, 300)),
        "last_round": draw(st.booleans()),
        "stake": draw(st.sampled_from([1, 1, 2, 5, 10, 50, 100])),
    }
    turned = [kishpa]
    if not any(first_joker in h for h in start_hands.values()):
        replacement = rng.choice([t for t in pool if t not in ("DR", "DK")])
        record["replacement"] = replacement
        turned.append(replacement)
        holders = [p for p in players if kishpa in start_hands[p]]
        if holders and draw(st.booleans()):
            record["start_reveal"] = rng.choice(holders)
    final = turned[-1]
    joker = f"{final[0]}{NEXT[int(final[1:])]}"
    if draw(st.booleans()):
        record["previous_winner"] = rng.choice(players)
    # The end: a winner with a winning 14 (or the pile ran out), the others dealt at random.
    end_pool = _full_set()
    for tile in turned:
        end_pool.remove(tile)
    winner = rng.choice(players) if draw(st.booleans()) else None
    end_hands: dict[str, list[str]] = {}
    if winner is not None:
        hand = _winning_hand(rng, joker, end_pool)
        if hand is None:
            winner = None
        else:
            end_hands[winner] = hand
            for tile in hand:
                end_pool.remove(tile)
            discard = joker if joker in end_pool and draw(st.booleans()) else rng.choice(end_pool)
            end_pool.remove(discard)
            record["winner"], record["final_discard"] = winner, discard
    rng.shuffle(end_pool)
    for player in players:
        if player not in end_hands:
            end_hands[player], end_pool = end_pool[:14], end_pool[14:]
    record["end_hands"] = end_hands
    if "start_reveal" not in record:
        holders = [p for p in players if p != winner and final in end_hands[p]]
        if holders and draw(st.booleans()):
            record["end_reveal"] = rng.choice(holders)
    return record


@settings(max_examples=300, deadline=None)
@given(kishpa_records())
def test_the_reference_moves_what_the_kishpa_posting_functions_move(
    record: dict[str, Any],
) -> None:
    start = kishpa_movements("start", record)
    end = kishpa_movements("end", record)
    assert _nonzero(start) == _net(start_postings(record))
    assert _nonzero(end) == _net(end_postings(record))
    assert sum(start.values()) == sum(end.values()) == 0
    # Per reason too: the tokens each reason moves and who gained or lost them.
    for phase, postings in (("start", start_postings(record)), ("end", end_postings(record))):
        book = kishpa_phase(phase, record)
        tokens, nets = _by_reason(postings)
        assert dict(book.tokens) == tokens
        assert {r: _nonzero(m) for r, m in book.by_reason.items()} == nets


@settings(max_examples=300, deadline=None)
@given(
    st.integers(2, 4).flatmap(
        lambda n: st.tuples(
            st.just(n),
            st.integers(0, 100),
            st.lists(st.integers(-300, 400), min_size=n, max_size=n),
        )
    )
)
def test_the_reference_moves_what_the_hand_pot_postings_move(
    game: tuple[int, int, list[int]],
) -> None:
    n, stake, totals = game
    players = [f"p{i}" for i in range(n)]
    record = {
        "players": players,
        "stake": stake,
        "pot": stake * n,
        "totals": dict(zip(players, totals, strict=True)),
    }
    for phase in ("buy_in", "payout"):
        postings = postings_for_phase(phase, record)
        assert _nonzero(hand_movements(phase, record)) == _net(postings)
        assert dict(hand_phase(phase, record).tokens) == _by_reason(postings)[0]


# Hand-computed literals (docs/rules and tests/integration/test_workers_settlement.py).


def test_the_docs_pot_examples() -> None:
    assert hand_pot_shares([120, 100, 90, -30], 40) == [30, 6, 4, 0]
    assert hand_pot_shares([120, 120, 90, 10], 40) == [15, 15, 10, 0]
    assert hand_pot_shares([200, 100, 50, 0], 40) == [40, 0, 0, 0]


def test_the_docs_win_example() -> None:
    # Kishpa R5, joker R6: one R6 in the groups and the second R5, a plain discard: 4.
    hand = ["R6", "R5", "B1", "B2", "B3", "B4", "K7", "Y7", "B7", "K1", "K2", "K3", "Y9", "Y10"]
    assert win_per_loser(hand, "Y2", ("R", 5)) == 4
    assert win_per_loser([t for t in hand if t != "R5"] + ["K9"], "R6", ("R", 5)) == 5


def test_the_docs_bonus_and_bowl_split_examples() -> None:
    # Kishpa B9 (joker B10): Ann holds DR and a B10, Ben holds B1; everyone pays 1 into the bowl.
    ann = [
        "DR",
        "B10",
        "R1",
        "R2",
        "R3",
        "R4",
        "R7",
        "R8",
        "R9",
        "R11",
        "Y2",
        "Y3",
        "Y4",
        "Y5",
        "Y6",
    ]
    ben = ["B1", "K2", "K3", "K4", "K5", "K6", "K7", "K8", "K9", "K11", "K12", "K13", "Y7", "Y8"]
    cat = ["R12", "R13", "Y9", "Y11", "Y12", "Y13", "K1", "B2", "B3", "B4", "B5", "B6", "B7", "B8"]
    dan = ["R1", "R5", "R6", "R10", "Y1", "Y10", "B11", "B12", "B13", "K10", "R2", "R3", "R4", "Y2"]
    record = {
        "players": ["ann", "ben", "cat", "dan"],
        "kishpa": "B9",
        "start_hands": {"ann": ann, "ben": ben, "cat": cat, "dan": dan},
        "bowl": 0,
    }
    # Per reason, by hand: 4 into the bowl; Ann's doll and joker and Ben's 1 (worth 1: the
    # kishpa is not a 1) each paid by the 3 others.
    assert dict(kishpa_phase("start", record).tokens) == {
        "bowl_contribution": 4,
        "bonus_doll": 3,
        "bonus_joker": 3,
        "bonus_one": 3,
    }
    assert kishpa_movements("start", record) == {
        "ann": 6 - 1 - 1,
        "ben": 3 - 2 - 1,
        "cat": -2 - 1 - 1,
        "dan": -2 - 1 - 1,
        "bowl": 4,
    }
    # A 35-token bowl split among 4 in the last round, the winner at seat 2: 9, 8, 9, 9.
    end = {
        **record,
        "bowl": 31,
        "last_round": True,
        "winner": "cat",
        "final_discard": "Y2",
        "end_hands": {p: [] for p in record["players"]},
    }
    moves = kishpa_movements("end", end)
    bowl_share = {p: moves[p] for p in ("ann", "ben", "cat", "dan")}
    win = {"ann": -2, "ben": -2, "cat": 6, "dan": -2}
    assert {p: bowl_share[p] - win[p] for p in win} == {"ann": 9, "ben": 8, "cat": 9, "dan": 9}
    assert moves["bowl"] == -35
    assert dict(kishpa_phase("end", end).tokens) == {"win": 6, "bowl_split": 35}


# tests/integration/test_workers_settlement.py: START and END, computed by hand per seat.
START = {2: (+1, -3), 3: (+3, -3, -3), 4: (+3, -5, -5, +3)}
END = {2: (-2, +2), 3: (-2, +4, -2), 4: (-2, +6, -2, -2)}


def _per_seat(players: list[str], moves: Mapping[str, int]) -> tuple[int, ...]:
    return tuple(moves.get(p, 0) for p in players)


def test_the_hand_computed_worker_settlement_literals() -> None:
    for n in (2, 3, 4):
        players = [f"s{i}" for i in range(n)]
        record = round_record(players)
        assert _per_seat(players, kishpa_movements("start", record)) == START[n]
        assert _per_seat(players, kishpa_movements("end", record)) == END[n]
    players = ["a", "b", "c"]
    last = round_record(players, bowl=0, last_round=True)
    assert _per_seat(players, kishpa_movements("end", last)) == (-1, +5, -1)
    # The final round of that test: the bowl holds 3, seat 3 wins plainly, 6 split 2 each.
    final = round_record(players, bowl=3, winner="c", previous_winner="b", last_round=True)
    total = add_movements(dict(kishpa_movements("start", final)), kishpa_movements("end", final))
    assert _per_seat(players, total) == tuple(
        s + e for s, e in zip(START[3], (0, 0, +6), strict=True)
    )
    assert total["bowl"] == 3 - 6
