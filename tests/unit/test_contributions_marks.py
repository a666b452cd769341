"""What the server says of a deal's seats (games/contributions.py ``seat_marks``) always
passes the client's independent seat checks (sdk/fairness.py, docs/fairness.md "The deal's
seats"), whatever the table: bots, declarations, auto-play, contributions, the lone-creator
rule, dealt by the last contribution or at the deadline. And the seats a deal still waits for
are exactly the awaited ones that have not contributed."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from games import contributions as fair_order
from games.table import Table, TableSettings
from sdk import fairness

pytestmark = pytest.mark.unit

PLAYERS = ("ann", "bob", "cat", "dan")
SEED = bytes(range(80))
DEADLINE_MS = 1_767_225_603_000


@st.composite
def tables(draw: st.DrawFn) -> tuple[Table, int, int]:
    """A table about to deal: (table, the caller's seat, the deal event's milliseconds)."""
    seats = draw(st.integers(2, 4))
    players = list(PLAYERS[:seats])
    bots = [p for p in players[1:] if draw(st.booleans())]
    table = Table(
        table_id="t1",
        game_name="kishpa",
        creator=players[0],
        settings=TableSettings(seats=seats, bots=len(bots)),
        created_ms=0,
        players=players,
        status="playing",
        bots=bots,
    )
    deal = draw(st.integers(1, 3))
    fair_order.commit(table, deal, SEED)
    if draw(st.booleans()):
        fair_order.await_lone_creator(table)
    humans = [p for p in players if p not in bots]
    for player in humans:
        if draw(st.booleans()):
            fair_order.declare(table, player)
    table.autoplay = sorted(
        {s for s, p in enumerate(players) if p in bots}
        | {s for s, p in enumerate(players) if p in humans and draw(st.booleans())}
    )
    waited = bool(fair_order.awaited(table))
    if waited:
        fair_order.wait_until(table, DEADLINE_MS)
    for player in humans:
        if draw(st.booleans()):
            fair_order.accept(table, player, deal, f"c-{player}")
    # Dealt by the last awaited contribution, else at the deadline.
    dealt_ms = DEADLINE_MS - 2_000 if not fair_order.awaited(table) else DEADLINE_MS + 5
    mine = draw(st.sampled_from([players.index(p) for p in humans]))
    return table, mine, dealt_ms


def _evidence(table: Table, my_seat: int, dealt_ms: int) -> fairness.RoundEvidence:
    marks = fair_order.seat_marks(table)
    given_ = table.fair.get("contributions") or {}
    return fairness.RoundEvidence(
        commitment="",
        server_seed_hex="",
        client_seeds=[],
        seats=len(table.players),
        starter=0,
        my_seat=my_seat,
        dealt=[],
        round_no=int(table.fair["deal"]),
        contributions=[
            fairness.Contribution(table.players.index(p), text, f"{dealt_ms - 100}-0")
            for p, text in given_.items()
        ],
        deal_event_id=f"{dealt_ms}-0",
        record_version=fairness.RECORD_VERSION_SEATS,
        bot_seats=marks["bot_seats"],
        declared_seats=marks["declared_seats"],
        awaited_seats=marks["awaited_seats"],
        autoplay_seats=marks["autoplay_seats"],
        awaited_until_ms=marks["awaited_until_ms"],
    )


@settings(max_examples=400, deadline=None)
@given(tables())
def test_the_servers_seat_marks_always_pass_the_clients_checks(
    case: tuple[Table, int, int],
) -> None:
    table, my_seat, dealt_ms = case
    failures: list[fairness.Failure] = []
    checked: list[str] = []
    notes: list[str] = []
    evidence = _evidence(table, my_seat, dealt_ms)
    fairness._check_seats(evidence, failures, checked, notes)
    assert not failures, (failures, table.fair, table.autoplay, table.bots)
    given_ = table.fair.get("contributions") or {}
    still = [s for s in evidence.awaited_seats if table.players[s] not in given_]
    assert fair_order.awaited(table) == still
    assert not set(evidence.awaited_seats) & set(evidence.bot_seats)


@settings(max_examples=200, deadline=None)
@given(tables())
def test_a_contributing_seat_marked_a_bot_always_fails(case: tuple[Table, int, int]) -> None:
    table, my_seat, dealt_ms = case
    evidence = _evidence(table, my_seat, dealt_ms)
    if not evidence.contributions:
        return
    evidence.bot_seats = sorted({*evidence.bot_seats, evidence.contributions[0].seat})
    failures: list[fairness.Failure] = []
    fairness._check_seats(evidence, failures, [], [])
    assert fairness.SEATS_MISMATCH in {f.check for f in failures}
