"""The table service's use cases: validate, authorize, ask the game engine, commit atomically.

Game-agnostic: everything game-specific is behind :class:`services.table.engine.GameEngine`.
Every mutation goes through :meth:`TableStore.transact` (load, compute, versioned commit,
retry on conflict), so bad input never changes state and two concurrent actions never both
apply against the same version. Settlement tasks are enqueued only after the commit.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import os
import secrets
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import structlog

from games import contributions as fair_order
from games import table as rules_table
from services.common.errors import AlreadyExists, Category
from services.common.redis_client import pubsub_source
from services.common.settings import DEFAULT_STAKES
from services.common.tracing import current_traceparent
from services.common.validation import request_fingerprint
from services.table.engine import (
    WATCH_INVITEES,
    WATCH_PLAYERS,
    Action,
    BadRequestError,
    Deadline,
    GameEngine,
    GameView,
    Hint,
    NotAllowedError,
    Step,
    Table,
    TableError,
    TableSettings,
    announce_deadline,
)
from services.table.fanout import StreamHub, parse_id
from services.table.metrics import DEADLINES, ENQUEUE_FAILURES, PHASES
from services.table.store import (
    Committed,
    Snapshot,
    TableExistsError,
    TableStore,
    Transition,
    request_field,
)
from services.table.wallet_balances import BalanceSource
from shared import keys
from shared.phase_record import PhaseRecord
from shared.stream import NO_SEAT, StoredEvent, TableEvent, stored_event
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


def _table_id_for(creator: str, request_id: str) -> str:
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


def _check_request_id(request_id: str) -> None:
    if len(request_id) > MAX_REQUEST_ID:
        raise BadRequestError(
            f"request_id is longer than {MAX_REQUEST_ID} characters", "BAD_REQUEST_ID"
        )


def _check_watchers(settings: TableSettings) -> None:
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


def _check_may_watch(table: Table, player_id: str) -> None:
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


def _answer_of(result: dict[str, Any]) -> dict[str, Any]:
    """The stored answer of a request: its result and what the request was (fingerprint)."""
    fingerprint = request_fingerprint()
    return {"result": result, "fp": fingerprint} if fingerprint else {"result": result}


def _check_same_request(answer: Mapping[str, Any]) -> None:
    """One rule for every service (the wallet's): a request id answered before, reused for
    another body or another RPC, is refused instead of answered with the first result."""
    first, now = answer.get("fp"), request_fingerprint()
    if first and now and first != now:
        raise AlreadyExists(
            "IDEMPOTENCY_KEY_REUSED", "request_id was already used for a different request"
        )


def _check_client_seed(seed: str) -> None:
    if len(seed) > MAX_CLIENT_SEED:
        raise BadRequestError(
            f"client_seed is longer than {MAX_CLIENT_SEED} characters", "BAD_CLIENT_SEED"
        )


class Tables:
    """The table use cases over one store and the registered game engines."""

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
    ) -> None:
        self.store = store
        self.contribution_wait_ms = contribution_wait_ms
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

    # ---- helpers ---------------------------------------------------------------------

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
        _check_request_id(request_id)

        def build(snapshot: Snapshot) -> Transition:
            table = Table.from_dict(snapshot.state)
            step, result = compute(table)
            return self._transition(table, step, _answer_of(result))

        try:
            committed = await self.store.transact(
                table_id, build, request=request_field(player_id, request_id)
            )
        except LookupError:
            raise TableNotFoundError(f"no table {table_id!r}", "TABLE_NOT_FOUND") from None
        await self._after_commit(table_id, committed)
        committed = await self._seed_balances(table_id, committed)
        return await self._answer(player_id if viewer is None else viewer, table_id, committed)

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
            except Exception:  # the sweeper re-enqueues from the outbox
                ENQUEUE_FAILURES.inc()
                log.exception(
                    "settlement_enqueue_failed",
                    table_id=table_id,
                    round=phase.round_no,
                    phase=phase.phase,
                )

    async def _answer(self, player_id: str, table_id: str, committed: Committed) -> ActResult:
        answer = json.loads(committed.answer) if committed.answer else {}
        if committed.replayed:
            _check_same_request(answer)
        event_id = committed.event_ids[-1] if committed.event_ids else ""
        if committed.transition is not None and event_id:
            # The state just committed is the view's source: no second read. Its cursor is
            # just before this commit's first event (the commit was atomic at this version),
            # so a client watching from the answer also receives what its own call did: its
            # `dealt` when its join or start dealt the round, the tile it drew...
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

    # ---- use cases -------------------------------------------------------------------

    async def create(
        self,
        creator: str,
        settings: TableSettings,
        *,
        game: str = "kishpa",
        players: Sequence[tuple[str, str]] = (),
        client_seed: str = "",
        client_seeds: Mapping[str, str] | None = None,
        auto_start: bool = False,
        request_id: str = "",
        table_id: str | None = None,
        viewer: str | None = None,
    ) -> ActResult:
        """Open a table with ``players`` (id, display name) seated in order, creator first.

        A player creating a table sits alone in seat 0; matchmaking seats a whole table and
        may ask it to start as soon as it is full. ``client_seeds`` (by player) and
        ``client_seed`` (the creator's) are mixed into every round's shuffle.
        """
        _check_request_id(request_id)
        seeds = dict(client_seeds or {})
        if client_seed:
            seeds[creator] = client_seed
        for seed in seeds.values():
            _check_client_seed(seed)
        engine = self._engine(game)
        rules_table.check_settings(settings)
        _check_watchers(settings)
        offered = self.stakes.get(game, (1,))
        if settings.stake not in offered:
            listed = ", ".join(str(stake) for stake in offered)
            raise BadRequestError(f"stake must be one of: {listed}", "BAD_STAKE")
        seated = list(players) or [(creator, "")]
        # A replayed CreateTable must find the table it created: with a request id, the
        # table's id is derived from it, so "create" is atomic and idempotent in one step.
        table_id = table_id or _table_id_for(creator, request_id)
        bots = rules_table.house_bots(settings, len(seated), table_id)
        seated += bots
        ids = [p for p, _ in seated]
        rules_table.check_players(creator, ids, settings)
        engine.check_settings(settings)
        who = creator if viewer is None else viewer

        def build(snapshot: Snapshot) -> Transition:
            table = Table(
                table_id=table_id,
                game_name=game,
                creator=creator,
                settings=settings,
                created_ms=self.clock(),
                players=ids,
                names={p: n for p, n in seated if n},
                auto_start=auto_start,
                client_seeds={p: seed for p, seed in seeds.items() if p in ids},
                bots=[p for p, _ in bots],
            )
            events = [
                TableEvent(
                    "table_created", 0, 0, {"creator": creator, "game": game, **settings.to_dict()}
                ),
                self._commit_event(table, 1),
                *(
                    TableEvent(
                        "player_joined",
                        0,
                        seat,
                        {"player_id": p, "name": n, **({"bot": True} if p in table.bots else {})},
                    )
                    for seat, (p, n) in enumerate(seated)
                ),
            ]
            step = self._maybe_auto_start(table, Step(game={}, events=events))
            return self._transition(table, step, _answer_of({"table_id": table_id}))

        try:
            committed = await self.store.transact(
                table_id, build, create=True, request=request_field(creator, request_id)
            )
        except TableExistsError:
            if not request_id:
                raise
            return ActResult(await self.view(who, table_id), {"table_id": table_id}, "", True)
        await self._after_commit(table_id, committed)
        committed = await self._seed_balances(table_id, committed)
        return await self._answer(who, table_id, committed)

    def _maybe_auto_start(self, table: Table, step: Step) -> Step:
        """Deal the first round in the same commit when an auto-start table is full."""
        if not rules_table.starts_by_itself(table):
            return step
        rules_table.start_playing(table)
        started = self._deal(table, fair_order.START)
        started.events = [*step.events, *started.events]
        return started

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
        if fair_order.awaited(table) and not table.fair.get("waiting"):
            table.fair["waiting"] = how
            deadline = Deadline(now + self.contribution_wait_ms, fair_order.CONTRIBUTIONS)
            events: list[TableEvent] = []
            announce_deadline(table, int(table.fair["deal"]) - 1, deadline, events)
            return Step(game=table.game, events=events, deadline=deadline)
        seed = fair_order.take_seed(table) or new_server_seed()
        if how == fair_order.START:
            return engine.start(table, seed, now)
        table.deadline = Deadline(now, rules_table.NEXT_ROUND)
        return engine.on_deadline(table, seed, now)

    async def contribute(
        self,
        player_id: str,
        table_id: str,
        deal: int,
        contribution: str,
        *,
        request_id: str = "",
    ) -> ActResult:
        """Accept the player's contribution to the coming deal; deal it when it was only
        waiting for this one."""

        def compute(table: Table) -> tuple[Step | None, dict[str, Any]]:
            seat, new = fair_order.accept(table, player_id, deal, contribution)
            if not new:
                return None, {}
            event = TableEvent(
                fair_order.CONTRIBUTION_ACCEPTED,
                deal - 1,
                seat,
                {"deal": deal, "contribution": contribution},
            )
            step = Step(game=table.game, events=[event], deadline=table.deadline)
            waiting = table.fair.get("waiting")
            if waiting and not fair_order.awaited(table):
                dealt = self._deal(table, str(waiting))
                dealt.events = [event, *dealt.events]
                step = dealt
            return step, {}

        return await self._mutate(player_id, table_id, request_id, compute)

    async def join(
        self,
        player_id: str,
        table_id: str,
        *,
        name: str = "",
        client_seed: str = "",
        request_id: str = "",
        viewer: str | None = None,
    ) -> ActResult:
        """Take the next free seat at a table that has not started."""
        _check_client_seed(client_seed)

        def compute(table: Table) -> tuple[Step | None, dict[str, Any]]:
            fact = rules_table.seat(table, player_id, name=name, client_seed=client_seed)
            event = TableEvent(fact.type, 0, fact.seat, fact.data)
            step = self._maybe_auto_start(table, Step(game=table.game, events=[event]))
            return step, {"seat": fact.seat}

        return await self._mutate(player_id, table_id, request_id, compute, viewer=viewer)

    async def leave(self, player_id: str, table_id: str, *, request_id: str = "") -> ActResult:
        """Leave a waiting table; during a game the seat goes on auto-play instead."""

        def compute(table: Table) -> tuple[Step | None, dict[str, Any]]:
            fact = rules_table.leave(table, player_id)
            round_no = 0
            if table.status != rules_table.WAITING:
                round_no = self._engine(table.game_name).view(table, None).round_no
            event = TableEvent(fact.type, round_no, fact.seat, fact.data)
            return Step(game=table.game, events=[event], deadline=table.deadline), {}

        return await self._mutate(player_id, table_id, request_id, compute)

    async def start(self, player_id: str, table_id: str, *, request_id: str = "") -> ActResult:
        """The creator starts the first round."""

        def compute(table: Table) -> tuple[Step | None, dict[str, Any]]:
            rules_table.check_start(table, player_id)
            rules_table.start_playing(table)
            return self._deal(table, fair_order.START), {}

        return await self._mutate(player_id, table_id, request_id, compute)

    async def act(
        self, player_id: str, table_id: str, action: Action, *, request_id: str = ""
    ) -> ActResult:
        """A seated player's move in the game (draw, discard, win, reveal, decline ...)."""

        def compute(table: Table) -> tuple[Step | None, dict[str, Any]]:
            seat = rules_table.seat_of(table, player_id)
            rules_table.check_playing(table)
            step = self._engine(table.game_name).act(table, seat, action, self.clock())
            rules_table.player_acted(table, seat)
            return step, step.result

        return await self._mutate(player_id, table_id, request_id, compute)

    async def close_by_operator(
        self, table_id: str, *, reason: str, closed_by: str, request_id: str
    ) -> tuple[ActResult, bool, int]:
        """Close a stuck or abandoned table at once (AdminService.CloseTable, audited there).

        No further round starts and its timers stop; watchers receive ``table_closed`` with
        the reason. Returns the spectator's view, whether it was closed already, and how many
        of its phases the workers have not settled yet (the bowl is refunded after those).
        """

        def compute(table: Table) -> tuple[Step | None, dict[str, Any]]:
            if table.status == "closed":
                return None, {"already_closed": True}
            round_no = int(table.game.get("round_no", 0) or 0)
            data = {"reason": reason, "closed_by": closed_by, "by_operator": True}
            event = TableEvent("table_closed", round_no, NO_SEAT, data)
            return Step(game=table.game, events=[event], closed=True), {"already_closed": False}

        result = await self._mutate(f"admin:{closed_by}", table_id, request_id, compute, viewer="")
        pending = await self.store.unsettled_phases(table_id)
        return result, bool(result.result.get("already_closed")), pending

    async def press_last_round(
        self, player_id: str, table_id: str, *, request_id: str = ""
    ) -> ActResult:
        """The creator makes the next round to start the final one."""

        def compute(table: Table) -> tuple[Step | None, dict[str, Any]]:
            rules_table.check_creator(table, player_id, "press last round")
            rules_table.check_playing(table)
            return self._engine(table.game_name).press_last_round(table, self.clock()), {}

        return await self._mutate(player_id, table_id, request_id, compute)

    async def set_rack_order(
        self, player_id: str, table_id: str, tile_ids: Sequence[int], *, request_id: str = ""
    ) -> ActResult:
        """Keep the player's own order of his tiles, so a reconnecting client shows it again."""

        def compute(table: Table) -> tuple[Step | None, dict[str, Any]]:
            seat = rules_table.seat_of(table, player_id)
            rules_table.check_playing(table)
            hand = self._engine(table.game_name).hand(table, seat)
            rules_table.check_rack_order(hand, tile_ids)
            table.rack_orders[player_id] = list(tile_ids)
            return Step(game=table.game, deadline=table.deadline), {}

        return await self._mutate(player_id, table_id, request_id, compute)

    async def view(self, player_id: str, table_id: str) -> TableView:
        """The caller's view: his own tiles in his rack order, and public facts."""
        snapshot, last_event_id, balances = await self.store.load_view(table_id)
        if snapshot is None:
            raise TableNotFoundError(f"no table {table_id!r}", "TABLE_NOT_FOUND")
        table = Table.from_dict(snapshot.state)
        _check_may_watch(table, player_id)
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

    async def hint(self, player_id: str, table_id: str) -> tuple[str, Hint]:
        """The table's game and a suggestion for the caller (the solver's best arrangement)."""
        table, _ = await self._load(table_id)
        seat = rules_table.seat_of(table, player_id)
        rules_table.check_playing(table)
        return table.game_name, self._engine(table.game_name).hint(table, seat)

    async def game_of(self, table_id: str) -> str:
        """The game a table plays (NOT_FOUND for an unknown table)."""
        table, _ = await self._load(table_id)
        return table.game_name

    def face(self, game: str, tile_id: int) -> str:
        """The text of a tile of a game."""
        return self._engine(game).face(tile_id)

    def _new_hub(self) -> StreamHub[StoredEvent]:
        return StreamHub(
            self.store.redis,
            pubsub_source(self.store.redis),
            stream_key=keys.events,
            channel=keys.notify,
            decode=stored_event,
        )

    async def _started_hub(self) -> StreamHub[StoredEvent]:
        """The shared fan-out (a ``Tables`` built without one starts its own on first use)."""
        if self.hub is None:
            self.hub = self._new_hub()
            self._own_hub = True
        # A table the hub reads from Redis was moved on by another writer: its kept state
        # is stale (watchers subscribe through here, so this is set before any read).
        self.hub.on_read = self.store.cache.forget
        await self.hub.start()
        return self.hub

    async def aclose(self) -> None:
        """Stop a fan-out this object started itself (the server stops the one it gave)."""
        if self.hub is not None and self._own_hub:
            await self.hub.stop()

    async def watch(
        self, player_id: str, table_id: str, after_id: str = "", *, settle_poll_ms: int = 1000
    ) -> AsyncIterator[StoredEvent]:
        """Every event of :meth:`watch_batches`, one by one."""
        async for batch in self.watch_batches(
            player_id, table_id, after_id, settle_poll_ms=settle_poll_ms
        ):
            for stored in batch:
                yield stored

    async def watch_batches(
        self, player_id: str, table_id: str, after_id: str = "", *, settle_poll_ms: int = 1000
    ) -> AsyncIterator[list[StoredEvent]]:
        """Every event after ``after_id``, then live ones, as this player may see them, in
        batches: each batch holds what was ready at once (at least one event, at most
        ``READ_BATCH``), so a commit's events travel together.

        Live events come from the process's shared fan-out (:mod:`services.table.fanout`):
        the watcher subscribes first, then catches up from ``after_id`` with plain reads,
        then takes the hub's batches, skipping ids it already delivered, so every event
        comes once and in order. A watcher that falls too far behind is cut off with
        ``RESOURCE_EXHAUSTED``/``WATCH_TOO_SLOW`` and resumes from its last id.

        Public data always; private facts only those of the player's own seat; wholly private
        events of other seats are skipped. After ``table_closed`` the stream goes on until
        the workers have settled the table's last phase (so the watcher receives the final
        balances), for at most ``settlement_wait_ms``, re-checking every ``settle_poll_ms``.
        """
        table, _ = await self._load(table_id)
        _check_may_watch(table, player_id)
        seat = table.seat_of(player_id)
        cursor = after_id or "0-0"
        cursor_key = parse_id(cursor)
        closed_at: int | None = None
        hub = await self._started_hub()

        async def admit(batch: list[StoredEvent]) -> list[StoredEvent]:
            """Advance past ``batch``; what this viewer may see of it."""
            nonlocal seat, closed_at, cursor, cursor_key
            visible: list[StoredEvent] = []
            for stored in batch:
                cursor = stored.id
                event = stored.event
                if event.type in ("player_joined", "player_left"):
                    # Seats move only before the game starts, before any private fact exists.
                    table, _ = await self._load(table_id)
                    seat = table.seat_of(player_id)
                if event.type == "table_closed":
                    closed_at = self.clock()
                shown = event.for_viewer(seat)
                if shown is not None:
                    visible.append(StoredEvent(stored.id, shown))
            cursor_key = parse_id(cursor)
            return visible

        async with hub.subscribe(table_id) as subscription:
            catching_up = True
            while True:
                if catching_up:
                    # Plain reads (no BLOCK): what the stream holds after ``cursor`` now.
                    batch = await self.store.read_events(table_id, cursor, count=READ_BATCH)
                    catching_up = len(batch) == READ_BATCH
                else:
                    wait: float | None = None
                    if closed_at is not None:
                        left = self.settlement_wait_ms - (self.clock() - closed_at)
                        pending = left > 0 and await self.store.unsettled_phases(table_id) > 0
                        if not pending:
                            # One last plain read: an entry whose wake-up is still on its way.
                            catching_up = True
                            batch = await self.store.read_events(table_id, cursor, count=READ_BATCH)
                            visible = await admit(batch)
                            if visible:
                                yield visible
                            if len(batch) < READ_BATCH:
                                return
                            continue
                        wait = min(left, settle_poll_ms) / 1000
                    # Hold nothing of the last batch while waiting: thousands of idle
                    # watchers holding theirs make every garbage collection walk them.
                    batch = visible = []
                    entries = await subscription.next_batch(wait)
                    batch = [e.value for e in entries if e.key > cursor_key]
                    del entries
                for start in range(0, len(batch), READ_BATCH):
                    visible = await admit(batch[start : start + READ_BATCH])
                    if visible:
                        yield visible

    async def handle_deadline(self, table_id: str) -> bool:
        """Apply a passed deadline through the versioned commit; False when nothing was due."""
        applied: list[str] = []  # the kind of the deadline the last attempt applied

        def build(snapshot: Snapshot) -> Transition:
            table = Table.from_dict(snapshot.state)
            now = self.clock()
            if table.status != "playing" or table.deadline is None or table.deadline.at_ms > now:
                raise NotDueError
            engine = self._engine(table.game_name)
            kind = table.deadline.kind
            applied.append(kind)
            if kind == fair_order.CONTRIBUTIONS:
                step = self._deal(table, str(table.fair.get("waiting") or fair_order.NEXT))
            elif kind == rules_table.NEXT_ROUND:
                step = self._deal(table, fair_order.NEXT)
            else:
                step = engine.on_deadline(table, new_server_seed(), now)
            if step.timed_out_seat is not None:
                limit = engine.timeouts_before_autoplay
                fact = rules_table.record_timeout(table, step.timed_out_seat, limit)
                if fact is not None:
                    round_no = engine.view(table, None).round_no
                    step.events.append(TableEvent(fact.type, round_no, fact.seat, fact.data))
            return self._transition(table, step, {})

        try:
            committed = await self.store.transact(table_id, build)
        except NotDueError:
            # Restore the index from the state (the claim moved it by a lease).
            await self.store.set_deadline(table_id, await self.store.deadline_of(table_id))
            return False
        except LookupError:
            await self.store.set_deadline(table_id, None)
            return False
        DEADLINES.labels(applied[-1]).inc()
        await self._after_commit(table_id, committed)
        return True


__all__ = [
    "NO_SEAT",
    "ActResult",
    "TableNotFoundError",
    "TableView",
    "Tables",
    "new_server_seed",
    "now_ms",
]
