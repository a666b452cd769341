"""A round's record on the wire (``kishpa.table.v1.RoundRecord``): the public form the
archive stores and one player's form that ``GetRoundRecord`` serves.

The public form has ``my_seat = -1`` and no ``dealt_tile_ids``/``pile_draws``; a player's
form adds his seat, his dealt tiles and his draws, cut from the public ``dealt_hands`` and
``draws``. The table (from its stream) and the archive (from its stored bytes) both answer
through :func:`for_player`, so the two answers are the same bytes.
"""

from __future__ import annotations

from google.protobuf import timestamp_pb2

from archive.round_fold import RoundRecord
from games.registry import GAMES
from kishpa.common.v1 import common_pb2
from kishpa.table.v1 import table_pb2

GAME_ENUMS: dict[str, common_pb2.Game.ValueType] = {
    g.name: common_pb2.Game.ValueType(g.wire_value) for g in GAMES
}
"""Game name -> wire enum (``games.registry``)."""
PUBLIC_SEAT = -1


def public_proto(record: RoundRecord) -> table_pb2.RoundRecord:
    """The record as anyone may know it once its seed is revealed."""
    return table_pb2.RoundRecord(
        table_id=record.table_id,
        round=record.round_no,
        player_ids=record.players,
        starter_seat=record.starter,
        my_seat=PUBLIC_SEAT,
        shuffle_commitment=record.commitment,
        server_seed=record.server_seed,
        client_seeds=[s or "" for s in record.client_seeds],
        kishpa=record.kishpa,
        replaced_kishpa=record.replacement_kishpa,
        replacement_kishpa=record.replacement_kishpa,
        kishpa_tile_id=record.kishpa_id,
        replacement_kishpa_tile_id=record.replacement_id,
        dolls_returned_ids=record.dolls_returned,
        hand_size=record.hand_size,
        game=GAME_ENUMS.get(record.game, common_pb2.GAME_KISHPA),
        top_discard_id=record.top_discard or 0,
        top_discard_card_id=record.top_discard,
        dealt_hands=[
            table_pb2.SeatDeal(seat=seat, tile_ids=tiles)
            for seat, tiles in sorted(record.hands.items())
        ],
        draws=[
            table_pb2.TableDraw(seat=seat, tile_id=tile, pile_left=left)
            for seat, tile, left in record.draws
        ],
        precommitment=record.precommitment,
        precommitment_event_id=record.precommitment_event_id,
        contributions=[
            table_pb2.Contribution(seat=seat, contribution=text, event_id=event_id)
            for seat, text, event_id in record.contributions
        ],
        deal_event_id=record.deal_event_id,
        seat_client_seeds=record.seat_client_seeds,
        cards_left=[
            table_pb2.SeatDeal(seat=seat, tile_ids=cards)
            for seat, cards in sorted(record.cards_left.items())
        ],
        moves=[
            table_pb2.SeatMove(seat=seat, kind=kind, tile_ids=tiles, event_id=event_id)
            for seat, kind, tiles, event_id in record.moves
        ],
        record_version=record.record_version,
        bot_seats=record.bot_seats,
        declared_seats=record.declared_seats,
        awaited_seats=record.awaited_seats,
        autoplay_seats=record.autoplay_seats,
        awaited_until=_timestamp(record.awaited_until_ms) if record.awaited_until_ms else None,
    )


def _timestamp(ms: int) -> timestamp_pb2.Timestamp:
    stamp = timestamp_pb2.Timestamp()
    stamp.FromMilliseconds(ms)
    return stamp


def public_bytes(record: RoundRecord) -> bytes:
    """The archived form: the public record, serialized deterministically."""
    return public_proto(record).SerializeToString(deterministic=True)


def for_player(public: table_pb2.RoundRecord, player_id: str) -> table_pb2.RoundRecord | None:
    """The record as ``player_id`` may know it (None when he did not sit in the round)."""
    players = list(public.player_ids)
    if player_id not in players:
        return None
    seat = players.index(player_id)
    mine = table_pb2.RoundRecord()
    mine.CopyFrom(public)
    mine.my_seat = seat
    for deal in public.dealt_hands:
        if deal.seat == seat:
            mine.dealt_tile_ids[:] = list(deal.tile_ids)
    mine.pile_draws.extend(
        table_pb2.PileDraw(tile_id=d.tile_id, pile_left=d.pile_left)
        for d in public.draws
        if d.seat == seat
    )
    return mine
