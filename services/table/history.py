"""The round archive as the table service reads it: paging, access, and proto answers.

The archive is synchronous SQLAlchemy; every read runs in a worker thread so the event loop
never waits on the database. An archive not reachable (or not created yet) never breaks
``GetRoundRecord`` while the table still lives: the live stream answers instead.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from google.protobuf.timestamp_pb2 import Timestamp
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError

from archive.database import create_archive_engine
from archive.round_proto import GAME_ENUMS, for_player
from archive.store import ArchiveStore, PlayerGame, RoundRow
from kishpa.common.v1 import common_pb2
from kishpa.table.v1 import history_pb2, table_pb2
from services.common.errors import InvalidArgument, Unavailable
from services.common.logging import get_logger

log = get_logger(__name__)

DEFAULT_PAGE = 50
MAX_PAGE = 100
RESULTS = {
    "won": history_pb2.GAME_RESULT_WON,
    "lost": history_pb2.GAME_RESULT_LOST,
    "even": history_pb2.GAME_RESULT_EVEN,
}
T = TypeVar("T")


def page_size(requested: int) -> int:
    """AIP-158: 0 is the default, more than the maximum is the maximum, negative refused."""
    if requested < 0:
        raise InvalidArgument("INVALID_PAGE_SIZE", "page_size must not be negative")
    return DEFAULT_PAGE if requested == 0 else min(requested, MAX_PAGE)


def _scope(*parts: object) -> str:
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:16]


def make_token(scope: str, key: list[Any]) -> str:
    """An opaque page token: the last key served, bound to the request it answers."""
    raw = json.dumps({"s": scope, "k": key}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def read_token(token: str, scope: str, arity: int) -> list[Any] | None:
    """The key in ``token`` (None for ""); INVALID_ARGUMENT BAD_PAGE_TOKEN for a token not
    issued for this request."""
    if not token:
        return None
    try:
        data = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        key = data["k"]
        valid = data["s"] == scope and isinstance(key, list) and len(key) == arity
    except (ValueError, TypeError, KeyError):
        valid = False
    if not valid:
        raise InvalidArgument(
            "BAD_PAGE_TOKEN", "page_token is not one this request's previous page returned"
        )
    return list(key)


def _timestamp(ms: int) -> Timestamp:
    stamp = Timestamp()
    stamp.FromMilliseconds(ms)
    return stamp


def game_proto(game: PlayerGame) -> history_pb2.PlayerGame:
    return history_pb2.PlayerGame(
        table_id=game.table_id,
        round=game.round_no,
        game=GAME_ENUMS.get(game.game, common_pb2.GAME_UNSPECIFIED),
        stake=game.stake,
        seat=game.seat,
        seat_count=game.seats,
        net_tokens=game.net_tokens,
        result=RESULTS.get(game.result, history_pb2.GAME_RESULT_UNSPECIFIED),
        ended_at=_timestamp(game.ended_ms),
    )


def round_proto(row: RoundRow) -> history_pb2.ArchivedRound:
    moves: list[table_pb2.SeatMove] = []
    if row.record is not None:
        moves = list(table_pb2.RoundRecord.FromString(row.record).moves)
    return history_pb2.ArchivedRound(
        table_id=row.table_id,
        round=row.round_no,
        game=GAME_ENUMS.get(row.game, common_pb2.GAME_UNSPECIFIED),
        player_ids=list(row.players),
        stake=row.stake,
        ended_at=_timestamp(row.ended_ms),
        settled_round=row.settled_round,
        results=[
            history_pb2.PlayerNet(player_id=p, net_tokens=row.results[p])
            for p in row.players
            if p in row.results
        ],
        batch_ids=list(row.batch_ids),
        record_available=row.record is not None,
        moves=moves,
    )


class History:
    """Reads of the round archive at ``url`` (the engine is made on first use)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._store: ArchiveStore | None = None

    @property
    def store(self) -> ArchiveStore | None:
        """The archive, once it exists (an embedded SQLite file is made by the first worker
        or `kishpa migrate`: until then there is nothing archived to read)."""
        if self._store is None:
            parsed = make_url(self.url)
            if parsed.get_backend_name() == "sqlite":
                path = parsed.database or ""
                if path in ("", ":memory:") or not Path(path).exists():
                    return None
            self._store = ArchiveStore(create_archive_engine(self.url))
        return self._store

    async def _read(self, read: Callable[[ArchiveStore], T], empty: T) -> T:
        store = self.store
        if store is None:
            return empty
        try:
            return await asyncio.to_thread(read, store)
        except SQLAlchemyError as exc:
            log.warning("archive_unavailable", error=str(exc).splitlines()[0])
            raise Unavailable(
                "DEPENDENCY_UNAVAILABLE", "the round archive cannot be read right now"
            ) from None

    async def round_record(
        self, table_id: str, round_no: int
    ) -> tuple[table_pb2.RoundRecord | None, bool]:
        """(the archived public record or None, whether the round is archived at all);
        (None, False) also when the archive cannot be read (the live table answers)."""
        try:
            row = await self._read(lambda s: s.round(table_id, round_no), None)
        except Unavailable:
            return None, False
        if row is None:
            return None, False
        if row.record is None:
            return None, True
        return table_pb2.RoundRecord.FromString(row.record), True

    async def player_games(
        self, player_id: str, size: int, token: str
    ) -> tuple[list[PlayerGame], str]:
        scope = _scope("games", player_id)
        key = read_token(token, scope, 3)
        before = None if key is None else (int(key[0]), str(key[1]), int(key[2]))
        empty: list[PlayerGame] = []
        games = await self._read(
            lambda s: s.player_games(player_id, before=before, limit=size + 1), empty
        )
        more = len(games) > size
        games = games[:size]
        last = games[-1] if games else None
        next_token = (
            make_token(scope, [last.ended_ms, last.table_id, last.round_no])
            if more and last is not None
            else ""
        )
        return games, next_token

    async def table_rounds(
        self, table_id: str, size: int, token: str
    ) -> tuple[list[RoundRow], str]:
        scope = _scope("rounds", table_id)
        key = read_token(token, scope, 1)
        after = 0 if key is None else int(key[0])
        none: list[RoundRow] = []
        rows = await self._read(
            lambda s: s.table_rounds(table_id, after_round=after, limit=size + 1), none
        )
        more = len(rows) > size
        rows = rows[:size]
        next_token = make_token(scope, [rows[-1].round_no]) if more and rows else ""
        return rows, next_token

    async def sat_at(self, table_id: str, player_id: str) -> bool | None:
        """Whether the player sat in any archived round of the table (None: no round)."""
        seated: bool | None = await self._read(lambda s: s.player_seated(table_id, player_id), None)
        return seated


def personal(public: table_pb2.RoundRecord, player_id: str) -> table_pb2.RoundRecord | None:
    """The record as the player may know it (None: he did not sit in the round)."""
    return for_player(public, player_id)
