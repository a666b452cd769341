"""The round state machine: every phase, every refusal, hidden information, timeouts."""

from __future__ import annotations

import json
from dataclasses import asdict, replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from devkit.kishpa_reference import is_valid_group
from games.fair import commitment
from games.kishpa.deal import deal_round
from games.kishpa.errors import IllegalMoveError
from games.kishpa.group_check import is_valid_run, is_valid_set
from games.kishpa.record import settle_record
from games.kishpa.round import (
    DISCARD,
    END_REVEAL,
    ENDED,
    FIRST_DISCARD,
    START_REVEAL,
    TURNS,
    CloseWindow,
    Discard,
    Draw,
    Event,
    Pass,
    Reveal,
    RoundState,
    TurnTimeout,
    Win,
    apply,
    end_record,
    new_round,
    seats_to_act,
    start_record,
    tile_places,
    view_for,
)
from games.kishpa.ruleset import DEFAULT_RULES, RuleSet
from games.kishpa.tiles import TILE_COUNT, face_of, parse_face, tile_ids_of

pytestmark = pytest.mark.unit

PLAYERS = ["p0", "p1", "p2", "p3"]
SEED = bytes(range(80))
# Spread-out tiles that form no group with each other (no joker/1/kishpa of R5 or B9).
FILLER = [
    f"{c}{n}"
    for n in (2, 7, 12, 4, 9, 13, 3, 8, 11, 5, 10, 6)
    for c in ("Y", "K", "B")
    if f"{c}{n}" != "B9"
] + ["R7", "R8"]
WIN_14 = ["B1", "B2", "B3", "B4", "B5", "Y7", "Y8", "Y9", "K7", "K8", "K9", "B10", "B11", "B12"]


def tiles(text: str) -> list[str]:
    return text.split()


def build(
    hands: list[list[str]],
    *,
    kishpa: str = "R5",
    replacement: str | None = None,
    pile_top: list[str] | None = None,
    starter: int = 0,
    rules: RuleSet = DEFAULT_RULES,
) -> RoundState:
    """A dealt round: named tiles in hand (filled up with FILLER), ``pile_top`` drawn next."""
    free = list(range(TILE_COUNT))

    def take(text: str) -> int:
        for tile in tile_ids_of(parse_face(text)):
            if tile in free:
                free.remove(tile)
                return tile
        raise AssertionError(f"no copy of {text} left")

    kishpa_tile = take(kishpa)
    pending = take(replacement) if replacement else None
    joker = str(face_of(kishpa_tile).colour) + str(face_of(kishpa_tile).number % 13 + 1)
    if not replacement and not any(joker in named for named in hands):
        # A round without a replacement has a joker out: the last seat holds it.
        hands = [*hands[:-1], [*hands[-1], joker]]
    dealt = [[take(t) for t in named] for named in hands]
    top = [take(t) for t in (pile_top or [])]
    filler = iter(FILLER * 2)
    for seat, hand in enumerate(dealt):
        size = 15 if seat == starter else 14
        while len(hand) < size:
            text = next(filler)
            if any(t in free for t in tile_ids_of(parse_face(text))):
                hand.append(take(text))
    state = RoundState(
        round_no=1,
        players=PLAYERS[: len(hands)],
        starter=starter,
        rules=asdict(rules),
        server_seed=SEED.hex(),
        client_seeds=[],
        commitment=commitment(SEED),
        pile=free + top[::-1],
        hands=[list(h) for h in dealt],
        start_hands=[list(h) for h in dealt],
        discards=[],
        kishpa_tiles=[kishpa_tile],
        pending_replacement=pending,
        dolls_returned=[],
        phase=START_REVEAL if replacement else FIRST_DISCARD,
        turn=starter,
        timeouts=[0] * len(hands),
    )
    tile_places(state)
    return state


def tile(state: RoundState, seat: int, text: str) -> int:
    return next(t for t in state.hands[seat] if str(face_of(t)) == text)


def refused(state: RoundState, action: Any, reason: str) -> None:
    before = state.to_dict()
    with pytest.raises(IllegalMoveError) as info:
        apply(state, action)
    assert info.value.reason == reason
    assert state.to_dict() == before


def play(state: RoundState, *actions: Any) -> tuple[RoundState, list[Event]]:
    events: list[Event] = []
    for action in actions:
        state, new = apply(state, action)
        events += new
        tile_places(state)
    return state, events


def types(events: list[Event]) -> list[str]:
    return [e.type for e in events]


# --- new_round and hidden information ---------------------------------------------------


def test_new_round_deals_and_only_the_owner_sees_his_hand() -> None:
    state, events = new_round(PLAYERS, 2, SEED, ["a", None, "b", None])
    tile_places(state)
    assert [len(h) for h in state.hands] == [14, 14, 15, 14]
    assert state.commitment == commitment(SEED)
    dealt = [e for e in events if e.type == "dealt"]
    assert [e.private_seat for e in dealt] == [0, 1, 2, 3]
    for event in events:
        public = json.dumps(event.data)
        assert "hand" not in event.data
        for seat, hand in enumerate(state.hands):
            if event.private_seat == seat:
                continue
            assert all(f'"id": {t},' not in public for t in hand)
    assert state.server_seed not in json.dumps([e.to_dict() for e in events])


def test_views_never_show_other_hands_the_pile_or_the_seed_before_the_end() -> None:
    state, _ = new_round(PLAYERS, 0, SEED)
    view = view_for(state, 1)
    assert [t["id"] for t in view["hand"]] == state.hands[1]
    text = json.dumps(view_for(state, None))
    assert "hand" not in view_for(state, None)
    assert view["server_seed"] is None
    assert str(state.pile) not in text
    assert view["pile"] == len(state.pile)


def test_state_round_trips_through_json() -> None:
    state, _ = new_round(PLAYERS, 1, SEED, ["z"] * 4, bowl=5, previous_winner="p1")
    again = RoundState.from_dict(json.loads(json.dumps(state.to_dict())))
    assert again == state


# --- the starter's first discard -------------------------------------------------------


def test_the_starter_discards_first_without_drawing() -> None:
    state = build([[], [], [], []])
    assert seats_to_act(state) == [0]
    refused(state, Draw(0), "NO_DRAW")
    refused(state, Discard(1, state.hands[1][0]), "NOT_YOUR_TURN")
    refused(state, Discard(0, state.hands[1][0]), "TILE_NOT_IN_HAND")
    state, events = play(state, Discard(0, state.hands[0][3]))
    assert types(events) == ["discarded", "turn_started"]
    assert (state.phase, state.turn, len(state.hands[0])) == (TURNS, 1, 14)


def test_the_starter_may_win_at_once() -> None:
    state = build([[*WIN_14, "R3"], [], [], []])
    state, events = play(state, Win(0, tile(state, 0, "R3")))
    assert state.winner == 0
    won = next(e for e in events if e.type == "won")
    assert won.data["payout_per_loser"] == 2
    # Nobody holds the kishpa R5, yet the end window waits for every loser so that its
    # timing does not tell the table so.
    assert state.phase == END_REVEAL
    assert seats_to_act(state) == [1, 2, 3]
    refused(state, Reveal(1), "NOT_HOLDING_KISHPA")
    state, _ = play(state, Pass(1), Pass(2))
    assert state.phase == END_REVEAL
    state, _ = play(state, Pass(3))
    assert state.phase == ENDED


def test_with_the_literal_ruling_an_empty_window_closes_at_once() -> None:
    literal = replace(DEFAULT_RULES, reveal_window_waits_for_all=False)
    state = build([[*WIN_14, "R3"], [], [], []], rules=literal)
    state, _ = play(state, Win(0, tile(state, 0, "R3")))
    assert state.phase == ENDED


# --- turns -----------------------------------------------------------------------------


def test_a_turn_is_draw_then_discard() -> None:
    state = build([[], [], [], []], pile_top=["R9"])
    state, _ = play(state, Discard(0, state.hands[0][0]))
    refused(state, Discard(1, state.hands[1][0]), "MUST_DRAW_FIRST")
    refused(state, Win(1, state.hands[1][0]), "MUST_DRAW_FIRST")
    refused(state, Draw(1, "floor"), "BAD_SOURCE")
    state, events = play(state, Draw(1))
    drew = events[0]
    assert drew.data == {"source": "pile", "pile": len(state.pile)}
    assert drew.private_seat == 1
    assert drew.private_data is not None
    assert drew.private_data["tile"] == "R9"
    refused(state, Draw(1), "ALREADY_DREW")
    state, _ = play(state, Discard(1, tile(state, 1, "R9")))
    assert state.turn == 2
    assert str(face_of(state.discards[-1])) == "R9"


def test_only_the_top_discard_may_be_taken_and_it_is_public() -> None:
    state = build([[], [], [], []])
    first, second = state.hands[0][0], state.hands[0][1]
    state, _ = play(state, Discard(0, first), Draw(1, DISCARD))
    assert state.hands[1][-1] == first
    assert state.discards == []
    state, _ = play(state, Discard(1, second if second in state.hands[1] else state.hands[1][0]))
    state, events = play(state, Draw(2, DISCARD))
    assert events[0].data["tile"] == str(face_of(state.hands[2][-1]))


def test_no_discard_to_take_on_an_empty_discard_row() -> None:
    state = build([[], [], [], []])
    state, _ = play(state, Discard(0, state.hands[0][0]), Draw(1, DISCARD))
    state, _ = play(state, Discard(1, state.hands[1][-1]), Draw(2, DISCARD))
    state, _ = play(state, Discard(2, state.hands[2][-1]), Draw(3, DISCARD))
    state, _ = play(state, Discard(3, state.hands[3][-1]))
    state, _ = play(state, Draw(0, DISCARD), Discard(0, state.hands[0][0]))
    state.discards.clear()  # only for this refusal
    refused(state, Draw(1, DISCARD), "NO_DISCARD")


def test_a_hand_that_does_not_win_is_refused_and_nothing_changes() -> None:
    state = build([[], [*WIN_14[:13], "Y2"], [], []], pile_top=["R9"])
    state, _ = play(state, Discard(0, state.hands[0][0]), Draw(1))
    refused(state, Win(1, tile(state, 1, "R9")), "NOT_A_WINNING_HAND")


def test_win_checks_a_proposed_arrangement_and_searches_when_it_is_wrong() -> None:
    hand = [*WIN_14[:13], "Y2"]  # B12 missing; draws it
    state = build([[], hand, [], []], pile_top=["B12"])
    state, _ = play(state, Discard(0, state.hands[0][0]), Draw(1))
    by_face = {str(face_of(t)): t for t in state.hands[1]}
    good = tuple(
        tuple(by_face[f] for f in g.split())
        for g in ("B1 B2 B3 B4 B5", "Y7 Y8 Y9", "K7 K8 K9", "B10 B11 B12")
    )
    won, events = apply(state, Win(1, by_face["Y2"], good))
    assert won.winning_groups == [list(g) for g in good]
    wrong = ((by_face["B1"], by_face["Y7"], by_face["K9"]), *good[1:])
    won, events = apply(state, Win(1, by_face["Y2"], wrong))
    assert won.winner == 1
    assert sorted(t for g in won.winning_groups for t in g) == sorted(won.hands[1])
    assert types(events)[0] == "won"


def test_jokers_are_wild_and_the_winner_gets_the_win_table() -> None:
    # Kishpa R5 -> joker R6 stands for B12; discarding the other R6 pays +2.
    hand = [*WIN_14[:13], "R6", "R6"]
    state = build([hand, [], [], []])
    state, events = play(state, Win(0, state.hands[0][-1]))
    won = next(e for e in events if e.type == "won")
    assert won.data["payout_per_loser"] == 2 + 1 + 2


# --- reveal windows --------------------------------------------------------------------


def test_start_window_reveal_then_the_kishpa_is_replaced_and_the_joker_changes() -> None:
    state = build([[], [], ["R5"], []], replacement="B9")
    assert state.phase == START_REVEAL
    assert seats_to_act(state) == [0, 1, 2, 3]  # everyone, so nobody learns who holds it
    assert view_for(state, 2)["may_reveal"]
    assert not view_for(state, 1)["may_reveal"]
    assert "B9" not in json.dumps(view_for(state, 1))
    refused(state, Discard(0, state.hands[0][0]), "WINDOW_OPEN")
    refused(state, Reveal(1), "NOT_HOLDING_KISHPA")
    state, events = play(state, Reveal(2))
    assert types(events) == [
        "kishpa_revealed",
        "reveal_window_closed",
        "kishpa_replaced",
        "phase_recorded",
        "turn_started",
    ]
    assert (state.start_reveal, str(state.kishpa), str(state.joker)) == (2, "B9", "B10")
    assert state.phase == FIRST_DISCARD
    refused(state, Reveal(2), "WINDOW_CLOSED")
    rec = start_record(state)
    assert rec["kishpa"] == "R5"
    assert rec["replacement"] == "B9"
    assert rec["start_reveal"] == "p2"


def test_declining_or_the_deadline_closes_the_start_window_without_pay() -> None:
    state = build([[], [], ["R5"], []], replacement="B9")
    with pytest.raises(ValueError, match="start reveal window"):
        start_record(state)
    passed, events = play(state, Pass(2))
    assert events[0].public is False
    assert events[0].private_seat == 2
    assert passed.phase == START_REVEAL  # still waiting for the other seats
    passed, _ = play(passed, Pass(0), Pass(1), Pass(3))
    closed, _ = play(state, CloseWindow())
    for after in (passed, closed):
        assert after.start_reveal is None
        assert str(after.kishpa) == "B9"
        assert "start_reveal" not in start_record(after)


def test_end_window_after_a_win_lets_the_holder_reveal_but_not_the_winner() -> None:
    state = build([[*WIN_14, "R3"], [], [], ["R5"]])
    state, _ = play(state, Win(0, tile(state, 0, "R3")))
    assert state.phase == END_REVEAL
    assert seats_to_act(state) == [1, 2, 3]
    refused(state, Reveal(0), "WINNER_CANNOT_REVEAL")
    refused(state, Discard(1, state.hands[1][0]), "WINDOW_OPEN")
    state, events = play(state, Reveal(3))
    assert state.phase == ENDED
    assert state.end_reveal == 3
    assert types(events)[-2:] == ["round_ended", "phase_recorded"]
    assert events[-2].data["server_seed"] == SEED.hex()
    out = settle_record(end_record(state))
    assert [p["to"] for p in out["end"] if p["reason"] == "bonus_kishpa"] == ["p3"] * 3
    refused(state, Draw(1), "ROUND_ENDED")


def test_the_kishpa_revealed_at_the_start_cannot_be_revealed_at_the_end() -> None:
    hand = [*WIN_14, "R3"]
    state = build([hand, [], ["R5"], []], replacement="B9")
    state, _ = play(state, Reveal(2))
    # The new kishpa B9's twin is nobody's; the end window closes at once after the win.
    state, _ = play(state, Win(0, tile(state, 0, "R3")))
    assert state.phase == ENDED


# --- pile exhausted and timeouts -------------------------------------------------------


def test_pile_exhausted_ends_the_round_with_no_winner() -> None:
    state = build([[], [], [], []])
    state, _ = play(state, TurnTimeout(0))
    assert str(face_of(state.discards[-1])) == str(face_of(state.start_hands[0][-1]))
    events: list[Event] = []
    while state.phase == TURNS:
        state, new = play(state, TurnTimeout(state.turn))
        events += new
    state, _ = play(state, CloseWindow())  # the end window's deadline
    assert state.phase == ENDED
    assert state.winner is None
    assert "pile_exhausted" in types(events)
    assert all(len(h) == 14 for h in state.hands)
    settle_record(end_record(state))


def test_timeouts_draw_and_discard_the_drawn_tile_and_count_towards_autoplay() -> None:
    state = build([[], [], [], []], pile_top=["R9", "R10", "R11", "R12", "R13"])
    state, _ = play(state, Discard(0, state.hands[0][0]))
    before = list(state.hands[1])
    state, _ = play(state, TurnTimeout(1))
    assert state.hands[1] == before
    assert str(face_of(state.discards[-1])) == "R9"
    assert state.timeouts[1] == 1
    state, _ = play(state, Draw(2), TurnTimeout(2))
    assert str(face_of(state.discards[-1])) == "R10"
    refused(state, TurnTimeout(1), "NOT_YOUR_TURN")
    for _ in range(2):
        state, _ = play(state, TurnTimeout(3), TurnTimeout(0), TurnTimeout(1), TurnTimeout(2))
    # The table (games.table.record_timeout) puts a seat on auto-play at this many in a row.
    assert state.timeouts[1] == 3 == state.ruleset.timeouts_before_autoplay
    state, _ = play(state, TurnTimeout(3), TurnTimeout(0), Draw(1))
    assert state.timeouts[1] == 0, "acting breaks the run of timeouts"


def test_unknown_seat_is_refused() -> None:
    state = build([[], [], [], []])
    refused(state, Discard(7, 0), "UNKNOWN_SEAT")


# --- the proposed-arrangement checker agrees with the reference ---------------------------

_GROUP_FACES = [
    *[f"{c}{n}" for c in ("R", "B") for n in (1, 2, 3, 4, 11, 12, 13)],
    "Y3",
    "K3",
    "Y12",
    "R6",
    "DR",
]


@settings(max_examples=150)
@given(
    group=st.lists(st.sampled_from(_GROUP_FACES), min_size=2, max_size=5),
    wrap=st.booleans(),
)
def test_group_check_agrees_with_the_reference_validator(group: list[str], wrap: bool) -> None:
    rules = replace(DEFAULT_RULES, allow_run_12_13_1=wrap)
    faces = [parse_face(t) for t in group]
    joker = parse_face("R6")  # kishpa R5: R6 is wild, DR plays as a plain R6
    assert is_valid_run(faces, joker, rules) == is_valid_group("run", faces, joker, rules)
    assert is_valid_set(faces, joker, rules) == is_valid_group("set", faces, joker, rules)


def test_group_check_examples() -> None:
    joker = parse_face("R6")
    run = [parse_face(t) for t in ("R4", "R5", "DR", "R6")]  # the doll is R6, the joker R7
    assert is_valid_run(run, joker)
    assert not is_valid_run([parse_face(t) for t in ("B12", "B13", "B1")], joker)
    wrap = replace(DEFAULT_RULES, allow_run_12_13_1=True)
    assert is_valid_run([parse_face(t) for t in ("B12", "B13", "B1")], joker, wrap)
    assert not is_valid_run([parse_face(t) for t in ("B13", "B1", "B2")], joker, wrap)
    assert is_valid_set([parse_face(t) for t in ("B7", "R6", "K7", "Y7")], joker)
    assert not is_valid_set([parse_face(t) for t in ("B7", "B7", "K7")], joker)


def test_a_doll_turned_as_kishpa_is_announced_and_goes_back_into_the_pile() -> None:
    seed = next(
        s
        for s in (bytes([k]) * 80 for k in range(256))
        if deal_round(s, [], 4, 0).kishpa.dolls_returned
    )
    state, events = new_round(PLAYERS, 0, seed)
    doll = state.dolls_returned[0]
    assert face_of(doll).is_doll
    assert tile_places(state)[doll] == "pile"
    assert not state.kishpa.is_doll
    started = events[0].data
    assert started["dolls_returned"] == [str(face_of(doll))]
    assert started["kishpa"] == str(face_of(state.kishpa_tiles[0]))


def test_a_malformed_proposed_arrangement_is_ignored_and_the_server_searches() -> None:
    state = build([[*WIN_14, "R3"], [], [], []])
    junk: Any = (("B1", 3), (None,))
    won, _ = apply(state, Win(0, tile(state, 0, "R3"), junk))
    assert won.winner == 0
