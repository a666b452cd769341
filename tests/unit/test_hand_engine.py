"""The Hand engine behind the table interface: whole games of bots, phases, views, timeouts."""

from __future__ import annotations

import json
from dataclasses import asdict

import grpc
import pytest

from games.hand.errors import HandMoveError
from games.hand.game import GameState, game_payout_postings
from games.hand.ledger import net_movements
from games.hand.record import postings_for_phase
from games.hand.view import HandPublic
from games.table import BadTableRequest
from services.common.errors import failure_of
from services.table.engine import (
    Action,
    BadRequestError,
    GameView,
    Table,
    TableError,
    TableSettings,
)
from services.table.hand_engine import HandEngine
from shared.stream import PRIVATE
from tests.support.hand_engine_play import (
    SEED,
    apply_step,
    deal_of,
    new_table,
    play_game,
)

pytestmark = pytest.mark.unit


def hand_facts(view: GameView) -> HandPublic:
    """A Hand view's facts, of their own type."""
    assert isinstance(view.public, HandPublic)
    return view.public


def test_a_game_of_bots_buys_in_once_and_pays_out_once_by_the_totals() -> None:
    engine = HandEngine()
    table = new_table()
    events, steps = play_game(engine, table)
    phases = [p for s in steps for p in s.phases]
    assert [(p.round_no, p.phase) for p in phases] == [(0, "buy_in"), (7, "payout")]
    game = GameState.from_dict(table.game["game"])
    assert game.deals_played == 7
    assert game.finished
    buy_in = postings_for_phase("buy_in", phases[0].record)
    payout = postings_for_phase("payout", phases[1].record)
    assert payout == game_payout_postings(game)
    net = net_movements([*buy_in, *payout])
    assert net.get("pot", 0) == 0
    assert sum(net.values()) == 0
    assert sum(p.amount for p in buy_in) == 4 * table.settings.stake
    # JSON-clean records (they go to Redis as they are).
    assert json.loads(json.dumps(phases[1].record)) == phases[1].record
    kinds = [e.type for e in events]
    assert kinds.count("deal_started") == 7
    assert kinds.count("deal_scored") == 7
    assert kinds.count("game_ended") == 1
    assert kinds.count("seed_revealed") == 7
    assert {e.round for e in events if e.type == "deal_started"} == set(range(1, 8))
    final = engine.view(table, None)
    assert final.phase == "ended"
    assert hand_facts(final).payouts == game.payouts()
    assert [s.score for s in final.seats] == game.totals


def test_views_show_own_cards_and_every_meld_but_never_another_hand() -> None:
    engine = HandEngine()
    table = new_table()
    seen_melds = 0

    def check(t: Table) -> None:
        nonlocal seen_melds
        deal = deal_of(t)
        spectator = engine.view(t, None)
        assert spectator.my_tiles == []
        for seat in range(4):
            view = engine.view(t, seat)
            assert view.my_tiles == deal.hands[seat]
            assert hand_facts(view).melds == hand_facts(spectator).melds
            assert len(hand_facts(view).melds) == len(deal.melds)
            text = json.dumps(asdict(view.public))
            if view.phase in ("draw", "play"):
                assert hand_facts(view).hands is None
                assert view.server_seed == ""
                assert "stock" not in text
        seen_melds = max(seen_melds, len(deal.melds))

    play_game(engine, table, check)
    assert seen_melds > 0


def test_public_events_name_no_card_of_a_hand_or_the_stock() -> None:
    engine = HandEngine()
    table = new_table()
    events, _ = play_game(engine, table)
    for event in events:
        if event.type == "dealt" or event.type == PRIVATE:
            assert event.data == {}
            assert event.private_seat is not None
        # A card drawn from the stock reaches only its drawer (the stock size is public).
        if event.type == "drew_from_stock":
            assert set(event.data) == {"stock_size"}
        if event.type == "deal_started":
            assert "stock" not in event.data
            assert "hands" not in event.data
    drawn = [e for e in events if e.type == PRIVATE and e.private_data is not None]
    assert {e.private_data["type"] for e in drawn if e.private_data} == {"dealt", "card_drawn"}


def test_a_timed_out_turn_draws_from_the_stock_and_discards_that_card() -> None:
    engine = HandEngine()
    table = new_table(turn_seconds=5)
    apply_step(table, engine.start(table, SEED, 1000))
    assert table.deadline is not None
    assert table.deadline.kind == "turn"
    assert table.deadline.at_ms == 1000 + 5000
    starter = deal_of(table).turn
    # The starter skips his draw: he holds 15, so a timeout discards his last card.
    apply_step(table, engine.on_deadline(table, SEED, 6000))
    deal = deal_of(table)
    nxt = deal.turn
    assert nxt == (starter + 1) % 4
    before = list(deal.hands[nxt])
    top = deal.stock[0]
    step = engine.on_deadline(table, SEED, 12_000)
    apply_step(table, step)
    assert step.timed_out_seat == nxt
    after = deal_of(table)
    assert after.hands[nxt] == before
    assert after.discard_pile[-1] == top
    kinds = [e.type for e in step.events]
    assert "timed_out" in kinds
    assert "turn_started" in kinds
    assert table.deadline is not None
    assert table.deadline.seats == ((nxt + 1) % 4,)


def test_an_autoplay_seat_is_played_after_a_short_delay() -> None:
    engine = HandEngine()
    table = new_table(turn_seconds=30)
    table.autoplay = [1]
    apply_step(table, engine.start(table, SEED, 0))
    deal = deal_of(table)
    step = engine.act(table, 0, Action("discard", {"tile": deal.hands[0][0]}), 100)
    assert step.deadline is not None
    assert step.deadline.at_ms == 100 + 1000


def test_the_turn_deadline_runs_on_while_the_same_turn_goes_on() -> None:
    engine = HandEngine()
    table = new_table(seats=2)
    apply_step(table, engine.start(table, SEED, 0))
    first = table.deadline
    card = deal_of(table).hands[0][0]
    apply_step(table, engine.act(table, 0, Action("discard", {"tile": card}), 5))
    second = table.deadline
    assert second is not None
    assert first is not None
    assert second.at_ms > first.at_ms
    step = engine.act(table, 1, Action("draw", {"source": "pile"}), 50)
    apply_step(table, step)
    assert step.deadline == second
    assert step.result["tile_id"] == deal_of(table).hands[1][-1]


@pytest.mark.parametrize(
    ("action", "reason"),
    [
        (Action("win", {"tile": 1}), "UNKNOWN_ACTION"),
        (Action("draw", {"source": "sky"}), "BAD_SOURCE"),
        (Action("discard", {"tile": 106}), "MALFORMED_TILE"),
        (Action("discard", {"tile": True}), "MALFORMED_TILE"),
        (Action("lay_melds", {"melds": []}), "BAD_MELDS"),
        (Action("lay_melds", {"melds": [[1, "x"]]}), "MALFORMED_TILE"),
        (Action("lay_melds", {"melds": [{"cards": [1, 2, 3], "kind": "row"}]}), "BAD_MELD_KIND"),
        (Action("lay_off", {"meld_id": -1, "tile": 3}), "BAD_MELD_ID"),
        (Action("lay_off", {"meld_id": 0, "tile": 3, "end": "middle"}), "BAD_END"),
        (Action("release_joker", {"meld_id": 0, "tiles": []}), "MALFORMED_TILE"),
    ],
)
def test_malformed_actions_are_bad_requests(action: Action, reason: str) -> None:
    engine = HandEngine()
    table = new_table()
    apply_step(table, engine.start(table, SEED, 0))
    with pytest.raises(BadRequestError) as info:
        engine.act(table, 0, action, 1)
    assert info.value.reason == reason


def test_rule_refusals_carry_the_rules_reason() -> None:
    engine = HandEngine()
    table = new_table()
    apply_step(table, engine.start(table, SEED, 0))
    with pytest.raises(HandMoveError) as info:
        engine.act(table, 1, Action("draw"), 1)
    assert info.value.reason == "NOT_YOUR_TURN"
    deal = deal_of(table)
    with pytest.raises(HandMoveError) as info:
        engine.act(table, 0, Action("lay_melds", {"melds": [deal.hands[0][:3]]}), 1)
    assert info.value.reason in ("INVALID_MELD", "OPENING_BELOW_51")
    with pytest.raises(TableError) as refused:
        engine.press_last_round(table, 1)
    assert refused.value.reason == "NOT_SUPPORTED"


def test_actions_and_hint_for_the_seat_to_act() -> None:
    engine = HandEngine()
    table = new_table()
    apply_step(table, engine.start(table, SEED, 0))
    assert engine.view(table, 0).actions == ["lay_melds", "discard"]
    assert engine.view(table, 1).actions == []
    hint = engine.hint(table, 0)
    hand = deal_of(table).hands[0]
    grouped = [c for g in hint.groups for c in g.tiles]
    assert sorted(grouped + list(hint.loose)) == sorted(hand)
    assert all(g.kind in ("run", "set") for g in hint.groups)
    assert engine.face(0) == "AS"
    assert engine.face(104) == "J1"


def test_settings_hand_refuses() -> None:
    engine = HandEngine()
    engine.check_settings(TableSettings(seats=2))
    with pytest.raises(BadTableRequest) as refused:
        engine.check_settings(TableSettings(seats=5))
    failure = failure_of(refused.value)
    assert failure is not None
    assert (failure.code, failure.reason) == (grpc.StatusCode.INVALID_ARGUMENT, "BAD_SEATS")
