"""Settlement records of a Hand game (outbox phases ``buy_in`` and ``payout``)."""

import json
from typing import Any

import pytest

from games.errors import InvalidRecordError
from games.hand.deal_state import EndReason, Phase
from games.hand.game import DealResult, start_game
from games.hand.ledger import POT, Posting, net_movements
from games.hand.record import buy_in_record, payout_record, postings_for_phase
from games.hand.ruleset import RuleSet
from games.ledger import posting

pytestmark = pytest.mark.unit


def finished_game() -> Any:
    rules = RuleSet(deals_per_game=2)
    results = [
        DealResult(0, 0, 0, False, (50, -20, -70)),
        DealResult(1, 1, 1, True, (-40, 100, -60)),
    ]
    game, _ = start_game(["ann", "ben", "cat"], 40, rules, results=results)
    return game


def test_records_are_json_and_give_the_buy_in_and_the_payout() -> None:
    game = finished_game()
    assert game.totals == [10, 80, -130]
    buy_in = json.loads(json.dumps(buy_in_record(game)))
    payout = json.loads(json.dumps(payout_record(game)))
    assert payout == {
        "players": ["ann", "ben", "cat"],
        "stake": 40,
        "pot": 120,
        "totals": {"ann": 10, "ben": 80, "cat": -130},
    }
    batch_in = postings_for_phase("buy_in", buy_in, game.rules)
    batch_out = postings_for_phase("payout", payout, game.rules)
    # ann is 70 behind: outside the window, so ben takes the whole pot.
    assert batch_out == [Posting(POT, "ben", 120, "pot_payout")]
    net = net_movements(batch_in + batch_out)
    assert net == {"ann": -40, "ben": 80, "cat": -40, POT: 0}


def test_a_payout_record_needs_a_finished_game() -> None:
    game, _ = start_game(["a", "b"], 5)
    with pytest.raises(InvalidRecordError):
        payout_record(game)


@pytest.mark.parametrize(
    ("phase", "record"),
    [
        ("start", {"players": ["a", "b"], "stake": 1}),
        ("buy_in", {"players": ["a"], "stake": 1}),
        ("buy_in", {"players": ["a", "a"], "stake": 1}),
        ("buy_in", {"players": ["a", "pot"], "stake": 1}),
        ("buy_in", {"players": "ab", "stake": 1}),
        ("buy_in", {"players": ["a", "b"], "stake": -1}),
        ("buy_in", {"players": ["a", "b"], "stake": "1"}),
        ("payout", {"players": ["a", "b"], "stake": 1, "pot": 3, "totals": {"a": 1, "b": 2}}),
        ("payout", {"players": ["a", "b"], "stake": 1, "pot": 2, "totals": {"a": 1}}),
        ("payout", {"players": ["a", "b"], "stake": 1, "pot": 2, "totals": {"a": 1, "b": True}}),
    ],
)
def test_impossible_records_are_refused(phase: str, record: dict[str, Any]) -> None:
    with pytest.raises(InvalidRecordError) as caught:
        postings_for_phase(phase, record)
    assert caught.value.reason == "INVALID_RECORD"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("a", POT, 0, "pot_buy_in"), "positive"),
        (("a", "a", 1, "pot_buy_in"), "itself"),
        (("a", POT, 1, "pot_bonus"), "reason"),
    ],
)
def test_postings_are_positive_transfers_with_a_known_reason(
    args: tuple[str, str, int, str], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        posting(*args)  # type: ignore[arg-type]


def test_end_reasons_and_phases_are_plain_strings() -> None:
    assert EndReason.STOCK_EXHAUSTED.value == "stock_exhausted"
    assert Phase.DRAW.value == "draw"
