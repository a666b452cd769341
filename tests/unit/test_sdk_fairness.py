"""The SDK's deal verifier against rounds the real rules engine played.

The expected deals come from the server's own engine (``games.kishpa.round``); the verifier
(``sdk/fairness.py``) is a separate implementation of docs/fairness.md, so an agreement is a
check of both, and every tampering below must be caught by name.
"""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Any

import pytest

from games.fair import FairStream
from games.kishpa.bot import BOT_TAG, choose_action
from games.kishpa.round import ENDED, CloseWindow, Event, apply, new_round, seats_to_act, view_for
from sdk.fairness import (
    CLIENT_SEED_MISMATCH,
    COMMITMENT_MISMATCH,
    DEALT_TILES_MISMATCH,
    DRAW_MISMATCH,
    KISHPA_MISMATCH,
    SEED_MALFORMED,
    SEED_NOT_REVEALED,
    PileDraw,
    RoundEvidence,
    RoundWitness,
    Verification,
    verify_round,
)

pytestmark = pytest.mark.unit

PLAYERS = ["ann", "ben", "cat", "dan"]
CLIENT_SEEDS: list[str | None] = ["ann's seed", None, "🎲 cat", "dan"]


def seed_of(n: int) -> bytes:
    return hashlib.sha512(f"round {n}".encode()).digest() + bytes(16)


def played_round(seed: bytes, *, starter: int = 1) -> list[Event]:
    """Every event of one round played to its end by bots (the engine's own events)."""
    state, events = new_round(PLAYERS, starter, seed, list(CLIENT_SEEDS))
    stream = FairStream(seed, [], BOT_TAG)
    for _ in range(2000):
        if state.phase == ENDED:
            return events
        action = None
        for seat in seats_to_act(state):
            action = choose_action(view_for(state, seat), stream)
            if action is not None:
                break
        state, more = apply(state, action if action is not None else CloseWindow())
        events += more
    raise AssertionError("the round never ended")


def witness(events: list[Event], seat: int, my_client_seed: str | None) -> Verification:
    """What ``seat`` sees of the events, fed to a RoundWitness: its verification."""
    w = RoundWitness(my_client_seed)
    result = None
    for event in events:
        private = event.private_data if event.private_seat == seat else None
        if not event.public and private is None:
            continue
        out = w.observe(event.type, 7, event.seat, event.data, private)
        result = out or result
    assert result is not None, "round_ended never produced a verification"
    return result


def evidence_of(events: list[Event], seat: int) -> RoundEvidence:
    """The evidence a player gathers, rebuilt by hand (to tamper with)."""
    started = next(e for e in events if e.type == "round_started").data
    ended = next(e for e in events if e.type == "round_ended").data
    dealt = next(e for e in events if e.type == "dealt" and e.private_seat == seat)
    assert dealt.private_data is not None
    draws = [
        PileDraw(int(e.private_data["tile_id"]), int(e.data["pile"]))
        for e in events
        if e.type == "drew"
        and e.private_seat == seat
        and e.data["source"] == "pile"
        and e.private_data is not None
    ]
    replaced = [e.data["kishpa"] for e in events if e.type == "kishpa_replaced"]
    return RoundEvidence(
        commitment=started["commitment"],
        server_seed_hex=ended["server_seed"],
        client_seeds=list(ended["client_seeds"]),
        seats=len(PLAYERS),
        starter=started["starter"],
        my_seat=seat,
        dealt=[int(t["id"]) for t in dealt.private_data["hand"]],
        pile_draws=draws,
        kishpa=started["kishpa"],
        replaced_kishpa=replaced[0] if replaced else None,
        my_client_seed=CLIENT_SEEDS[seat],
    )


def checks(result: Verification) -> set[str]:
    return {f.check for f in result.failures}


@pytest.mark.parametrize("n", range(6))
def test_every_seat_of_an_honest_round_verifies_its_own_deal_and_draws(n: int) -> None:
    events = played_round(seed_of(n), starter=n % 4)
    for seat in range(4):
        result = witness(events, seat, CLIENT_SEEDS[seat])
        assert result.ok, result.summary()
        assert "commitment" in result.checked
        assert result.summary().startswith("deal verified")


def test_a_round_with_pile_draws_checks_each_draw() -> None:
    events = played_round(seed_of(100))
    evidence = evidence_of(events, 0)
    assert evidence.pile_draws, "the bots drew nothing from the pile: pick another seed"
    result = verify_round(evidence)
    assert result.ok, result.summary()
    assert f"your {len(evidence.pile_draws)} pile draws" in result.checked


def test_a_tampered_seed_is_caught_by_the_commitment() -> None:
    evidence = evidence_of(played_round(seed_of(1)), 2)
    seed = bytearray(bytes.fromhex(evidence.server_seed_hex))
    seed[17] ^= 0x01
    result = verify_round(dataclasses.replace(evidence, server_seed_hex=seed.hex()))
    assert COMMITMENT_MISMATCH in checks(result)
    assert evidence.commitment in result.summary()


def test_a_seed_that_deals_the_hands_but_was_not_committed_is_caught() -> None:
    # The server deals from seed B while it had committed to seed A, and reveals B.
    committed = evidence_of(played_round(seed_of(2)), 0).commitment
    evidence = evidence_of(played_round(seed_of(3)), 0)
    result = verify_round(dataclasses.replace(evidence, commitment=committed))
    assert checks(result) == {COMMITMENT_MISMATCH}


def test_a_wrong_client_seed_is_caught() -> None:
    evidence = evidence_of(played_round(seed_of(4)), 1)
    # The server mixed another seed for seat 3 than it reveals: the deal no longer matches.
    seeds = list(evidence.client_seeds)
    seeds[3] = "dan!"
    result = verify_round(dataclasses.replace(evidence, client_seeds=seeds))
    assert DEALT_TILES_MISMATCH in checks(result)
    # The server dropped this player's own seed: he sees it by name.
    seeds = list(evidence.client_seeds)
    seeds[1] = "someone else's"
    result = verify_round(dataclasses.replace(evidence, client_seeds=seeds, my_client_seed=None))
    assert DEALT_TILES_MISMATCH in checks(result)
    result = verify_round(dataclasses.replace(evidence, my_client_seed="what I sent"))
    assert CLIENT_SEED_MISMATCH in checks(result)


def test_a_swapped_dealt_tile_is_caught_and_named() -> None:
    evidence = evidence_of(played_round(seed_of(5)), 2)
    outside = next(t for t in range(106) if t not in evidence.dealt)
    dealt = list(evidence.dealt)
    swapped = dealt[4]
    dealt[4] = outside
    result = verify_round(dataclasses.replace(evidence, dealt=dealt))
    assert checks(result) == {DEALT_TILES_MISMATCH}
    message = result.failures[0].message
    from sdk.fairness import face

    assert f"missing [{face(swapped)}]" in message
    assert f"not yours [{face(outside)}]" in message


def test_a_swapped_pile_draw_is_caught() -> None:
    evidence = evidence_of(played_round(seed_of(100)), 0)
    draws = list(evidence.pile_draws)
    first = draws[0]
    other = next(t for t in range(106) if t != first.tile_id and t not in evidence.dealt)
    draws[0] = PileDraw(other, first.pile_left)
    result = verify_round(dataclasses.replace(evidence, pile_draws=draws))
    assert checks(result) == {DRAW_MISMATCH}
    assert "draw 1 from the pile" in result.summary()


def test_a_kishpa_other_than_the_seeds_turn_is_caught() -> None:
    evidence = evidence_of(played_round(seed_of(6)), 0)
    other = "R1" if evidence.kishpa != "R1" else "R2"
    result = verify_round(dataclasses.replace(evidence, kishpa=other))
    assert KISHPA_MISMATCH in checks(result)


@pytest.mark.parametrize(
    ("seed_hex", "check"),
    [("", SEED_NOT_REVEALED), ("abc", SEED_MALFORMED), ("zz" * 80, SEED_MALFORMED)],
)
def test_a_missing_or_malformed_seed_says_so(seed_hex: str, check: str) -> None:
    evidence = evidence_of(played_round(seed_of(0)), 0)
    result = verify_round(dataclasses.replace(evidence, server_seed_hex=seed_hex))
    assert checks(result) == {check}
    assert not result.ok


def test_a_watcher_without_a_seat_gets_no_verdict() -> None:
    events = played_round(seed_of(0))
    w = RoundWitness()
    outs: list[Any] = [w.observe(e.type, 1, e.seat, e.data, None) for e in events if e.public]
    assert outs == [None] * len(outs)
