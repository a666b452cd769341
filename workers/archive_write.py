"""The settlement worker's archive write (docs/architecture.md, "The round archive").

Called by :func:`workers.settlement.settle` after the phase's wallet batch is applied and
BEFORE settle.lua marks the phase settled, so "the phase is settled" implies "it is
archived" (the contract the Redis trimming relies on). A phase that ends no round (Kishpa
``start``, Hand ``buy_in``) archives its batch; a round's ending phase (Kishpa ``end``, Hand
``payout``) also archives the round(s) it ends - rebuilt from the table's stream with the
table service's own fold (:mod:`archive.round_fold`), so the record is the bytes
``GetRoundRecord`` serves - their results and the batches that settled them, and each
player's game, all in one transaction. Writing it twice is a no-op.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Sequence
from typing import Any

import redis

from archive.database import create_archive_engine
from archive.migrate import prepare_archive
from archive.round_fold import ENDING_EVENTS, fold_round
from archive.round_proto import public_bytes
from archive.store import ArchiveConflict, ArchiveStore, PhaseRow, RoundRow
from games.registry import GAMES, game
from services.common.logging import get_logger
from shared import keys
from shared.phase_record import PhaseRecord
from shared.stream import StoredEvent, decode

log = get_logger(__name__)

ENDING_PHASES = frozenset((g.name, g.ending_phase) for g in GAMES)
"""The phase that ends a round (Kishpa) or a game's deals (Hand), per ``games.registry``."""
READ_PAGE = 500
SETTLED = "settled"


class ArchiveRefused(Exception):
    """The archive holds other facts for this round: settling it cannot go on."""


_STORES: dict[str, ArchiveStore] = {}
_STORES_LOCK = threading.Lock()


def archive_store(url: str) -> ArchiveStore:
    """The process's archive (one engine per URL); an embedded SQLite archive is created
    here, a PostgreSQL one must be migrated already (else this raises, and is tried again
    at the next write). One thread prepares it; the others wait (Alembic is not
    thread-safe, and SQLite would make them queue on its lock anyway)."""
    with _STORES_LOCK:
        store = _STORES.get(url)
        if store is None:
            prepare_archive(url)
            store = _STORES[url] = ArchiveStore(create_archive_engine(url))
        return store


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def events_back_to(client: redis.Redis, table_id: str, first_round: int) -> list[StoredEvent]:
    """The table's events from just before ``first_round`` to the end, in stream order.

    Read backwards page by page and stopped at the end of the round before ``first_round``
    (after it come the deal's commitment and contributions), so the cost is the rounds
    archived, not the table's age. Events of round 0 (before the first deal, and
    ``table_closed`` at the very end) and ``settled`` events never stop the read.
    """
    out: list[StoredEvent] = []
    upper = "+"
    previous = first_round - 1
    while True:
        page: Any = client.xrevrange(keys.events(table_id), max=upper, min="-", count=READ_PAGE)
        if not page:
            break
        for entry_id, fields in page:
            event = decode(fields)
            # A ``settled`` event carries its phase's round but is written whenever that
            # phase settles (possibly rounds later): it never marks where a round is.
            late = event.type == SETTLED
            if not late and (
                0 < event.round < previous
                or (event.round == previous > 0 and event.type in ENDING_EVENTS)
            ):
                return out[::-1]
            out.append(StoredEvent(_text(entry_id), event))
        upper = "(" + _text(page[-1][0])
    return out[::-1]


def _sit_down_seeds(client: redis.Redis, table_id: str) -> dict[str, Any]:
    raw = client.hget(keys.state(table_id), "state")
    if raw is None:
        return {}
    state = json.loads(raw)
    return dict(state.get("client_seeds") or {}) if isinstance(state, dict) else {}


def _players(record: PhaseRecord) -> list[str]:
    players = record.record.get("players")
    return [str(p) for p in players] if isinstance(players, list) else []


def archive_phase(
    client: redis.Redis,
    store: ArchiveStore,
    record: PhaseRecord,
    *,
    batch_id: str,
    postings: Sequence[dict[str, Any]],
) -> bool:
    """Archive a phase whose batch was applied (and the rounds it ends); True if written.

    Raises :class:`ArchiveRefused` when the archive already holds different facts.
    """
    now_ms = time.time_ns() // 1_000_000
    row = PhaseRow(
        table_id=record.table_id,
        round_no=record.round_no,
        phase=record.phase,
        created_ms=record.created_ms,
        game=record.game,
        batch_id=batch_id,
        postings=tuple(dict(p) for p in postings),
    )
    try:
        if (record.game, record.phase) not in ENDING_PHASES:
            return store.write_phase(row, now_ms=now_ms)
        ended, phase_rounds = _ended_rounds(client, store, record)
        return store.write_ending(row, ended, phase_rounds=phase_rounds, now_ms=now_ms)
    except ArchiveConflict as exc:
        raise ArchiveRefused(str(exc)) from exc


def _ended_rounds(
    client: redis.Redis, store: ArchiveStore, record: PhaseRecord
) -> tuple[list[RoundRow], tuple[int, int]]:
    """The rounds an ending phase ends (Kishpa: its round; Hand: the game's deals, from its
    buy-in on) and the rounds whose phases settled them."""
    last = record.round_no
    since = game(record.game).settles_since
    if since is not None:
        # The game's deals follow its opening phase (Hand's buy-in; round = deals played
        # before it): the same answer however often this runs, so a redelivery writes the
        # same rows.
        opened = store.latest_phase_round(record.table_id, since, last - 1)
        start = 0 if opened is None else opened
        first, phase_rounds = start + 1, (start, last)
    else:
        first, phase_rounds = last, (last, last)
    first = max(1, min(first, last))
    events = events_back_to(client, record.table_id, first)
    seeds = _sit_down_seeds(client, record.table_id)
    players = _players(record)
    stake = int(record.record.get("stake") or 0)
    out = []
    for round_no in range(first, last + 1):
        folded = fold_round(
            record.table_id, round_no, events, table_players=players, sit_down_seeds=seeds
        )
        usable = folded is not None and folded.ended
        if not usable:
            # The stream is gone (the table expired before it settled): the round is still
            # archived with its results and batches, without a record to verify.
            log.warning("archive_round_without_record", table_id=record.table_id, round=round_no)
        out.append(
            RoundRow(
                table_id=record.table_id,
                round_no=round_no,
                ended_ms=record.created_ms,
                game=record.game,
                settled_round=last,
                stake=stake,
                players=tuple(folded.players if folded is not None and usable else players),
                record=public_bytes(folded) if folded is not None and usable else None,
            )
        )
    return out, phase_rounds
