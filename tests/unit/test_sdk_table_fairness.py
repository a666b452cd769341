"""Whole-table verification and the commitment order (docs/fairness.md) in the SDK.

The honest evidence of each deal is built from the *server's* dealing code (``games``), as
the table service's record would hold it; the verifier (``sdk/fairness.py``) is a separate
implementation. Every tamper class of issue 22 must then be caught by name, at whole-table
scope (other seats, bots included), for both games; and a live witness must catch a
commitment published after a contribution or changed at the deal.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable
from typing import Any

import pytest

from games.fair import commitment
from games.hand.deal import new_deal
from games.kishpa.deal import deal_round
from sdk.fairness import (
    CLIENT_SEED_MISMATCH,
    COMMITMENT_LATE,
    COMMITMENT_MISMATCH,
    CONTRIBUTION_MISMATCH,
    DEALT_CARDS_MISMATCH,
    DEALT_TILES_MISMATCH,
    DOLLS_MISMATCH,
    DRAW_MISMATCH,
    KISHPA_MISMATCH,
    RECORD_INCOMPLETE,
    REPLACEMENT_MISMATCH,
    TOP_DISCARD_MISMATCH,
    Contribution,
    RoundEvidence,
    RoundWitness,
    TableDraw,
    face,
    verify_round,
    with_record,
)

pytestmark = pytest.mark.unit

SIT_DOWN = ["", "sit", "", ""]
GIVEN = {0: "c0-4f1c", 2: 'c2 "\\ 🎲'}
"""Seats 0 and 2 contributed; seat 1 keeps its sit-down seed, seat 3 (a bot) has none."""


def _seed(n: int) -> bytes:
    return hashlib.sha512(b"table" + n.to_bytes(4, "big")).digest() + bytes(16)


def _seeds() -> list[str | None]:
    return [GIVEN.get(s) or SIT_DOWN[s] or None for s in range(4)]


def _order(ev: RoundEvidence) -> RoundEvidence:
    ev.precommitment = ev.commitment
    ev.precommitment_event_id = "1000-0"
    ev.contributions = [
        Contribution(0, GIVEN[0], "1100-0"),
        Contribution(2, GIVEN[2], "1200-3"),
    ]
    ev.deal_event_id = "1300-0"
    ev.seat_client_seeds = list(SIT_DOWN)
    return ev


def kishpa_evidence(n: int) -> RoundEvidence:
    seed = _seed(n)
    seeds = _seeds()
    starter = n % 4
    d = deal_round(seed, seeds, 4, starter)
    pile = list(d.pile)
    draws = [
        TableDraw((starter + 1 + k) % 4, pile[len(pile) - 1 - k], len(pile) - 1 - k)
        for k in range(6)
    ]
    dolls = [*d.kishpa.dolls_returned, *(d.replacement.dolls_returned if d.replacement else ())]
    return _order(
        RoundEvidence(
            commitment=commitment(seed),
            server_seed_hex=seed.hex(),
            client_seeds=[s or "" for s in seeds],
            seats=4,
            starter=starter,
            my_seat=0,
            dealt=list(d.hands[0]),
            kishpa=face(d.kishpa.tile),
            replaced_kishpa=None if d.replacement is None else face(d.replacement.tile),
            my_client_seed=GIVEN[0],
            hands={s: list(h) for s, h in enumerate(d.hands)},
            draws=draws,
            kishpa_id=d.kishpa.tile,
            replacement_id=None if d.replacement is None else d.replacement.tile,
            dolls_returned=dolls,
        )
    )


def hand_evidence(n: int) -> RoundEvidence:
    seed = _seed(n)
    seeds = _seeds()
    starter = n % 4
    deal, _ = new_deal(seed, seeds, 4, starter)
    stock = list(deal.stock)
    draws = [TableDraw((starter + k) % 4, stock[k], len(stock) - 1 - k) for k in range(5)]
    return _order(
        RoundEvidence(
            commitment=commitment(seed),
            server_seed_hex=seed.hex(),
            client_seeds=[s or "" for s in seeds],
            seats=4,
            starter=starter,
            my_seat=0,
            dealt=list(deal.hands[0]),
            game="hand",
            top_discard=deal.discard_pile[0],
            my_client_seed=GIVEN[0],
            hands={s: list(h) for s, h in enumerate(deal.hands)},
            draws=draws,
        )
    )


def _find(
    build: Callable[[int], RoundEvidence], wanted: Callable[[RoundEvidence], bool]
) -> RoundEvidence:
    for n in range(400):
        ev = build(n)
        if wanted(ev):
            return ev
    raise AssertionError("no such deal in range")


@pytest.mark.parametrize("n", range(6))
def test_honest_deals_verify_for_the_whole_table(n: int) -> None:
    for ev in (kishpa_evidence(n), hand_evidence(n)):
        result = verify_round(ev)
        assert result.ok, result.summary()
        assert result.whole_table
        assert result.contributed
        assert "all 4 hands" in result.checked


def _bot_swap(ev: RoundEvidence) -> None:
    assert ev.hands is not None
    ev.hands[3] = [(ev.hands[3][0] + 1) % 106, *ev.hands[3][1:]]


def _other_draw(ev: RoundEvidence) -> None:
    first = ev.draws[1]
    ev.draws[1] = dataclasses.replace(first, tile_id=(first.tile_id + 7) % 106)


def _skipped_tile(ev: RoundEvidence) -> None:
    ev.draws = [
        ev.draws[0],
        *(dataclasses.replace(d, pile_left=d.pile_left - 1) for d in ev.draws[1:]),
    ]


def _flip_seed_bit(ev: RoundEvidence) -> None:
    raw = bytearray(bytes.fromhex(ev.server_seed_hex))
    raw[5] ^= 0x10
    ev.server_seed_hex = raw.hex()


def _changed_client_seed(ev: RoundEvidence) -> None:
    ev.client_seeds[1] = "not the sit-down seed"


def _dropped_contribution(ev: RoundEvidence) -> None:
    ev.client_seeds[2] = ""


def _invented_contribution(ev: RoundEvidence) -> None:
    ev.client_seeds[3] = "the house speaks for its bot"


def _late_commitment(ev: RoundEvidence) -> None:
    ev.precommitment_event_id = "1150-0"  # between the two contributions


def _second_commitment(ev: RoundEvidence) -> None:
    other = _seed(9999)
    ev.server_seed_hex = other.hex()
    ev.commitment = commitment(other)  # consistent with its seed, not with the advance one


def _no_advance_commitment(ev: RoundEvidence) -> None:
    ev.precommitment = ""
    ev.precommitment_event_id = ""


def _contribution_after_deal(ev: RoundEvidence) -> None:
    ev.contributions[1] = dataclasses.replace(ev.contributions[1], event_id="1400-0")


def _missing_hand(ev: RoundEvidence) -> None:
    assert ev.hands is not None
    del ev.hands[2]


COMMON: list[tuple[Callable[[RoundEvidence], None], str]] = [
    (_bot_swap, "DEALT"),
    (_other_draw, DRAW_MISMATCH),
    (_skipped_tile, DRAW_MISMATCH),
    (_flip_seed_bit, COMMITMENT_MISMATCH),
    (_changed_client_seed, CONTRIBUTION_MISMATCH),
    (_dropped_contribution, CONTRIBUTION_MISMATCH),
    (_invented_contribution, CONTRIBUTION_MISMATCH),
    (_late_commitment, COMMITMENT_LATE),
    (_second_commitment, COMMITMENT_LATE),
    (_no_advance_commitment, COMMITMENT_LATE),
    (_contribution_after_deal, CONTRIBUTION_MISMATCH),
    (_missing_hand, RECORD_INCOMPLETE),
]


@pytest.mark.parametrize("game", ["kishpa", "hand"])
@pytest.mark.parametrize(("tamper", "check"), COMMON, ids=[t.__name__ for t, _ in COMMON])
def test_every_tamper_class_is_caught_for_the_whole_table(
    game: str, tamper: Callable[[RoundEvidence], None], check: str
) -> None:
    ev = kishpa_evidence(1) if game == "kishpa" else hand_evidence(1)
    tamper(ev)
    if check == "DEALT":
        check = DEALT_TILES_MISMATCH if game == "kishpa" else DEALT_CARDS_MISMATCH
    failures = {f.check for f in verify_round(ev).failures}
    assert check in failures, failures


def test_kishpa_only_tampers_are_caught() -> None:
    replaced = _find(kishpa_evidence, lambda e: e.replacement_id is not None)
    plain = _find(kishpa_evidence, lambda e: e.replacement_id is None)
    dolls = _find(kishpa_evidence, lambda e: bool(e.dolls_returned))
    cases: list[tuple[RoundEvidence, dict[str, Any], str]] = [
        (plain, {"kishpa_id": (plain.kishpa_id or 0) + 1}, KISHPA_MISMATCH),
        (plain, {"replacement_id": 5}, REPLACEMENT_MISMATCH),  # an invented replacement
        (replaced, {"replacement_id": None, "replaced_kishpa": None}, REPLACEMENT_MISMATCH),
        (dolls, {"dolls_returned": []}, DOLLS_MISMATCH),
        (plain, {"dolls_returned": [104]}, DOLLS_MISMATCH),
        (plain, {"kishpa_id": None}, RECORD_INCOMPLETE),
    ]
    for ev, change, check in cases:
        failures = {f.check for f in verify_round(dataclasses.replace(ev, **change)).failures}
        assert check in failures, (change, failures)


def test_hand_turned_card_and_own_seed_are_checked() -> None:
    ev = hand_evidence(2)
    assert ev.top_discard is not None
    turned = dataclasses.replace(ev, top_discard=(ev.top_discard + 1) % 106)
    assert TOP_DISCARD_MISMATCH in {f.check for f in verify_round(turned).failures}
    mine = dataclasses.replace(ev, my_client_seed="what I really sent")
    assert CLIENT_SEED_MISMATCH in {f.check for f in verify_round(mine).failures}


def test_a_deal_nobody_contributed_to_says_so() -> None:
    ev = kishpa_evidence(3)
    ev.contributions = []
    ev.client_seeds = [s or "" for s in SIT_DOWN]
    seed = bytes.fromhex(ev.server_seed_hex)
    d = deal_round(seed, [s or None for s in SIT_DOWN], 4, ev.starter)
    ev.hands = {s: list(h) for s, h in enumerate(d.hands)}
    ev.dealt = list(d.hands[0])
    ev.my_client_seed = None
    ev.kishpa, ev.kishpa_id = face(d.kishpa.tile), d.kishpa.tile
    ev.replacement_id = None if d.replacement is None else d.replacement.tile
    ev.replaced_kishpa = None if d.replacement is None else face(d.replacement.tile)
    ev.dolls_returned = [
        *d.kishpa.dolls_returned,
        *(d.replacement.dolls_returned if d.replacement else ()),
    ]
    pile = list(d.pile)
    ev.draws = [TableDraw(1, pile[-1], len(pile) - 1)]
    result = verify_round(ev)
    assert result.ok, result.summary()
    assert not result.contributed
    assert "no contribution: the server alone chose this deal" in result.summary()


def _started(witness: RoundWitness, ev: RoundEvidence, commitment_at_deal: str) -> None:
    witness.observe(
        "round_started",
        1,
        -1,
        {"players": ["a", "b", "c", "d"], "starter": ev.starter, "commitment": commitment_at_deal},
    )


def test_a_witness_catches_a_commitment_published_after_a_contribution() -> None:
    ev = kishpa_evidence(4)
    witness = RoundWitness()
    witness.observe("contribution_accepted", 0, 0, {"deal": 1, "contribution": GIVEN[0]})
    witness.observe("seed_committed", 0, -1, {"deal": 1, "commitment": ev.commitment})
    _started(witness, ev, ev.commitment)
    witness.observe("dealt", 1, 0, {}, {"hand": [{"id": t} for t in ev.dealt]})
    witness.observe(
        "round_ended",
        1,
        -1,
        {"server_seed": ev.server_seed_hex, "client_seeds": ev.client_seeds},
    )
    live = witness.ended(1)
    assert live is not None
    failures = {f.check for f in verify_round(with_record(live, ev)).failures}
    assert COMMITMENT_LATE in failures


def test_a_witness_catches_a_deal_under_another_commitment() -> None:
    ev = kishpa_evidence(5)
    witness = RoundWitness()
    witness.observe("seed_committed", 0, -1, {"deal": 1, "commitment": "ab" * 32})
    witness.contributed(1, GIVEN[0])
    _started(witness, ev, ev.commitment)
    witness.observe("dealt", 1, 0, {}, {"hand": [{"id": t} for t in ev.dealt]})
    witness.observe(
        "round_ended",
        1,
        -1,
        {"server_seed": ev.server_seed_hex, "client_seeds": ev.client_seeds},
    )
    live = witness.ended(1)
    assert live is not None
    assert live.my_client_seed == GIVEN[0]
    merged = with_record(live, ev)
    failures = {f.check for f in verify_round(merged).failures}
    assert COMMITMENT_LATE in failures


def test_a_record_rewritten_after_the_deal_contradicts_what_was_seen_live() -> None:
    ev = kishpa_evidence(6)
    witness = RoundWitness()
    witness.observe("seed_committed", 0, -1, {"deal": 1, "commitment": ev.commitment})
    _started(witness, ev, ev.commitment)
    seen = [(ev.dealt[0] + 1) % 106, *ev.dealt[1:]]  # what the table really sent this seat
    witness.observe("dealt", 1, 0, {}, {"hand": [{"id": t} for t in seen]})
    witness.observe(
        "round_ended",
        1,
        -1,
        {"server_seed": ev.server_seed_hex, "client_seeds": ev.client_seeds},
    )
    live = witness.ended(1)
    assert live is not None
    assert verify_round(ev).ok  # the record alone looks fine
    failures = {f.check for f in verify_round(with_record(live, ev)).failures}
    assert DEALT_TILES_MISMATCH in failures
