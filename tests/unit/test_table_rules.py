"""The pure table module (``games.table``): seating, the deadlines a table keeps and when a
seat goes on auto-play, for every game; and each game's auto-play policy as a plain function
``(state, seat, stream) -> action``."""

from __future__ import annotations

import hashlib

import pytest

import games.hand as hand
import games.kishpa as kishpa
from games import table as rules
from games.fair import FairStream
from games.table import Deadline, Table, TableSettings

pytestmark = pytest.mark.unit

PLAYERS = ["ann", "bob", "cat", "dan"]


def _seed(text: str) -> bytes:
    return hashlib.sha512(text.encode()).digest() + bytes(16)


def _table(seats: int = 4, *, status: str = rules.WAITING, players: int = 1) -> Table:
    return Table(
        table_id="t1",
        game_name="kishpa",
        creator=PLAYERS[0],
        settings=TableSettings(seats=seats, turn_seconds=20, reveal_window_seconds=7),
        created_ms=0,
        players=list(PLAYERS[:players]),
        status=status,
    )


def test_seating_fills_free_seats_then_refuses_with_the_reasons_clients_know() -> None:
    table = _table(seats=3)
    fact = rules.seat(table, "bob", name="Bob", client_seed="s")
    assert (fact.type, fact.seat, fact.data) == (
        "player_joined",
        1,
        {"player_id": "bob", "name": "Bob"},
    )
    assert table.names == {"bob": "Bob"}
    assert table.client_seeds == {"bob": "s"}
    with pytest.raises(rules.TableRuleError) as again:
        rules.seat(table, "bob")
    assert (again.value.reason, again.value.category) == ("ALREADY_SEATED", "refused")
    rules.seat(table, "cat")
    with pytest.raises(rules.TableFull) as full:
        rules.seat(table, "dan")
    assert (full.value.reason, full.value.category) == ("TABLE_FULL", "exhausted")
    assert table.players == ["ann", "bob", "cat"]
    started = _table(status=rules.PLAYING, players=2)
    with pytest.raises(rules.TableRuleError) as late:
        rules.seat(started, "dan")
    assert late.value.reason == "GAME_STARTED"


def test_leaving_frees_a_waiting_seat_but_puts_a_playing_one_on_autoplay() -> None:
    table = _table(players=3)
    with pytest.raises(rules.TableRuleError) as creator:
        rules.leave(table, "ann")
    assert creator.value.reason == "CREATOR"
    with pytest.raises(rules.NotAllowed) as stranger:
        rules.leave(table, "zed")
    assert (stranger.value.reason, stranger.value.category) == ("NOT_SEATED", "forbidden")
    assert rules.leave(table, "bob").type == "player_left"
    assert table.players == ["ann", "cat"]
    playing = _table(status=rules.PLAYING, players=2)
    assert rules.leave(playing, "bob").type == "autoplay_on"
    assert playing.players == ["ann", "bob"]
    assert playing.autoplay == [1]
    assert not rules.abandoned(playing)
    rules.leave(playing, "ann")
    assert rules.abandoned(playing)


def test_only_the_creator_starts_a_table_with_two_players_and_settings_are_bounded() -> None:
    table = _table(players=1)
    with pytest.raises(rules.TableRuleError) as alone:
        rules.check_start(table, "ann")
    assert alone.value.reason == "NOT_ENOUGH_PLAYERS"
    rules.seat(table, "bob")
    with pytest.raises(rules.NotAllowed):
        rules.check_start(table, "bob")
    rules.check_start(table, "ann")
    for bad, reason in [
        (TableSettings(seats=5), "BAD_SEATS"),
        (TableSettings(seats=1), "BAD_SEATS"),
        (TableSettings(turn_seconds=0), "BAD_TURN_SECONDS"),
        (TableSettings(reveal_window_seconds=601), "BAD_WINDOW_SECONDS"),
        (TableSettings(next_round_pause_ms=-1), "BAD_PAUSE"),
    ]:
        with pytest.raises(rules.BadTableRequest) as refused:
            rules.check_settings(bad)
        assert (refused.value.reason, refused.value.category) == (reason, "invalid")
    with pytest.raises(rules.BadTableRequest):
        rules.check_players("ann", ["bob", "ann"], TableSettings())
    with pytest.raises(rules.BadTableRequest):
        rules.check_players("ann", ["ann", "ann"], TableSettings())
    with pytest.raises(rules.BadTableRequest):
        rules.check_players("ann", ["ann", "b", "c"], TableSettings(seats=2))


def test_a_running_deadline_is_kept_until_the_wait_changes_or_restarts() -> None:
    table = _table(status=rules.PLAYING, players=4)
    turn = rules.deadline_for(table, rules.TURN, 2, 1000, restarted=True)
    assert turn == Deadline(1000 + 20_000, rules.TURN, (2,))
    table.deadline = turn
    assert rules.deadline_for(table, rules.TURN, 2, 5000, restarted=False) is turn
    assert rules.deadline_for(table, rules.TURN, 2, 5000, restarted=True).at_ms == 25_000
    assert rules.deadline_for(table, rules.TURN, 3, 5000, restarted=False).seats == (3,)
    window = rules.deadline_for(table, rules.WINDOW, None, 6000, restarted=False)
    assert window == Deadline(6000 + 7000, rules.WINDOW), "a window names no seat"
    assert rules.pause_deadline(table, 100) == Deadline(100 + 30_000, rules.NEXT_ROUND)


def test_late_turns_put_a_seat_on_autoplay_which_plays_fast_until_its_player_acts() -> None:
    table = _table(status=rules.PLAYING, players=4)
    assert rules.record_timeout(table, 1, 3) is None
    assert rules.record_timeout(table, 1, 3) is None
    fact = rules.record_timeout(table, 1, 3)
    assert fact is not None
    assert (fact.type, fact.seat) == ("autoplay_on", 1)
    assert rules.record_timeout(table, 1, 3) is None, "announced once"
    assert table.autoplay == [1]
    fast = rules.deadline_for(table, rules.TURN, 1, 0, restarted=True)
    assert fast.at_ms == rules.AUTOPLAY_DELAY_MS
    rules.player_acted(table, 1)
    assert table.autoplay == []
    assert table.timeouts == {}
    assert rules.deadline_for(table, rules.TURN, 1, 0, restarted=True).at_ms == 20_000


def test_house_bots_take_their_tables_bot_pause_and_people_on_autoplay_a_second() -> None:
    settings = TableSettings(seats=4, turn_seconds=20, bot_pause_ms=200)
    table = Table(
        table_id="t1",
        game_name="hand",
        creator=PLAYERS[0],
        settings=settings,
        created_ms=0,
        players=list(PLAYERS[:4]),
        status=rules.PLAYING,
        bots=[PLAYERS[3]],
        autoplay=[1, 3],
    )
    assert rules.deadline_for(table, rules.TURN, 3, 5000, restarted=True).at_ms == 5200
    assert rules.deadline_for(table, rules.TURN, 1, 5000, restarted=True).at_ms == 6000
    assert rules.deadline_for(table, rules.TURN, 2, 5000, restarted=True).at_ms == 25_000
    assert TableSettings().bot_pause_ms == 1000, "unset: a second, as before"
    assert TableSettings.from_dict(settings.to_dict()) == settings
    rules.check_settings(TableSettings(bot_pause_ms=0))
    with pytest.raises(rules.BadTableRequest) as refused:
        rules.check_settings(TableSettings(bot_pause_ms=5001))
    assert refused.value.reason == "BAD_PAUSE"


def test_a_turn_left_by_its_player_is_cut_to_the_autoplay_pace_or_the_bots_once_all_left() -> None:
    settings = TableSettings(seats=3, turn_seconds=20, reveal_window_seconds=7, bot_pause_ms=200)
    table = Table(
        table_id="t1",
        game_name="hand",
        creator=PLAYERS[0],
        settings=settings,
        created_ms=0,
        players=list(PLAYERS[:3]),
        status=rules.PLAYING,
        bots=[PLAYERS[2]],
        autoplay=[2],
    )
    table.deadline = Deadline(20_000, rules.TURN, (0,))
    rules.leave(table, "bob")
    # Bob's leaving does not touch Ann's running turn.
    assert rules.deadline_after_leave(table, 1, 5000) == Deadline(20_000, rules.TURN, (0,))
    rules.leave(table, "ann")
    # Ann left during her own turn and every seat is now played by the server: bot pace.
    assert rules.deadline_after_leave(table, 0, 5000) == Deadline(5200, rules.TURN, (0,))
    table.autoplay.remove(1)  # Bob came back: Ann's seat waits the auto-play second
    assert rules.deadline_after_leave(table, 0, 5000) == Deadline(6000, rules.TURN, (0,))
    table.deadline = Deadline(5500, rules.TURN, (0,))
    assert rules.deadline_after_leave(table, 0, 5000).at_ms == 5500, "never later than it was"
    # A reveal window waits its length for people, the bots' pause once none is left.
    table.deadline = Deadline(9000, rules.WINDOW)
    assert rules.deadline_after_leave(table, 0, 5000) == Deadline(9000, rules.WINDOW)
    assert rules.deadline_for(table, rules.WINDOW, None, 0, restarted=True).at_ms == 7000
    table.autoplay.append(1)
    assert rules.deadline_after_leave(table, 1, 5000) == Deadline(5200, rules.WINDOW)
    assert rules.deadline_for(table, rules.WINDOW, None, 0, restarted=True).at_ms == 200


def test_kishpa_autoplay_is_a_function_of_state_seat_and_stream() -> None:
    game, _ = kishpa.start_round(kishpa.new_game(PLAYERS), _seed("auto"))
    while game.round is not None and game.round.phase == kishpa.START_REVEAL:
        game, _ = kishpa.apply_action(game, kishpa.CloseWindow())
    state = game.round
    assert state is not None
    other = (state.turn + 1) % 4
    stream = FairStream(_seed("s"), (), kishpa.AUTOPLAY_TAG)
    assert kishpa.autoplay_action(state, other, stream) is None, "not its turn: nothing"
    move = kishpa.autoplay_action(state, state.turn, stream)
    assert isinstance(move, kishpa.Discard | kishpa.Win)  # the starter's first move
    again = kishpa.autoplay_action(
        state, state.turn, FairStream(_seed("s"), (), kishpa.AUTOPLAY_TAG)
    )
    assert again == move, "deterministic for the same state and stream"
    played, _ = kishpa.autoplay_turn(game, state.turn, _seed("t"))
    assert played.round is not None
    assert played.round.turn != state.turn or played.round.phase == kishpa.ENDED


def test_hand_autoplay_plays_the_timeout_of_the_rules() -> None:
    game, _ = hand.start_game(PLAYERS[:3], 1)
    deal, _ = hand.start_deal(game, _seed("hand"), [None] * 3)
    stream = FairStream(_seed("s"), (), "t")
    assert hand.autoplay_action(deal, deal.turn, stream) == hand.TimeOut(deal.turn)
    assert hand.autoplay_action(deal, (deal.turn + 1) % 3, stream) is None


# --- the pause between deals (issue 33) ---------------------------------------------------


def test_the_pause_waits_only_for_human_seats_that_are_not_played_by_the_server() -> None:
    table = _table(status=rules.PLAYING, players=4)
    table.bots = [PLAYERS[3]]
    table.autoplay = [2, 3]  # seat 2 left (auto-play), seat 3 is a bot
    table.deadline = rules.pause_deadline(table, 1000)
    assert rules.awaited_ready(table) == [0, 1]
    assert rules.mark_ready(table, PLAYERS[1], ended_round=4, current_round=4) == 1
    assert rules.awaited_ready(table) == [0]
    assert rules.mark_ready(table, PLAYERS[1], ended_round=4, current_round=4) is None, "twice"
    assert rules.mark_ready(table, PLAYERS[0], ended_round=4, current_round=4) == 0
    assert rules.awaited_ready(table) == []
    assert rules.pause_deadline(table, 2000).at_ms == 32_000
    assert table.ready == [], "a new pause starts with nobody ready"


def test_ready_is_refused_during_a_deal_and_ignored_once_the_next_deal_is_dealt() -> None:
    table = _table(status=rules.PLAYING, players=2)
    table.deadline = rules.deadline_for(table, rules.TURN, 0, 0, restarted=True)
    with pytest.raises(rules.TableRuleError) as playing:
        rules.mark_ready(table, PLAYERS[0], ended_round=3, current_round=3)
    assert playing.value.reason == "NOT_BETWEEN_DEALS"
    assert rules.mark_ready(table, PLAYERS[0], ended_round=2, current_round=3) is None
    for bad in (0, 4):
        with pytest.raises(rules.BadTableRequest) as wrong:
            rules.mark_ready(table, PLAYERS[0], ended_round=bad, current_round=3)
        assert wrong.value.reason == "BAD_ROUND"
    with pytest.raises(rules.NotAllowed):
        rules.mark_ready(table, "stranger", ended_round=3, current_round=3)
    table.status = rules.CLOSED
    with pytest.raises(rules.TableRuleError) as closed:
        rules.mark_ready(table, PLAYERS[0], ended_round=3, current_round=3)
    assert closed.value.reason == "NOT_PLAYING"
