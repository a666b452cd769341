"""The SDK's Hand deal verifier against deals the real Hand rules engine played.

The expected deals come from the server's own engine (``games.hand.deal.new_deal`` over
``games.fair``, then bots playing the deal out); the verifier (``sdk/fairness.py``, section
"Hand deals") is a separate implementation of docs/fairness.md, so an agreement checks both,
and every tampering below must be caught by its named check.
"""

from __future__ import annotations

import dataclasses
import hashlib

import pytest

from games.fair import FairStream, commitment
from games.hand.bot import play_bot_turn
from games.hand.deal import new_deal
from games.hand.deal_state import Phase
from games.hand.events import Event
from sdk.fairness import (
    CLIENT_SEED_MISMATCH,
    COMMITMENT_MISMATCH,
    DEALT_CARDS_MISMATCH,
    DRAW_MISMATCH,
    TOP_DISCARD_MISMATCH,
    PileDraw,
    RoundEvidence,
    RoundWitness,
    Verification,
    card_text,
    hand_deal,
    verify_round,
)

pytestmark = pytest.mark.unit

SEEDS: list[str | None] = ["ann's seed", None, "🃏 cat"]


def seed_of(n: int) -> bytes:
    return hashlib.sha512(f"hand deal {n}".encode()).digest() + bytes(16)


def played_deal(seed: bytes, starter: int) -> list[Event]:
    """Every event of one Hand deal played to its end by the server's bots, then the reveal."""
    state, events = new_deal(seed, SEEDS, len(SEEDS), starter)
    stream = FairStream(seed, [], "test/hand-bot")
    for _ in range(5000):
        if state.phase is Phase.ENDED:
            reveal = {
                "server_seed": seed.hex(),
                "commitment": commitment(seed),
                "client_seeds": SEEDS,
            }
            return [*events, Event("seed_revealed", -1, reveal)]
        state, more = play_bot_turn(state, stream)
        events += more
    raise AssertionError("the deal never ended")


def witness(events: list[Event], seat: int, my_client_seed: str | None) -> Verification:
    """What ``seat`` receives of the events (public ones and his own), fed to a RoundWitness."""
    w = RoundWitness(my_client_seed)
    result = None
    for event in events:
        if event.private_to is None:
            out = w.observe(event.kind, 3, event.seat, event.data, None)
        elif event.private_to == seat:
            out = w.observe(event.kind, 3, event.seat, {}, event.data)
        else:
            continue
        result = out or result
    assert result is not None, "seed_revealed never produced a verification"
    return result


def evidence_of(events: list[Event], seat: int) -> RoundEvidence:
    """The evidence a player gathers, rebuilt by hand from the engine's events (to tamper with)."""
    started = next(e for e in events if e.kind == "deal_started").data
    revealed = events[-1].data
    dealt = next(e for e in events if e.kind == "dealt" and e.private_to == seat).data
    draws: list[PileDraw] = []
    for e in events:
        if e.kind == "drew_from_stock" and e.seat == seat:
            draws.append(PileDraw(-1, int(e.data["stock_size"])))
        elif e.kind == "card_drawn" and e.private_to == seat:
            draws[-1] = PileDraw(int(e.data["card"]), draws[-1].pile_left)
    return RoundEvidence(
        commitment=started["commitment"],
        server_seed_hex=revealed["server_seed"],
        client_seeds=list(revealed["client_seeds"]),
        seats=len(SEEDS),
        starter=started["starter"],
        my_seat=seat,
        dealt=list(dealt["cards"]),
        pile_draws=draws,
        my_client_seed=SEEDS[seat],
        game="hand",
        top_discard=started["top_discard"],
    )


def checks(result: Verification) -> set[str]:
    return {f.check for f in result.failures}


@pytest.mark.parametrize("n", range(3))
def test_every_seat_of_an_honest_hand_deal_verifies_its_cards_and_stock_draws(n: int) -> None:
    events = played_deal(seed_of(n), starter=n % 3)
    for seat in range(3):
        result = witness(events, seat, SEEDS[seat])
        assert result.ok, result.summary()
        drawn = sum(1 for e in events if e.kind == "drew_from_stock" and e.seat == seat)
        assert drawn, "the bots never drew from the stock: pick another seed"
        size = 15 if seat == n % 3 else 14
        assert result.checked == (
            "commitment",
            *(("your client seed",) if SEEDS[seat] else ()),
            f"your {size} dealt cards",
            "turned card",
            f"your {drawn} stock draws",
        )


def test_hand_cards_are_named_as_the_rules_name_them() -> None:
    # docs/fairness.md and docs/rules/hand.md: id = copy*52 + suit*13 + rank-1.
    assert [card_text(i) for i in (0, 9, 10, 12, 13, 38, 51, 52, 103, 104, 105)] == [
        "AS", "10S", "JS", "KS", "AH", "KD", "KC", "AS", "KC", "J1", "J2",
    ]  # fmt: skip


def test_the_deal_is_dealt_one_card_at_a_time_from_the_starter() -> None:
    # A deck given by hand (not by the function under test): seat order 2, 0, 1.
    seed = seed_of(9)
    dealt = hand_deal(seed, [None, None, None], 3, 2)
    deck = list(dealt.deck)
    assert dealt.hands[2][:2] == (deck[0], deck[3])
    assert dealt.hands[0][:2] == (deck[1], deck[4])
    assert dealt.hands[2][14] == deck[42]
    assert dealt.top_discard == deck[43]
    assert dealt.stock == tuple(deck[44:])
    state, _ = new_deal(seed, [None, None, None], 3, 2)
    assert [tuple(h) for h in state.hands] == list(dealt.hands)
    assert tuple(state.stock) == dealt.stock


def test_a_tampered_hand_seed_is_caught_by_the_commitment() -> None:
    evidence = evidence_of(played_deal(seed_of(1), 0), 1)
    seed = bytearray(bytes.fromhex(evidence.server_seed_hex))
    seed[40] ^= 0x80
    result = verify_round(dataclasses.replace(evidence, server_seed_hex=seed.hex()))
    assert COMMITMENT_MISMATCH in checks(result)
    assert DEALT_CARDS_MISMATCH in checks(result)


def test_a_wrong_hand_client_seed_is_caught() -> None:
    evidence = evidence_of(played_deal(seed_of(2), 1), 0)
    seeds = list(evidence.client_seeds)
    seeds[2] = "not cat's"
    result = verify_round(dataclasses.replace(evidence, client_seeds=seeds))
    assert DEALT_CARDS_MISMATCH in checks(result)
    assert COMMITMENT_MISMATCH not in checks(result)
    result = verify_round(dataclasses.replace(evidence, my_client_seed="what I sent"))
    assert checks(result) == {CLIENT_SEED_MISMATCH}


def test_a_swapped_dealt_card_is_caught_and_named() -> None:
    evidence = evidence_of(played_deal(seed_of(3), 2), 2)
    outside = next(c for c in range(106) if c not in evidence.dealt)
    dealt = list(evidence.dealt)
    swapped, dealt[5] = dealt[5], outside
    result = verify_round(dataclasses.replace(evidence, dealt=dealt))
    assert checks(result) == {DEALT_CARDS_MISMATCH}
    message = result.failures[0].message
    assert f"missing [{card_text(swapped)}]" in message
    assert f"not yours [{card_text(outside)}]" in message


def test_a_swapped_stock_draw_and_turned_card_are_caught() -> None:
    evidence = evidence_of(played_deal(seed_of(4), 0), 0)
    draws = list(evidence.pile_draws)
    assert draws
    other = next(c for c in range(106) if c != draws[0].tile_id and c not in evidence.dealt)
    draws[0] = PileDraw(other, draws[0].pile_left)
    result = verify_round(dataclasses.replace(evidence, pile_draws=draws))
    assert checks(result) == {DRAW_MISMATCH}
    assert "draw 1 from the stock" in result.summary()
    assert evidence.top_discard is not None
    turned = (evidence.top_discard + 1) % 106
    result = verify_round(dataclasses.replace(evidence, top_discard=turned))
    assert checks(result) == {TOP_DISCARD_MISMATCH}
