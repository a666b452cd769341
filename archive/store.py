"""Writing and reading the round archive (:mod:`archive.schema`).

Writes are idempotent and keyed: a phase by (table, round, phase), a round by (table,
round). Writing what is already there changes nothing; writing something *different* under
the same key raises :class:`ArchiveConflict` (two different truths about one round are a bug
to look at, never to paper over). A round's rows, its players' games and its ending phase go
in one transaction, so a writer killed half-way leaves nothing or everything.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy import Engine
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError, OperationalError

from archive import partitions
from archive.schema import drift_marks, phases, player_games, rounds

BANK_LOAD = "bank_load"
"""Postings that are the wallet's own loads from the bank, not the game's: not in a net."""


class ArchiveConflict(Exception):
    """A second write of a key holds something different from the first."""


@dataclass(frozen=True, slots=True)
class PhaseRow:
    """One settled phase: the wallet batch and the postings it applied."""

    table_id: str
    round_no: int
    phase: str
    created_ms: int
    game: str
    batch_id: str
    postings: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True, slots=True)
class RoundRow:
    """One ended round (deal) as archived."""

    table_id: str
    round_no: int
    ended_ms: int
    game: str
    settled_round: int
    stake: int
    players: tuple[str, ...]
    record: bytes | None
    results: dict[str, int] = field(default_factory=dict)
    batch_ids: tuple[str, ...] = ()
    archived_ms: int = 0


@dataclass(frozen=True, slots=True)
class PlayerGame:
    """One game (a Kishpa round, a Hand game) as one of its players played it."""

    player_id: str
    ended_ms: int
    table_id: str
    round_no: int
    game: str
    stake: int
    seat: int
    seats: int
    net_tokens: int
    result: str


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def result_of(net: int) -> str:
    """``won``, ``lost`` or ``even`` by the sign of a net."""
    return "won" if net > 0 else "lost" if net < 0 else "even"


def net_tokens(phase_rows: Iterable[PhaseRow], players: Sequence[str]) -> dict[str, int]:
    """Each player's tokens in minus out over the phases (bank loads left out)."""
    net = dict.fromkeys(players, 0)
    for row in phase_rows:
        for posting in row.postings:
            if posting.get("reason") == BANK_LOAD:
                continue
            amount = int(posting["amount"])
            for side, sign in (("to", 1), ("from", -1)):
                account = str(posting[side])
                if account.startswith("player:") and account[7:] in net:
                    net[account[7:]] += sign * amount
    return net


def _round_from(row: Any) -> RoundRow:
    return RoundRow(
        table_id=row.table_id,
        round_no=row.round_no,
        ended_ms=row.ended_ms,
        game=row.game,
        settled_round=row.settled_round,
        stake=row.stake,
        players=tuple(json.loads(row.players)),
        record=None if row.record is None else bytes(row.record),
        results={str(k): int(v) for k, v in json.loads(row.results).items()},
        batch_ids=tuple(json.loads(row.batch_ids)),
        archived_ms=row.archived_ms,
    )


def _phase_from(row: Any) -> PhaseRow:
    return PhaseRow(
        table_id=row.table_id,
        round_no=row.round_no,
        phase=row.phase,
        created_ms=row.created_ms,
        game=row.game,
        batch_id=row.batch_id,
        postings=tuple(json.loads(row.postings)),
    )


def _game_from(row: Any) -> PlayerGame:
    return PlayerGame(
        player_id=row.player_id,
        ended_ms=row.ended_ms,
        table_id=row.table_id,
        round_no=row.round_no,
        game=row.game,
        stake=row.stake,
        seat=row.seat,
        seats=row.seats,
        net_tokens=row.net_tokens,
        result=row.result,
    )


class ArchiveStore:
    """The archive over one engine (thread-safe: each call takes its own connection)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._months: set[tuple[int, int]] = set()

    # ---- writing -----------------------------------------------------------------------

    def _ensure_months(self, *times_ms: int) -> None:
        """The partitions the rows go to exist (PostgreSQL; remembered per process)."""
        if self.engine.dialect.name != "postgresql":
            return
        for month in {partitions.month_of(ms) for ms in times_ms} - self._months:
            for attempt in range(3):
                try:
                    with self.engine.begin() as conn:
                        partitions.ensure_month(conn, *month)
                    break
                except (IntegrityError, sa.exc.ProgrammingError):
                    if attempt == 2:  # another writer created it at the same moment
                        raise
            self._months.add(month)

    def write_phase(self, row: PhaseRow, *, now_ms: int) -> bool:
        """Archive one settled phase that ends no round; True when this call wrote it."""
        self._ensure_months(row.created_ms)
        return self._retrying(lambda conn: self._put_phase(conn, row, now_ms))

    def write_ending(
        self,
        row: PhaseRow,
        ended: Sequence[RoundRow],
        *,
        phase_rounds: tuple[int, int],
        now_ms: int,
    ) -> bool:
        """Archive a round-ending phase with the rounds it ends, in one transaction.

        ``ended`` are the rounds (a Hand game: its deals) in order, the last one the round
        of ``row``; their ``results`` and ``batch_ids`` are computed here from the archived
        phases of the table with rounds in ``phase_rounds`` (inclusive), ``row`` among them.
        Returns True when this call wrote the rounds (False: all were archived already).
        """
        self._ensure_months(row.created_ms, *(r.ended_ms for r in ended))
        return self._retrying(lambda conn: self._put_ending(conn, row, ended, phase_rounds, now_ms))

    def _retrying(self, write: Any) -> bool:
        # A concurrent writer of the same key (a redelivered task racing the first) makes
        # one of the two inserts fail; run again, it finds the row and compares.
        for attempt in range(2):
            try:
                with self.engine.begin() as conn:
                    return bool(write(conn))
            except IntegrityError:
                if attempt == 1:
                    raise
        return False  # pragma: no cover - the loop returns or raises

    def _put_phase(self, conn: Connection, row: PhaseRow, now_ms: int) -> bool:
        return _insert_once(
            conn,
            phases,
            {"table_id": row.table_id, "round_no": row.round_no, "phase": row.phase},
            {
                "created_ms": row.created_ms,
                "game": row.game,
                "batch_id": row.batch_id,
                "postings": _dumps(list(row.postings)),
                "archived_ms": now_ms,
            },
            same=lambda found: _phase_from(found) == row,
            conflict=lambda found: (
                f"phase {row.table_id} {row.round_no}:{row.phase} is archived with "
                f"batch {found.batch_id!r}, now written with batch {row.batch_id!r}"
            ),
        )

    def _put_ending(
        self,
        conn: Connection,
        row: PhaseRow,
        ended: Sequence[RoundRow],
        phase_rounds: tuple[int, int],
        now_ms: int,
    ) -> bool:
        self._put_phase(conn, row, now_ms)
        low, high = phase_rounds
        settled_by = [
            _phase_from(r)
            for r in conn.execute(
                sa.select(phases)
                .where(
                    phases.c.table_id == row.table_id,
                    phases.c.round_no >= low,
                    phases.c.round_no <= high,
                )
                .order_by(phases.c.round_no, phases.c.created_ms)
            )
        ]
        last = ended[-1]
        results = net_tokens(settled_by, last.players)
        batch_ids = tuple(p.batch_id for p in settled_by if p.batch_id)
        wrote = False
        for one in ended:
            final = one.round_no == last.round_no
            complete = RoundRow(
                **{
                    **_fields(one),
                    "results": results if final else {},
                    "batch_ids": batch_ids if final else (),
                    "archived_ms": now_ms,
                }
            )
            wrote = self._put_round(conn, complete) or wrote
        for seat, player in enumerate(last.players):
            net = results.get(player, 0)
            game = PlayerGame(
                player_id=player,
                ended_ms=last.ended_ms,
                table_id=last.table_id,
                round_no=last.round_no,
                game=last.game,
                stake=last.stake,
                seat=seat,
                seats=len(last.players),
                net_tokens=net,
                result=result_of(net),
            )
            self._put_game(conn, game)
        return wrote

    def _put_round(self, conn: Connection, row: RoundRow) -> bool:
        facts = _fields(row, archived=False)
        return _insert_once(
            conn,
            rounds,
            {"table_id": row.table_id, "round_no": row.round_no},
            {
                "ended_ms": row.ended_ms,
                "game": row.game,
                "settled_round": row.settled_round,
                "stake": row.stake,
                "players": _dumps(list(row.players)),
                "record": row.record,
                "results": _dumps(row.results),
                "batch_ids": _dumps(list(row.batch_ids)),
                "archived_ms": row.archived_ms,
            },
            same=lambda found: _fields(_round_from(found), archived=False) == facts,
            conflict=lambda _found: (
                f"round {row.table_id} {row.round_no} is archived already with other "
                "facts (record, results or batches differ)"
            ),
        )

    def _put_game(self, conn: Connection, game: PlayerGame) -> None:
        fields = _fields(game)
        key = ("player_id", "table_id", "round_no", "ended_ms")
        _insert_once(
            conn,
            player_games,
            {name: fields.pop(name) for name in key},
            fields,
            same=lambda found: _game_from(found) == game,
            conflict=lambda _found: (
                f"game {game.table_id} {game.round_no} of {game.player_id} differs"
            ),
        )

    # ---- reading -----------------------------------------------------------------------

    def round(self, table_id: str, round_no: int) -> RoundRow | None:
        """The archived round, or None."""
        with self.engine.connect() as conn:
            found = conn.execute(
                sa.select(rounds).where(
                    rounds.c.table_id == table_id, rounds.c.round_no == round_no
                )
            ).first()
        return None if found is None else _round_from(found)

    def latest_phase_round(self, table_id: str, phase: str, at_most: int) -> int | None:
        """The round of the table's latest archived ``phase`` at or before ``at_most``."""
        with self.engine.connect() as conn:
            found = conn.execute(
                sa.select(sa.func.max(phases.c.round_no)).where(
                    phases.c.table_id == table_id,
                    phases.c.phase == phase,
                    phases.c.round_no <= at_most,
                )
            ).scalar()
        return None if found is None else int(found)

    def last_round(self, table_id: str) -> int:
        """The table's highest archived round (0 when none)."""
        with self.engine.connect() as conn:
            found = conn.execute(
                sa.select(sa.func.max(rounds.c.round_no)).where(rounds.c.table_id == table_id)
            ).scalar()
        return int(found or 0)

    def player_seated(self, table_id: str, player_id: str) -> bool | None:
        """Whether the player played a game archived at the table (None: the archive holds
        no round of the table)."""
        with self.engine.connect() as conn:
            played = conn.execute(
                sa.select(player_games.c.round_no)
                .where(player_games.c.player_id == player_id, player_games.c.table_id == table_id)
                .limit(1)
            ).first()
            if played is not None:
                return True
            any_round = conn.execute(
                sa.select(rounds.c.round_no).where(rounds.c.table_id == table_id).limit(1)
            ).first()
        return None if any_round is None else False

    def table_rounds(self, table_id: str, *, after_round: int, limit: int) -> list[RoundRow]:
        """A table's archived rounds after ``after_round``, in round order."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                sa.select(rounds)
                .where(rounds.c.table_id == table_id, rounds.c.round_no > after_round)
                .order_by(rounds.c.round_no)
                .limit(limit)
            ).all()
        return [_round_from(r) for r in rows]

    def player_games(
        self,
        player_id: str,
        *,
        before: tuple[int, str, int] | None,
        limit: int,
    ) -> list[PlayerGame]:
        """The player's games, newest first, strictly before the key ``before``
        (ended_ms, table_id, round_no) when given (keyset paging: no OFFSET scan)."""
        query = sa.select(player_games).where(player_games.c.player_id == player_id)
        if before is not None:
            key = sa.tuple_(
                player_games.c.ended_ms, player_games.c.table_id, player_games.c.round_no
            )
            query = query.where(key < sa.tuple_(*(sa.literal(v) for v in before)))
        query = query.order_by(
            player_games.c.ended_ms.desc(),
            player_games.c.table_id.desc(),
            player_games.c.round_no.desc(),
        ).limit(limit)
        with self.engine.connect() as conn:
            rows = conn.execute(query).all()
        return [_game_from(r) for r in rows]

    def phases_of_batch(self, batch_id: str) -> list[PhaseRow]:
        """The archived phases a wallet batch settled (one, unless the archive is wrong)."""
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(phases).where(phases.c.batch_id == batch_id)).all()
        return [_phase_from(r) for r in rows]

    # ---- the drift check's reads (workers/drift_archive.py) -------------------------------

    def phases_archived(self, since_ms: int, until_ms: int) -> list[PhaseRow]:
        """The phases archived in ``[since_ms, until_ms)`` (an index range: what is new)."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                sa.select(phases)
                .where(phases.c.archived_ms >= since_ms, phases.c.archived_ms < until_ms)
                .order_by(phases.c.archived_ms, phases.c.table_id, phases.c.round_no)
            ).all()
        return [_phase_from(r) for r in rows]

    def round_phases(self, table_id: str, round_no: int) -> list[PhaseRow]:
        """Every archived phase of one round of a table (two at most, in practice)."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                sa.select(phases)
                .where(phases.c.table_id == table_id, phases.c.round_no == round_no)
                .order_by(phases.c.created_ms)
            ).all()
        return [_phase_from(r) for r in rows]

    def drift_mark(self, name: str) -> int | None:
        """The end of the window the check ``name`` last ran clean on (None: never)."""
        with self.engine.connect() as conn:
            found = conn.execute(
                sa.select(drift_marks.c.until_ms).where(drift_marks.c.name == name)
            ).scalar()
        return None if found is None else int(found)

    def set_drift_mark(self, name: str, until_ms: int, *, now_ms: int) -> None:
        """Move the check's watermark forward to ``until_ms`` (never back)."""
        with self.engine.begin() as conn:
            moved = conn.execute(
                drift_marks.update()
                .where(drift_marks.c.name == name, drift_marks.c.until_ms <= until_ms)
                .values(until_ms=until_ms, updated_ms=now_ms)
            ).rowcount
            if moved:
                return
            known = conn.execute(
                sa.select(drift_marks.c.until_ms).where(drift_marks.c.name == name)
            ).first()
            if known is None:
                conn.execute(
                    drift_marks.insert().values(name=name, until_ms=until_ms, updated_ms=now_ms)
                )

    def round_of_phase(self, phase: PhaseRow) -> RoundRow | None:
        """The archived round a phase settled: its own round, or for a phase that ends no
        round (a start, a buy-in) the first round whose batches name its batch."""
        own = self.round(phase.table_id, phase.round_no)
        if own is not None and (not phase.batch_id or phase.batch_id in own.batch_ids):
            return own
        with self.engine.connect() as conn:
            rows = conn.execute(
                sa.select(rounds)
                .where(rounds.c.table_id == phase.table_id, rounds.c.round_no >= phase.round_no)
                .order_by(rounds.c.round_no)
            ).all()
        for row in rows:
            candidate = _round_from(row)
            if phase.batch_id and phase.batch_id in candidate.batch_ids:
                return candidate
        return own


def _insert_once(
    conn: Connection,
    table: sa.Table,
    key: dict[str, Any],
    values: dict[str, Any],
    *,
    same: Callable[[Any], bool],
    conflict: Callable[[Any], str],
) -> bool:
    """Insert the row at ``key``, or, when one is there, check it holds the same facts (a
    redelivered task writes what it wrote before; anything else is an :class:`ArchiveConflict`).
    True when this call inserted it."""
    found = conn.execute(sa.select(table).filter_by(**key)).first()
    if found is not None:
        if not same(found):
            raise ArchiveConflict(conflict(found))
        return False
    conn.execute(table.insert().values(**key, **values))
    return True


def _fields(obj: Any, *, archived: bool = True) -> dict[str, Any]:
    out = {name: getattr(obj, name) for name in obj.__slots__}
    if not archived:
        out.pop("archived_ms", None)
    return out


def is_transient_db_error(exc: BaseException) -> bool:
    """Whether a database error may go away on its own (a lost connection, a lock)."""
    return isinstance(exc, OperationalError | sa.exc.InterfaceError) and not isinstance(
        exc, IntegrityError
    )
