"""An ended round's record as one player may know it, from the archive or the live stream.

``GetRoundRecord`` serves what the server published during the round (the commitment, the
turned kishpa, the revealed seed and client seeds) together with the caller's own private
facts (his dealt tiles and the tiles he drew from the pile), so the caller can recompute
the deal (docs/fairness.md) long after the round. A Hand deal (``deal_started`` ...
``seed_revealed``) gives the same: the caller's dealt cards, the turned card, his draws from
the stock and the revealed seeds.

A settled round is read from the round archive (:mod:`services.table.history`); one not
archived yet is folded from the table's own stream (:mod:`archive.round_fold`), the same
fold the settlement worker archives with, so both answers are the same bytes.
"""

from __future__ import annotations

from archive.round_fold import ENDING_EVENTS, fold_round
from archive.round_proto import for_player, public_proto
from kishpa.table.v1 import table_pb2
from services.common.errors import FailedPrecondition, NotFound, PermissionDenied
from services.table.engine import Table
from services.table.store import TableStore
from shared.stream import StoredEvent

READ_PAGE = 500


async def _events_through(store: TableStore, table_id: str, round_no: int) -> list[StoredEvent]:
    """The table's events up to the page after the round's end (or the stream's end)."""
    out: list[StoredEvent] = []
    cursor = "0-0"
    ended = False
    while True:
        page = await store.read_events(table_id, cursor, count=READ_PAGE)
        if not page:
            break
        cursor = page[-1].id
        out += page
        if ended:
            break
        ended = any(s.event.round == round_no and s.event.type in ENDING_EVENTS for s in page)
    return out


async def round_record(
    store: TableStore, table_id: str, round_no: int, player_id: str
) -> table_pb2.RoundRecord:
    """The record of ``round_no`` for ``player_id`` from the live table; refused unless he
    sat in that round."""
    if round_no < 1:
        raise NotFound("ROUND_NOT_FOUND", "rounds are numbered from 1")
    events = await _events_through(store, table_id, round_no)
    snapshot = await store.load(table_id)
    table = None if snapshot is None else Table.from_dict(snapshot.state)
    record = fold_round(
        table_id,
        round_no,
        events,
        table_players=[] if table is None else list(table.players),
        sit_down_seeds={} if table is None else dict(table.client_seeds),
    )
    if record is None:
        if snapshot is None:
            raise NotFound("TABLE_NOT_FOUND", f"no table {table_id!r} (or it expired)")
        raise NotFound("ROUND_NOT_FOUND", f"table {table_id} has no round {round_no}")
    mine = for_player(public_proto(record), player_id)
    if mine is None:
        raise PermissionDenied("NOT_SEATED", f"you did not play round {round_no} of this table")
    if not record.ended:
        raise FailedPrecondition(
            "ROUND_NOT_ENDED", f"round {round_no} has not ended: its seed is still secret"
        )
    return mine
