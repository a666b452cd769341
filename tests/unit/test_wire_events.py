"""Every table event reaches the wire as its own typed message (issue 13: no Struct, no
string type, no -1), every tile or card with its face beside its id (issue 17, item 4).

Whole games of both games are played through the engines (no Redis); each event, as each
viewer may see it, goes through ``services.table.wire_events``. The faces are checked
against the rules packages' own ``face_of`` / ``card_text``, not the converter's table.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pytest
from google.protobuf.json_format import MessageToDict

from games.hand.cards import card_text
from games.kishpa.tiles import face_of
from kishpa.common.v1 import common_pb2
from kishpa.table.v1 import table_pb2
from kishpa.wallet.v1 import wallet_pb2
from services.table.wire_events import EVENT_KINDS, KNOWN, event_message, reference_markdown
from shared.stream import NO_SEAT, StoredEvent, TableEvent
from tests.support.wire_event_samples import SERVICE_EVENTS, hand_game, kishpa_games

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]

VIEWERS = (None, 0, 1, 2, 3)


def kishpa_face(tile_id: int) -> str:
    return str(face_of(tile_id))


def _stored(events: Iterable[TableEvent]) -> list[StoredEvent]:
    return [StoredEvent(f"{1_700_000_000_000 + n}-0", e) for n, e in enumerate(events)]


def _tiles(msg: table_pb2.TableEvent) -> list[common_pb2.Tile]:
    """Every Tile anywhere in the message."""
    out: list[common_pb2.Tile] = []

    def walk(message: object) -> None:
        if isinstance(message, common_pb2.Tile):
            out.append(message)
            return
        for field, value in message.ListFields():  # type: ignore[attr-defined]
            if field.message_type is None:
                continue
            if field.message_type.GetOptions().map_entry:
                continue
            values = value if field.is_repeated else [value]
            for item in values:
                walk(item)

    walk(msg)
    return out


def _convert_all(
    stored: list[StoredEvent], face: object, game: str
) -> dict[str, list[table_pb2.TableEvent]]:
    """Every event as every viewer sees it, by oneof case; fails on an unconverted type."""
    seen: dict[str, list[table_pb2.TableEvent]] = {}
    for entry in stored:
        for viewer in VIEWERS:
            visible = entry.event.for_viewer(viewer)
            if visible is None:
                continue
            msg = event_message(StoredEvent(entry.id, visible), face, game)  # type: ignore[arg-type]
            assert msg is not None, f"internal event {visible.type!r} has no wire message"
            kind = msg.WhichOneof("event")
            assert kind is not None
            assert visible.type in KNOWN
            # The envelope: no sentinel, a real time.
            if visible.seat == NO_SEAT:
                assert not msg.HasField("seat")
            else:
                assert msg.seat == visible.seat
            assert msg.create_time.ToMilliseconds() == int(entry.id.split("-")[0])
            seen.setdefault(kind, []).append(msg)
            seen.setdefault(f"{kind}@{viewer}", []).append(msg)
    return seen


def test_every_kishpa_event_is_a_typed_message_with_faces_beside_ids() -> None:
    kinds: set[str] = set()
    for game in kishpa_games():
        seen = _convert_all(_stored(game), kishpa_face, "kishpa")
        kinds |= {k for k in seen if "@" not in k}
        for msgs in seen.values():
            for msg in msgs:
                for tile in _tiles(msg):
                    assert tile.face == kishpa_face(tile.id)
        # A dealt hand reaches only its own seat; the others learn how many tiles.
        for viewer in (0, 1, 2, 3):
            for msg in seen.get(f"dealt@{viewer}", []):
                assert bool(msg.dealt.tiles) == (msg.seat == viewer)
                assert msg.dealt.tile_count in (14, 15)
            for msg in seen.get(f"drew@{viewer}", []):
                own = msg.seat == viewer
                from_pile = msg.drew.source == table_pb2.DRAW_SOURCE_PILE
                assert msg.drew.HasField("tile") == (own or not from_pile)
        for msg in seen["round_ended"]:
            ended = msg.round_ended
            assert len(ended.server_seed) == 160
            assert ended.shuffle_commitment
            if ended.HasField("winner_seat"):
                assert ended.final_discard.face == kishpa_face(ended.final_discard.id)
        for msg in seen["won"]:
            assert sum(len(g.tiles) for g in msg.won.groups) == 14
        for msg in seen["deadline"]:
            assert msg.deadline.kind != table_pb2.DEADLINE_KIND_UNSPECIFIED
        for msg in seen["bowl"]:
            assert msg.bowl.outcome != table_pb2.BOWL_OUTCOME_UNSPECIFIED
    assert {"round_started", "dealt", "drew", "discarded", "won", "round_ended", "bowl"} <= kinds


def test_every_hand_event_is_a_typed_message_and_a_deal_end_shows_the_hands_faces() -> None:
    events = hand_game()
    seen = _convert_all(_stored(events), card_text, "hand")
    for key, msgs in seen.items():
        for msg in msgs:
            for tile in _tiles(msg):
                assert tile.face == card_text(tile.id), key
    ended = seen["deal_ended"]
    assert len(ended) >= 7 * len(VIEWERS) - 7  # every deal, for every viewer
    internal = [e for e in events if e.type == "deal_ended"]
    for event, raw in zip(seen["deal_ended@None"], internal, strict=True):
        hands = event.deal_ended.hands
        assert [[t.id for t in h.tiles] for h in hands] == raw.data["hands"]
        assert [[t.face for t in h.tiles] for h in hands] == [
            [card_text(c) for c in h] for h in raw.data["hands"]
        ]
    for viewer in (0, 1, 2, 3):
        # Dealt cards and stock draws are wholly private to their seat.
        assert all(m.seat == viewer for m in seen.get(f"dealt@{viewer}", []))
        assert all(m.seat == viewer for m in seen.get(f"card_drawn@{viewer}", []))
    assert "dealt@None" not in seen
    assert "card_drawn@None" not in seen
    for msg in seen["drew"]:
        if msg.drew.source == table_pb2.DRAW_SOURCE_PILE:
            assert not msg.drew.HasField("tile")
            assert msg.drew.HasField("pile_count")
    assert {
        "game_started",
        "deal_started",
        "melds_laid",
        "deal_ended",
        "seed_revealed",
        "deal_scored",
        "game_ended",
    } <= set(seen)


def test_service_and_worker_events_convert_with_enums_and_timestamps() -> None:
    events = SERVICE_EVENTS
    seen = _convert_all(_stored(events), kishpa_face, "kishpa")
    created = seen["table_created@None"][0].table_created
    assert created.creator_player_id == "ann"
    assert created.settings.game == common_pb2.GAME_KISHPA
    assert created.settings.turn_time.seconds == 30
    assert created.settings.next_round_pause.ToMilliseconds() == 2500
    assert created.settings.kishpa.allow_high_wrap
    assert seen["player_joined@None"][0].player_joined.display_name == "Bob"
    deadline = seen["deadline@None"][0].deadline
    assert deadline.kind == table_pb2.DEADLINE_KIND_REVEAL_WINDOW
    assert deadline.deadline.ToMilliseconds() == 1_700_000_123_456
    causes = [m.last_round_pressed.cause for m in seen["last_round_pressed@None"]]
    assert causes == [table_pb2.LAST_ROUND_CAUSE_ABANDONED, table_pb2.LAST_ROUND_CAUSE_PRESSED]
    settled = seen["settled@None"][0].settled
    assert settled.phase == table_pb2.SETTLEMENT_PHASE_END
    assert dict(settled.balances) == {"ann": 2003, "bob": 1999}
    assert settled.settle_time.ToMilliseconds() == 1_700_000_000_500
    assert [(p.from_account, p.to_account, p.amount, p.reason) for p in settled.payments] == [
        ("player:bob", "player:ann", 2, wallet_pb2.TRANSFER_REASON_WIN),
        ("bank", "player:cat", 50, wallet_pb2.TRANSFER_REASON_BANK_LOAD),
    ]
    timed = [m.turn_timed_out for m in seen["turn_timed_out@None"]]
    assert [t.in_a_row for t in timed] == [2, 0]
    assert not timed[1].HasField("in_a_row")
    undone = seen["turn_undone@None"][0].turn_undone
    assert [(t.id, t.face) for t in undone.discard_pile] == [(0, "R1"), (5, "R6")]
    assert undone.melds[0].seat == 3
    assert undone.melds[0].kind == common_pb2.GROUP_KIND_SET


def test_every_internal_event_type_has_a_wire_message() -> None:
    """The games and the service write exactly the types the converter handles; a new one
    fails here until it has its message (and an unknown type is never sent half-built)."""
    written = {e.type for e in SERVICE_EVENTS}
    for events in (*kishpa_games(), hand_game()):
        for event in events:
            written.add(str(event.private_data["type"]) if event.type == "private" else event.type)
    assert written == KNOWN
    unknown = StoredEvent("1-0", TableEvent("something_new", 0, NO_SEAT, {}))
    assert event_message(unknown, kishpa_face, "kishpa") is None


def test_every_case_of_the_oneof_has_exactly_one_builder() -> None:
    """The builders' table and ``TableEvent.event`` are the same set of cases; no internal
    type is claimed by two of them (an event kind is one builder plus its message)."""
    cases = {f.name for f in table_pb2.TableEvent.DESCRIPTOR.oneofs_by_name["event"].fields}
    assert set(EVENT_KINDS) == cases
    types = [t for k in EVENT_KINDS.values() for t in k.types]
    assert len(types) == len(set(types)) == len(KNOWN)
    assert {"drew_from_stock", "drew_from_discard", "timed_out"} <= KNOWN


def test_the_event_table_in_api_md_is_the_builders_table() -> None:
    text = (ROOT / "docs" / "api.md").read_text()
    begin, end = "<!-- event-kinds:begin -->\n", "<!-- event-kinds:end -->"
    shown = text[text.index(begin) + len(begin) : text.index(end)]
    assert shown == reference_markdown(), "run: python -m services.table.wire_events"
    assert "| `melds_laid` (`MeldsLaid`) | Hand |" in shown


COLUMN_OF_TIMES = frozenset(
    {
        "kishpa.wallet.v1.TransferColumns.create_time_ms",
        "kishpa.wallet.v1.TransferColumns.effective_time_ms",
    }
)
"""The one exception to "times are Timestamps": the export's column chunks carry a time per
row as one int64 of a packed column (a Timestamp message per row would cost what the columns
save; docs/wallet.md, the export's columns)."""


def test_no_struct_no_string_type_and_no_sentinel_in_the_protos() -> None:
    """The contract's shape, read from the compiled descriptors of every package."""
    from kishpa.auth.v1 import auth_pb2
    from kishpa.matchmaking.v1 import matchmaking_pb2

    for module in (table_pb2, matchmaking_pb2, wallet_pb2, auth_pb2, common_pb2):
        for message in module.DESCRIPTOR.message_types_by_name.values():
            for field in message.fields:
                if field.message_type is not None:
                    assert field.message_type.full_name != "google.protobuf.Struct", field
                assert field.name != "type", field.full_name
                if field.full_name not in COLUMN_OF_TIMES:
                    assert not field.name.endswith("_ms"), f"{field.full_name}: use Timestamp"
    reason = wallet_pb2.Posting.DESCRIPTOR.fields_by_name["reason"]
    assert reason.enum_type is not None
    assert reason.enum_type.name == "TransferReason"
    event = table_pb2.TableEvent.DESCRIPTOR
    assert [o.name for o in event.oneofs if not o.name.startswith("_")] == ["event"]
    assert MessageToDict(table_pb2.TableView()) == {}, "an unseated view carries no -1 seat"


def test_the_deck_numbering_documented_in_api_md_is_the_rules_numbering() -> None:
    """docs/api.md "Tile and card ids": every example row, against both rules packages."""
    text = (ROOT / "docs" / "api.md").read_text()
    section = text.split("### Tile and card ids", 1)[1].split("\n## ", 1)[0]
    rows = [
        [cell.strip() for cell in line.strip("|").split("|")]
        for line in section.splitlines()
        if line.startswith("| ") and line[2:3].isdigit()
    ]
    assert len(rows) >= 10
    for tile_id, kishpa, hand in rows:
        assert kishpa_face(int(tile_id)) == kishpa
        assert card_text(int(tile_id)) == hand
    for tile_id in range(104):  # the formula as written there
        _copy, rest = divmod(tile_id, 52)
        colour, number = divmod(rest, 13)
        assert kishpa_face(tile_id) == "RBYK"[colour] + str(number + 1)
        assert card_text(tile_id).endswith("SHDC"[colour])


def test_acting_seats_in_a_reveal_window_name_only_the_viewers_own_seat() -> None:
    """The comment on Round.acting_seats is the behaviour: during a turn everyone sees the
    turn's seat; in an open reveal window only a viewer who may reveal sees his own seat,
    and nobody learns who else holds the kishpa."""
    from games.kishpa import round as rnd
    from services.table.convert import Converter
    from services.table.kishpa_engine import KishpaEngine
    from services.table.service import TableView
    from tests.support.kishpa_engine_play import apply_step, new_table, seed_bytes

    engine = KishpaEngine()
    convert = Converter(lambda _game, tile_id: kishpa_face(tile_id))
    windows = 0
    for n in range(400):
        table = new_table()
        apply_step(table, engine.start(table, seed_bytes(1000 + n), 0))
        state = rnd.RoundState.from_dict(table.game["round"])
        for viewer in (None, 0, 1, 2, 3):
            tiles = [] if viewer is None else engine.hand(table, viewer)
            view = TableView(table, viewer, tiles, engine.view(table, viewer), {}, 1, "")
            acting = list(convert.view(view).round.acting_seats)
            if state.phase == rnd.START_REVEAL:
                eligible = rnd.eligible_to_reveal(state)
                assert acting == ([viewer] if viewer in eligible else [])
            else:
                assert acting == [state.turn]
        windows += state.phase == rnd.START_REVEAL
        if windows >= 3:
            break
    assert windows >= 3, "no start reveal window in 400 deals"


def test_watchers_of_a_table_share_one_conversion_per_form_of_an_entry() -> None:
    """What four seats and a spectator receive of whole games is what each would get from
    its own conversion, and each entry is converted at most twice (the seat that sees its
    private part, everyone else), whatever the number of watchers."""
    from collections import Counter

    from services.table.convert import Converter

    class Counting(Converter):
        def __init__(self) -> None:
            super().__init__(lambda _game, tile_id: kishpa_face(tile_id))
            self.converted: Counter[tuple[str, str]] = Counter()

        def event(self, game: str, stored: StoredEvent) -> table_pb2.TableEvent | None:
            self.converted[(game, stored.id)] += 1
            return super().event(game, stored)

    shared = Counting()
    alone = Converter(lambda _game, tile_id: kishpa_face(tile_id))
    deliveries = 0
    private_draws = 0
    for table_no, events in enumerate(kishpa_games()):
        for entry in _stored(list(events)):
            for viewer in VIEWERS:
                visible = entry.event.for_viewer(viewer)
                if visible is None:
                    continue
                stored = StoredEvent(entry.id, visible)
                got = shared.shared_event("kishpa", f"t{table_no}", stored)
                assert got == alone.event("kishpa", stored)
                deliveries += 1
                if got is not None and got.drew.HasField("tile") and viewer is not None:
                    private_draws += 1
    assert private_draws > 0, "no private pile draw was seen"
    # The two games share entry ids (each table's stream is its own): per table and entry.
    assert max(shared.converted.values()) <= 2 * len(kishpa_games())
    assert sum(shared.converted.values()) < deliveries / 2


def test_watchers_of_a_table_share_the_messages_of_a_batch_and_receive_what_they_would_alone() -> (
    None
):
    """Batches of whole games as four seats and a spectator are sent them: the messages are
    byte for byte what each watcher's own conversion makes (one batched message, or one per
    event), and the same objects for the watchers that see the same form of a batch (the
    same entries, with the same private parts shown)."""
    from services.table.convert import Converter
    from services.table.watch_responses import WatchResponses

    shared = WatchResponses(Converter(lambda _game, tile_id: kishpa_face(tile_id)))
    alone = Converter(lambda _game, tile_id: kishpa_face(tile_id))
    checked = reused = private_forms = 0
    for table_no, events in enumerate(kishpa_games()):
        entries = _stored(list(events))
        for start in range(0, len(entries), 3):  # batches of 3 entries, as a commit makes
            batch = entries[start : start + 3]
            for batched in (True, False):
                first: dict[tuple[object, ...], list[table_pb2.WatchTableResponse]] = {}
                for viewer in VIEWERS:
                    seen = [e.event.for_viewer(viewer) for e in batch]
                    visible = [
                        StoredEvent(e.id, v)
                        for e, v in zip(batch, seen, strict=True)
                        if v is not None
                    ]
                    got = shared.of("kishpa", f"t{table_no}", visible, batched)
                    own = [alone.event("kishpa", s) for s in visible]
                    messages = [m for m in own if m is not None]
                    if batched:
                        want = [table_pb2.WatchTableResponse(events=messages)] if messages else []
                    else:
                        want = [table_pb2.WatchTableResponse(event=m) for m in messages]
                    wire = b"|".join(r.SerializeToString() for r in got)
                    assert wire == b"|".join(r.SerializeToString() for r in want)
                    checked += 1
                    # The form of the batch this watcher sees: which private parts it shows.
                    form = tuple((v.id, v.event.private_data is not None) for v in visible)
                    if form in first:
                        assert all(a is b for a, b in zip(got, first[form], strict=True))
                        reused += 1
                    else:
                        first[form] = got
                private_forms += len(first) > 1
    assert private_forms > 0, "no batch showed a seat a private part"
    assert reused > checked / 2
