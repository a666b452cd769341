"""The table service's core: one versioned commit per use case, and the views it answers.

Game-agnostic: everything game-specific is behind :class:`services.table.engine.GameEngine`.
Every mutation goes through :meth:`TableStore.transact` (load, compute, versioned commit,
retry on conflict), so bad input never changes state and two concurrent actions never both
apply against the same version. Settlement tasks are enqueued only after the commit.

:class:`TableCore` holds what every use case needs (the store, the engines, the commit and
its aftermath, the caller's view); the use cases are split along their seams and meet in
:class:`services.table.service.Tables`: seating (``seating.py``), watching (``watching.py``),
deadlines (``deadlines.py``) and playing (``service.py``).
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import os
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import structlog

from games import contributions as fair_order
from games import table as rules_table
from services.common.errors import AlreadyExists, Category
from services.common.outage import REDIS
from services.common.settings import DEFAULT_STAKES
from services.common.tracing import current_traceparent
from services.common.validation import request_fingerprint
from services.table.engine import (
    WATCH_INVITEES,
    WATCH_PLAYERS,
    BadRequestError,
    Deadline,
    GameEngine,
    GameView,
    NotAllowedError,
    Step,
    Table,
    TableError,
    TableSettings,
    announce_deadline,
)
from services.table.fanout import StreamHub
from services.table.metrics import ENQUEUE_FAILURES, PHASES
from services.table.store import (
    Committed,
    Snapshot,
    TableStore,
    Transition,
    request_field,
)
from services.table.wallet_balances import BalanceSource
from shared.phase_record import PhaseRecord
from shared.stream import NO_SEAT, StoredEvent, TableEvent
from shared.tasks import Enqueue

log = structlog.get_logger("kishpa.table")


SEED_BYTES = 80
MAX_CLIENT_SEED = 64
MAX_INVITED_WATCHERS = 50
MAX_PLAYER_ID = 100
MAX_REQUEST_ID = 128
WAITING_TABLE_TTL_S = 24 * 3600
"""A table that never starts is forgotten a day after its last join or leave."""
READ_BATCH = 200
"""Events read from the stream per read."""
CONTRIBUTION_WAIT_MS = 3_000
"""How long a due deal waits for the contributions of seats that contribute
(games/contributions.py); a deal nobody is awaited for is dealt at once."""
DEAL_STARTS = frozenset({"round_started", "deal_started"})
"""Events that start a deal: they carry its commitment and what it says of its seats."""
REVEALS = frozenset({"round_ended", "seed_revealed"})
"""Events that reveal a deal's seed: the next deal's commitment is published with them."""
SETTLEMENT_WAIT_MS = 30_000
"""How long a WatchTable stream waits after ``table_closed`` for the last settlement (when
the service enqueues settlements)."""


class TableNotFoundError(TableError):
    """No such table (or it expired after closing)."""

    category = Category.NOT_FOUND


class NotDueError(Exception):
    """The claimed deadline has moved: nothing to do."""


def table_id_for(creator: str, request_id: str) -> str:
    """A fresh random id, or with a request id one derived from (creator, request id).

    ``t`` + hex: safe as a wallet account name (``bowl:<id>``), a Redis hash tag and a
    command-line argument (a base64 id may start with ``-``).
    """
    if not request_id:
        return "t" + secrets.token_hex(12)
    digest = hashlib.sha256(f"kishpa/table\0{creator}\0{request_id}".encode()).digest()
    return "t" + digest[:12].hex()


def now_ms() -> int:
    """Wall-clock milliseconds (deadlines are shared between replicas, so not monotonic)."""
    return time.time_ns() // 1_000_000


def new_server_seed() -> bytes:
    """A fresh round seed from the OS random source (the service edge; engines get it handed)."""
    return os.urandom(SEED_BYTES)


@dataclass(frozen=True, slots=True)
class TableView:
    """One viewer's whole view of a table."""

    table: Table
    my_seat: int | None
    my_tiles: Sequence[int]
    game: GameView | None
    balances: Mapping[str, int]
    version: int
    last_event_id: str


@dataclass(frozen=True, slots=True)
class ActResult:
    """The answer to a mutation: private result facts, plus the caller's view after it."""

    view: TableView
    result: Mapping[str, Any] = field(default_factory=dict)
    event_id: str = ""
    replayed: bool = False


MAX_SEQ = 2**64 - 1
"""The largest sequence part of a Redis Stream id."""


def just_before(event_id: str) -> str:
    """The greatest stream id below ``event_id``: reading after it starts at ``event_id``."""
    ms, seq = (int(part) for part in event_id.split("-", 1))
    return f"{ms}-{seq - 1}" if seq > 0 else f"{ms - 1}-{MAX_SEQ}"


def check_request_id(request_id: str) -> None:
    if len(request_id) > MAX_REQUEST_ID:
        raise BadRequestError(
            f"request_id is longer than {MAX_REQUEST_ID} characters", "BAD_REQUEST_ID"
        )


def check_watchers(settings: TableSettings) -> None:
    watchers = settings.invited_watchers
    if len(watchers) > MAX_INVITED_WATCHERS or any(
        not 1 <= len(w) <= MAX_PLAYER_ID or not w.isprintable() for w in watchers
    ):
        raise BadRequestError(
            f"invited_watchers: at most {MAX_INVITED_WATCHERS} player ids", "BAD_WATCHERS"
        )
    if watchers and settings.watch_policy != WATCH_INVITEES:
        raise BadRequestError(
            "invited_watchers needs watch_policy WATCH_POLICY_INVITEES", "BAD_WATCHERS"
        )


def check_may_watch(table: Table, player_id: str) -> None:
    """A player without a seat watches only where the table's watch policy lets him.

    ``""`` is a service reading for a player (matchmaking): a spectator's view, always allowed.
    """
    if not player_id or table.seat_of(player_id) is not None or player_id == table.creator:
        return
    if not table.settings.may_watch(player_id):
        raise NotAllowedError(
            "this table may be watched only by "
            + ("its players" if table.settings.watch_policy == WATCH_PLAYERS else "invitees"),
            "NOT_ALLOWED_TO_WATCH",
        )


def answer_of(result: dict[str, Any]) -> dict[str, Any]:
    """The stored answer of a request: its result and what the request was (fingerprint)."""
    fingerprint = request_fingerprint()
    return {"result": result, "fp": fingerprint} if fingerprint else {"result": result}


def check_same_request(answer: Mapping[str, Any]) -> None:
    """One rule for every service (the wallet's): a request id answered before, reused for
    another body or another RPC, is refused instead of answered with the first result."""
    first, now = answer.get("fp"), request_fingerprint()
    if first and now and first != now:
        raise AlreadyExists(
            "IDEMPOTENCY_KEY_REUSED", "request_id was already used for a different request"
        )


def check_client_seed(seed: str) -> None:
    if len(seed) > MAX_CLIENT_SEED:
        raise BadRequestError(
            f"client_seed is longer than {MAX_CLIENT_SEED} characters", "BAD_CLIENT_SEED"
        )


class TableCore:
    """The store, the engines, one versioned commit and its aftermath, the caller's view."""

    def __init__(
        self,
        store: TableStore,
        engines: Mapping[str, GameEngine],
        *,
        enqueue: Enqueue | None = None,
        clock: Callable[[], int] = now_ms,
        settlement_wait_ms: int | None = None,
        hub: StreamHub[StoredEvent] | None = None,
        stakes: Mapping[str, Sequence[int]] | None = None,
        balances: BalanceSource | None = None,
        contribution_wait_ms: int = CONTRIBUTION_WAIT_MS,
        await_lone_creator: bool = True,
    ) -> None:
        self.store = store
        self.contribution_wait_ms = contribution_wait_ms
        # A creator alone with house bots is awaited for the first deal even without a
        # declaration (games/contributions.py; KISHPA_AWAIT_LONE_CREATOR).
        self.await_lone_creator = await_lone_creator
        # Where seated players' wallet balances are read (services/table/wallet_balances.py).
        self.balances = balances
        self.hub = hub
        self._own_hub = False
        self.engines = dict(engines)
        # The stakes each game is offered at (KISHPA_STAKES_<GAME>); a game not named: 1.
        self.stakes = {
            name: tuple(sorted(offered))
            for name, offered in (stakes or dict.fromkeys(self.engines, DEFAULT_STAKES)).items()
        }
        self.enqueue = enqueue
        self.clock = clock
        # A service that hands rounds to the workers waits for their last settlement
        # before ending a watch; one that does not (tests, KISHPA_TABLE_ENQUEUE=0) need not.
        if settlement_wait_ms is None:
            settlement_wait_ms = SETTLEMENT_WAIT_MS if enqueue is not None else 0
        self.settlement_wait_ms = settlement_wait_ms

    def _engine(self, name: str) -> GameEngine:
        engine = self.engines.get(name)
        if engine is None:
            raise BadRequestError(f"unknown game {name!r}", "UNKNOWN_GAME")
        return engine

    async def _load(self, table_id: str) -> tuple[Table, int]:
        snapshot = await self.store.load(table_id)
        if snapshot is None:
            raise TableNotFoundError(f"no table {table_id!r}", "TABLE_NOT_FOUND")
        return Table.from_dict(snapshot.state), snapshot.version

    def _transition(self, table: Table, step: Step | None, answer: Mapping[str, Any]) -> Transition:
        """The stored form of a table after a step (events, outbox records, deadline)."""
        now = self.clock()
        events: list[TableEvent] = []
        phases: list[PhaseRecord] = []
        if step is not None:
            table.game = step.game
            table.deadline = step.deadline
            events = step.events
            if not step.closed:
                events = [*events, *self._commit_after_reveal(table, events)]
            for phase in step.phases:
                phases.append(
                    PhaseRecord(
                        table.table_id,
                        table.game_name,
                        phase.round_no,
                        phase.phase,
                        dict(phase.record),
                        now,
                        current_traceparent(),
                    )
                )
            if step.closed:
                table.status = "closed"
                table.deadline = None
                if not any(e.type == "table_closed" for e in events):
                    events = [*events, TableEvent("table_closed", 0, NO_SEAT, {})]
        return Transition(
            state=table.to_dict(),
            events=events,
            phases=phases,
            answer=json.dumps(answer, separators=(",", ":")),
            deadline_ms=None if table.deadline is None else table.deadline.at_ms,
            finished=table.status == "closed",
            idle_ttl_s=WAITING_TABLE_TTL_S if table.status == "waiting" else 0,
        )

    # ---- the commitment order (docs/fairness.md, games/contributions.py) ---------------

    def _commit_event(self, table: Table, deal: int) -> TableEvent:
        """Commit the table to a fresh seed for ``deal``; its ``seed_committed`` event."""
        data = fair_order.commit(table, deal, new_server_seed())
        # Between deals, events carry the round that ended (0 before the first): the deal
        # they are for is in their data.
        return TableEvent(fair_order.SEED_COMMITTED, deal - 1, NO_SEAT, data)

    def _commit_after_reveal(self, table: Table, events: Sequence[TableEvent]) -> list[TableEvent]:
        """With a deal's reveal, the commitment to the next deal's seed (before anyone can
        contribute to it)."""
        revealed = [e.round for e in events if e.type in REVEALS]
        if not revealed or not table.fair:
            return []
        return [self._commit_event(table, max(revealed) + 1)]

    def _deal(self, table: Table, how: str) -> Step:
        """Deal the committed deal (``start``: the first, ``next``: the next one) now, or
        wait a short while for the seats that contribute and have not yet."""
        engine = self._engine(table.game_name)
        now = self.clock()
        table.ready = []  # the pause is over
        if fair_order.awaited(table) and not table.fair.get("waiting"):
            table.fair["waiting"] = how
            deadline = Deadline(now + self.contribution_wait_ms, fair_order.CONTRIBUTIONS)
            fair_order.wait_until(table, deadline.at_ms)
            events: list[TableEvent] = []
            announce_deadline(table, int(table.fair["deal"]) - 1, deadline, events)
            return Step(game=table.game, events=events, deadline=deadline)
        marks = fair_order.seat_marks(table) if fair_order.committed(table) else None
        seed = fair_order.take_seed(table) or new_server_seed()
        if how == fair_order.START:
            step = engine.start(table, seed, now)
        else:
            table.deadline = Deadline(now, rules_table.NEXT_ROUND)
            step = engine.on_deadline(table, seed, now)
        if marks is not None:
            # The deal names its seats (bots, declared, awaited, auto-play) in its start
            # event, so its record shows them to every verifier (docs/fairness.md).
            step.events = [
                replace(e, data={**e.data, **marks}) if e.type in DEAL_STARTS else e
                for e in step.events
            ]
        return step

    async def _mutate(
        self,
        player_id: str,
        table_id: str,
        request_id: str,
        compute: Callable[[Table], tuple[Step | None, dict[str, Any]]],
        *,
        viewer: str | None = None,
    ) -> ActResult:
        """Run one versioned mutation and answer with the caller's view after it.

        ``viewer`` is whose view answers (default the player; ``""`` a spectator's, for a
        service acting for a player, which must never see his hand).
        """
        check_request_id(request_id)
        built: list[tuple[Transition, Table]] = []

        def build(snapshot: Snapshot) -> Transition:
            table = Table.from_dict(snapshot.state)
            step, result = compute(table)
            transition = self._transition(table, step, answer_of(result))
            built[:] = [(transition, table)]
            return transition

        try:
            committed = await self.store.transact(
                table_id, build, request=request_field(player_id, request_id)
            )
        except LookupError:
            raise TableNotFoundError(f"no table {table_id!r}", "TABLE_NOT_FOUND") from None
        await self._after_commit(table_id, committed)
        committed = await self._seed_balances(table_id, committed)
        # The table the committed transition was built from is the view's source as it is:
        # read back from the transition's state it would be the same table, parsed again.
        table = built[0][1] if built and built[0][0] is committed.transition else None
        viewer = player_id if viewer is None else viewer
        return await self._answer(viewer, table_id, committed, table)

    async def _seed_balances(self, table_id: str, committed: Committed) -> Committed:
        """Read the wallet balances of the players this commit seated into the table's
        balances hash, so every view shows them before the first settlement; the answer's
        view gets them too. Without a balance source (tests) nothing changes."""
        if self.balances is None or committed.transition is None:
            return committed
        seated = [
            str(e.data["player_id"])
            for e in committed.transition.events
            if e.type == "player_joined" and e.data.get("player_id")
        ]
        known = committed.balances or {}
        wanted = [p for p in seated if p not in known]
        if not wanted:
            return committed
        found = dict(await self.balances(wanted))
        await self.store.seed_balances(table_id, found)
        return replace(committed, balances={**found, **known})

    async def _after_commit(self, table_id: str, committed: Committed) -> None:
        """Hand the commit's events to this process's watchers, and every phase it reached
        to settlement (the outbox already holds it)."""
        if committed.transition is None:
            return
        if self.hub is not None and committed.appended:
            self.hub.offer(table_id, committed.previous_event_id, committed.appended)
        for phase in committed.transition.phases:
            PHASES.labels(phase.phase).inc()
        if self.enqueue is None:
            return
        for phase in committed.transition.phases:
            try:
                await asyncio.to_thread(
                    functools.partial(
                        self.enqueue, table_id=table_id, round_no=phase.round_no, phase=phase.phase
                    )
                )
            except Exception as exc:  # the sweeper re-enqueues from the outbox
                ENQUEUE_FAILURES.inc()
                if REDIS.absorbs(exc, where="settlement_enqueue"):
                    continue  # a Redis broker away: part of the outage, logged as such
                log.exception(
                    "settlement_enqueue_failed",
                    table_id=table_id,
                    round=phase.round_no,
                    phase=phase.phase,
                )

    async def _answer(
        self, player_id: str, table_id: str, committed: Committed, table: Table | None = None
    ) -> ActResult:
        """The caller's answer to a commit; ``table``: the table ``committed.transition`` was
        built from, when the caller has it (else it is read from the transition's state)."""
        answer = json.loads(committed.answer) if committed.answer else {}
        if committed.replayed:
            check_same_request(answer)
        event_id = committed.event_ids[-1] if committed.event_ids else ""
        if committed.transition is not None and event_id:
            # The state just committed is the view's source: no second read. Its cursor is
            # just before this commit's first event (the commit was atomic at this version),
            # so a client watching from the answer also receives what its own call did: its
            # `dealt` when its join or start dealt the round, the tile it drew...
            if table is None:
                table = Table.from_dict(committed.transition.state)
            before = just_before(committed.first_event_id or event_id)
            view = self._view_of(
                table, player_id, committed.version, before, committed.balances or {}
            )
        else:
            view = await self.view(player_id, table_id)
            if committed.first_event_id:
                # A replay: the table as it is now, with the first answer's cursor.
                view = replace(view, last_event_id=just_before(committed.first_event_id))
        return ActResult(view, answer.get("result", {}), event_id, committed.replayed)

    async def view(self, player_id: str, table_id: str) -> TableView:
        """The caller's view: his own tiles in his rack order, and public facts."""
        snapshot, last_event_id, balances = await self.store.load_view(table_id)
        if snapshot is None:
            raise TableNotFoundError(f"no table {table_id!r}", "TABLE_NOT_FOUND")
        table = Table.from_dict(snapshot.state)
        check_may_watch(table, player_id)
        return self._view_of(table, player_id, snapshot.version, last_event_id, balances)

    def _view_of(
        self,
        table: Table,
        player_id: str,
        version: int,
        last_event_id: str,
        balances: Mapping[str, int],
    ) -> TableView:
        seat = table.seat_of(player_id)
        game = self._engine(table.game_name).view(table, seat) if table.game else None
        tiles: list[int] = []
        if game is not None and seat is not None:
            hand = list(game.my_tiles)
            rack = [t for t in table.rack_orders.get(player_id, []) if t in set(hand)]
            tiles = rack + [t for t in hand if t not in set(rack)]
        return TableView(table, seat, tiles, game, balances, version, last_event_id)
