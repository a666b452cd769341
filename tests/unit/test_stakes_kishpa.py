"""Kishpa at stake levels (issue 17): the stake multiplies every amount the rules move.

The property: for every stake level, the postings of a random round are exactly its stake-1
postings multiplied. The one place where docs/rules/kishpa.md's stake-1 arithmetic does not
scale is the last-round split of the bowl, whose remainder is counted in tokens; it is checked
against an equal split computed here, and, under the ``bowl_split_in_stakes`` ruling, against the
stake-1 split multiplied. Hand-computed examples pin both rulings.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from hypothesis import assume, event, given, settings
from hypothesis import strategies as st

from games.fair import SERVER_SEED_BYTES, FairStream
from games.kishpa.bot import BOT_TAG, choose_action
from games.kishpa.errors import InvalidRecordError
from games.kishpa.record import end_postings, parse_record, settle_record, start_postings
from games.kishpa.round import (
    ENDED,
    CloseWindow,
    RoundState,
    apply,
    end_record,
    new_round,
    seats_to_act,
    start_record,
    view_for,
)
from games.kishpa.ruleset import RuleSet
from games.kishpa.tiles import ALL_FACES, TILE_COUNT, Colour, Face, face_of, joker_of
from services.common.settings import MAX_STAKE
from services.wallet.accounts import LOAD_TOKENS
from services.wallet.batch import MAX_LOADS_PER_BATCH
from tests.support.kishpa_records import WIN_HAND, record, rows

pytestmark = pytest.mark.unit

LEVELS = (1, 5, 10, 50, 100)
"""The stake levels offered by default (KISHPA_STAKES_KISHPA)."""
SPLIT_IN_STAKES = RuleSet(bowl_split_in_stakes=True)


# --- random rounds ---------------------------------------------------------------------


def _winning_hand(draw: st.DrawFn) -> list[Face]:
    """14 faces that win whatever the joker is: a run of 5 and three runs of 3, each of
    its own colour (a joker among them stands for itself)."""
    colours = draw(st.permutations(list(Colour)))
    hand: list[Face] = []
    for colour, length in zip(colours, (5, 3, 3, 3), strict=True):
        low = draw(st.integers(1, 14 - length))
        hand += [Face(colour, n) for n in range(low, low + length)]
    return hand


@st.composite
def random_rounds(draw: st.DrawFn) -> dict[str, Any]:
    """A valid round record at stake 1: a random deal, kishpa (and replacement when nobody
    holds a joker), reveals, a winner or none, end hands, bowl, streak and last round."""
    seats = draw(st.integers(2, 4))
    players = [f"p{k + 1}" for k in range(seats)]
    deck = [face_of(t) for t in draw(st.permutations(range(TILE_COUNT)))]
    kishpa = next(f for f in deck if not f.is_doll)
    deck.remove(kishpa)
    starter = draw(st.integers(0, seats - 1))
    hands: dict[str, list[Face]] = {}
    for seat, player in enumerate(players):
        size = 15 if seat == starter else 14
        hands[player], deck = deck[:size], deck[size:]
    turned = [kishpa]
    obj: dict[str, Any] = {"players": players, "kishpa": str(kishpa)}
    start_reveal = None
    if not any(joker_of(kishpa) in h for h in hands.values()):
        replacement = next(f for f in deck if not f.is_doll)
        turned.append(replacement)
        obj["replacement"] = str(replacement)
        holders = [p for p in players if kishpa in hands[p]]
        start_reveal = draw(st.sampled_from([None, *holders]))
        if start_reveal is not None:
            obj["start_reveal"] = start_reveal
    final = turned[-1]

    # The end: tiles drawn from every copy not turned face up.
    pool = Counter({face: 1 if face.is_doll else 2 for face in ALL_FACES})
    pool.subtract(turned)
    end_hands: dict[str, list[Face]] = {}
    winner = draw(st.sampled_from([None, *players]))
    if winner is not None:
        hand = _winning_hand(draw)
        pool.subtract(hand)
        assume(min(pool.values()) >= 0)
        end_hands[winner] = hand
        left = sorted(pool.elements(), key=str)
        discard = draw(st.sampled_from(left))
        pool[discard] -= 1
        obj.update(winner=winner, final_discard=str(discard))
    order = [face_of(t) for t in draw(st.permutations(range(TILE_COUNT)))]
    for player in players:
        if player == winner:
            continue
        hand = []
        for face in order:
            if len(hand) == 14:
                break
            if pool[face] > 0:
                pool[face] -= 1
                hand.append(face)
        end_hands[player] = hand
    if start_reveal is None:
        holders = [p for p in players if p != winner and final in end_hands[p]]
        end_reveal = draw(st.sampled_from([None, *holders]))
        if end_reveal is not None:
            obj["end_reveal"] = end_reveal
    previous = draw(st.sampled_from([None, *players]))
    if previous is not None:
        obj["previous_winner"] = previous
    obj.update(
        start_hands={p: [str(f) for f in hands[p]] for p in players},
        end_hands={p: [str(f) for f in end_hands[p]] for p in players},
        bowl=draw(st.integers(0, 400)),
        last_round=draw(st.booleans()),
    )
    return obj


def _at_stake(obj: dict[str, Any], stake: int) -> dict[str, Any]:
    """The same round at ``stake``: the bowl it starts with is the stake-1 bowl multiplied."""
    return {**obj, "stake": stake, "bowl": obj["bowl"] * stake}


def _times(postings: list[dict[str, Any]], stake: int) -> list[dict[str, Any]]:
    return [{**p, "amount": p["amount"] * stake} for p in postings]


def _equal_split(total: int, players: list[str], first: str) -> list[dict[str, Any]]:
    """docs/rules/kishpa.md section 9 written out: equal shares, one token each of the
    remainder in seat order from ``first``; nobody is paid a share of 0."""
    start = players.index(first)
    order = players[start:] + players[:start]
    each, left = divmod(total, len(players))
    return [
        {"from": "bowl", "to": p, "amount": each + (1 if k < left else 0), "reason": "bowl_split"}
        for k, p in enumerate(order)
        if each + (1 if k < left else 0) > 0
    ]


@settings(max_examples=120, deadline=None)
@given(obj=random_rounds(), other=st.integers(2, 5_000))
def test_every_posting_at_every_stake_is_the_stake_1_posting_multiplied(
    obj: dict[str, Any], other: int
) -> None:
    base = settle_record(obj)
    # "stake" is optional: absent, null and 1 are the same round.
    assert base == settle_record({**obj, "stake": 1}) == settle_record({**obj, "stake": None})
    starter = max(obj["players"], key=lambda p: len(obj["start_hands"][p]))
    for stake in (*LEVELS, other):
        staked = settle_record(_at_stake(obj, stake))
        assert staked["start"] == _times(base["start"], stake)
        kept = [p for p in base["end"] if p["reason"] != "bowl_split"]
        split = [p for p in base["end"] if p["reason"] == "bowl_split"]
        assert staked["end"][: len(kept)] == _times(kept, stake)
        event(f"winner={'winner' in obj} split={bool(split)} replaced={'replacement' in obj}")
        if split and stake > 1 and sum(p["amount"] for p in split) % len(obj["players"]):
            event("a split with a remainder")
        # The split: the multiplied bowl, shared equally to the token.
        first = obj.get("winner") or starter
        total = stake * sum(p["amount"] for p in split)
        assert staked["end"][len(kept) :] == (
            _equal_split(total, obj["players"], first) if split else []
        )
        # Ruling bowl_split_in_stakes: the split too is the stake-1 split multiplied.
        in_stakes = settle_record(_at_stake(obj, stake), SPLIT_IN_STAKES)
        assert in_stakes["start"] == staked["start"]
        assert in_stakes["end"] == _times(base["end"], stake)


@settings(max_examples=12, deadline=None)
@given(
    seed=st.binary(min_size=SERVER_SEED_BYTES, max_size=SERVER_SEED_BYTES),
    seats=st.integers(2, 4),
    stake=st.sampled_from(LEVELS[1:]),
)
def test_a_bot_round_played_at_a_stake_moves_the_stake_1_amounts_multiplied(
    seed: bytes, seats: int, stake: int
) -> None:
    """The round engine itself: the same deal played at stake 1 and at ``stake`` (the bots
    decide on tiles, so they play the same moves) records the stake, and its postings, bowl
    and announced payout are the stake-1 ones multiplied."""
    base_state, base_events = _play(seed, seats, RuleSet(), bowl=7)
    state, events = _play(seed, seats, RuleSet(stake=stake), bowl=7 * stake)
    assert state.hands == base_state.hands
    assert state.winner == base_state.winner
    assert start_record(state) == {**start_record(base_state), "stake": stake, "bowl": 7 * stake}
    assert start_record(base_state)["stake"] == 1
    assert [p.amount for p in start_postings(start_record(state))] == [
        p.amount * stake for p in start_postings(start_record(base_state))
    ]
    assert [p.amount for p in end_postings(end_record(state))] == [
        p.amount * stake for p in end_postings(end_record(base_state))
    ]
    base_payouts = [e["payout_per_loser"] for e in base_events if "payout_per_loser" in e]
    payouts = [e["payout_per_loser"] for e in events if "payout_per_loser" in e]
    assert payouts == [p * stake for p in base_payouts]


def _play(
    seed: bytes, seats: int, rules: RuleSet, bowl: int
) -> tuple[RoundState, list[dict[str, Any]]]:
    players = ["ann", "ben", "cat", "dan"][:seats]
    state, first = new_round(players, 0, seed, ["x"] * seats, bowl=bowl, rules=rules)
    data = [dict(e.data) for e in first]
    stream = FairStream(seed, [], BOT_TAG)
    for _ in range(1000):
        if state.phase == ENDED:
            return state, data
        action = None
        for seat in seats_to_act(state):
            action = choose_action(view_for(state, seat), stream, rules)
            if action is not None:
                break
        state, events = apply(state, action if action is not None else CloseWindow())
        data += [dict(e.data) for e in events]
    raise AssertionError("a round never ended")


@settings(max_examples=60, deadline=None)
@given(obj=random_rounds())
def test_the_highest_stake_a_setting_offers_never_needs_more_loads_than_a_batch_allows(
    obj: dict[str, Any],
) -> None:
    """Every player broke, every phase at MAX_STAKE: the 50-token loads the wallet adds stay
    within its per-batch limit, and within the 13-unit bound MAX_STAKE is derived from."""
    staked = settle_record(_at_stake(obj, MAX_STAKE))
    for phase in ("start", "end"):
        owed: Counter[str] = Counter()
        for posting in staked[phase]:
            if posting["from"] != "bowl":
                owed[posting["from"]] += posting["amount"]
        assert all(amount <= 13 * MAX_STAKE for amount in owed.values())
        loads = sum(-(-amount // LOAD_TOKENS) for amount in owed.values())
        assert loads <= MAX_LOADS_PER_BATCH
    assert 4 * -(-13 * MAX_STAKE // LOAD_TOKENS) <= MAX_LOADS_PER_BATCH


# --- hand-computed examples ------------------------------------------------------------


def test_stake_5_multiplies_contributions_bonuses_and_the_win() -> None:
    # p1 holds a joker (R6 for kishpa R5) at the start; p3 wins plainly at stake 5.
    rec = record(end={"p3": WIN_HAND}, winner="p3", final_discard="Y3", stake=5)
    out = settle_record(rec)
    assert rows(out["start"], "bowl_contribution") == [(p, "bowl", 5) for p in rec["players"]]
    assert rows(out["start"], "bonus_joker") == [("p2", "p1", 5), ("p3", "p1", 5), ("p4", "p1", 5)]
    assert rows(out["end"], "win") == [("p1", "p3", 10), ("p2", "p3", 10), ("p4", "p3", 10)]


def test_stake_10_with_the_kishpa_a_1_contributes_20_and_its_ones_pay_20() -> None:
    # Kishpa K1: every player pays 2 x 10 into the bowl; the joker is K2.
    rec = record(kishpa="K1", start={"p1": ["K2"], "p2": ["K1"]}, end={}, stake=10)
    out = settle_record(rec)
    assert rows(out["start"], "bowl_contribution") == [(p, "bowl", 20) for p in rec["players"]]
    assert rows(out["start"], "bonus_one") == [("p1", "p2", 20), ("p3", "p2", 20), ("p4", "p2", 20)]


def test_last_round_split_at_stake_5_is_even_to_the_token() -> None:
    # Bowl 15 + 4 x 5 = 35 tokens, nobody won: 8 each and 3 left, one each from p1 (starter).
    rec = record(end={}, bowl=15, last_round=True, stake=5)
    split = rows(settle_record(rec)["end"], "bowl_split")
    assert split == [("bowl", "p1", 9), ("bowl", "p2", 9), ("bowl", "p3", 9), ("bowl", "p4", 8)]
    # Ruling bowl_split_in_stakes: 7 stakes, 1 each and 3 left -> 10, 10, 10, 5.
    split = rows(settle_record(rec, SPLIT_IN_STAKES)["end"], "bowl_split")
    assert split == [("bowl", "p1", 10), ("bowl", "p2", 10), ("bowl", "p3", 10), ("bowl", "p4", 5)]


def test_last_round_split_at_stake_50_starts_with_the_winner() -> None:
    # Bowl 100 + 4 x 50 = 300 tokens: 75 each, nothing left over.
    rec = record(
        end={"p3": WIN_HAND},
        winner="p3",
        final_discard="Y3",
        bowl=100,
        last_round=True,
        stake=50,
    )
    split = rows(settle_record(rec)["end"], "bowl_split")
    assert split == [("bowl", "p3", 75), ("bowl", "p4", 75), ("bowl", "p1", 75), ("bowl", "p2", 75)]
    # Bowl 130 + 200 = 330 tokens: 82 each and 2 left, one each to p3 (the winner) and p4.
    rec["bowl"] = 130
    split = rows(settle_record(rec)["end"], "bowl_split")
    assert split == [("bowl", "p3", 83), ("bowl", "p4", 83), ("bowl", "p1", 82), ("bowl", "p2", 82)]


def test_two_wins_in_a_row_take_the_multiplied_bowl() -> None:
    rec = record(
        end={"p2": WIN_HAND}, winner="p2", final_discard="Y3", bowl=60, previous_winner="p2"
    )
    rec["stake"] = 10
    assert rows(settle_record(rec)["end"], "bowl_win") == [("bowl", "p2", 60 + 4 * 10)]


@pytest.mark.parametrize("stake", [0, -5, True, "5", 2.5, [5]])
def test_a_stake_that_is_not_a_positive_whole_number_is_refused(stake: object) -> None:
    rec = record(end={}, stake=stake)
    with pytest.raises(InvalidRecordError, match="stake must be a whole number of tokens >= 1"):
        parse_record(rec)


def test_the_rule_set_refuses_a_stake_below_1() -> None:
    with pytest.raises(ValueError, match="stake"):
        RuleSet(stake=0)
