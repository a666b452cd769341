"""Starting a deal: the fair shuffle, 14 cards each (the starter 15), the first discard."""

from __future__ import annotations

from collections.abc import Sequence

from games.fair import commitment as seed_commitment
from games.fair import shuffled_deck
from games.hand.cards import CARD_COUNT, cards_text
from games.hand.deal_state import DealState, Phase, check_consistent
from games.hand.errors import HandMoveError, Reason
from games.hand.events import Event
from games.hand.ruleset import DEFAULT_RULES, RuleSet


def deal_from_deck(
    deck: Sequence[int],
    seats: int,
    starter: int,
    rules: RuleSet = DEFAULT_RULES,
    *,
    deal_no: int = 0,
    commitment: str = "",
) -> tuple[DealState, list[Event]]:
    """Deal from a deck given top first.

    Cards go one at a time clockwise from the starter, ``hand_size`` rounds, then one more
    to the starter; the next card is turned to start the discard pile; the rest is the
    stock. The starter acts first and skips his draw.
    """
    if sorted(deck) != list(range(CARD_COUNT)):
        raise HandMoveError("a deck holds each of the 106 cards once", Reason.INVALID_STATE)
    if not rules.min_seats <= seats <= rules.max_seats:
        raise HandMoveError(
            f"Hand is played by {rules.min_seats}-{rules.max_seats} players, not {seats}",
            Reason.UNKNOWN_SEAT,
        )
    if not 0 <= starter < seats:
        raise HandMoveError(f"no seat {starter} to start", Reason.UNKNOWN_SEAT)
    order = [(starter + i) % seats for i in range(seats)]
    hands: list[list[int]] = [[] for _ in range(seats)]
    top = 0
    for _ in range(rules.hand_size):
        for seat in order:
            hands[seat].append(deck[top])
            top += 1
    hands[starter].append(deck[top])
    turned = deck[top + 1]
    state = DealState(
        rules=rules,
        starter=starter,
        hands=hands,
        stock=list(deck[top + 2 :]),
        discard_pile=[turned],
        opened_turn=[-1] * seats,
        turn=starter,
        phase=Phase.PLAY,
        deal_no=deal_no,
        commitment=commitment,
    )
    check_consistent(state)
    events = [
        Event(
            "deal_started",
            data={
                "deal_no": deal_no,
                "starter": starter,
                "hand_sizes": [len(h) for h in hands],
                "top_discard": turned,
                "top_discard_text": cards_text([turned])[0],
                "stock_size": len(state.stock),
                "commitment": commitment,
            },
        ),
        *(
            Event("dealt", seat, {"cards": list(h), "text": cards_text(h)}, private_to=seat)
            for seat, h in enumerate(hands)
        ),
        Event("turn_started", starter, {"phase": Phase.PLAY.value, "turn_no": 0}),
    ]
    return state, events


def new_deal(
    server_seed: bytes,
    client_seeds: Sequence[str | None],
    seats: int,
    starter: int,
    rules: RuleSet = DEFAULT_RULES,
    *,
    deal_no: int = 0,
) -> tuple[DealState, list[Event]]:
    """Deal from the provably-fair deck of ``server_seed`` (80 bytes) and the client seeds.

    The state records ``sha256(server_seed)`` as its commitment; the seed itself is kept by
    the service and revealed when the deal ends.
    """
    deck = shuffled_deck(server_seed, client_seeds, CARD_COUNT)
    return deal_from_deck(
        deck, seats, starter, rules, deal_no=deal_no, commitment=seed_commitment(server_seed)
    )
