"""The matchmaking use cases: quick-match queues, private tables, "where is my table".

State lives in Redis (:mod:`services.matchmaking.store`); tables are created and seated
through the table service's API (:mod:`services.matchmaking.gateways`). A queue join that
completes a group seats it at once; groups whose seating failed (the table service was
down, or this process died between popping and seating) are retried by
:meth:`Matchmaking.sweep`, with the same idempotency key, so a group gets exactly one table.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import grpc
import structlog

from games.registry import NAMES
from games.table import TableSettings
from kishpa.table.v1 import table_pb2
from services.common.errors import (
    Aborted,
    AlreadyExists,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    ServiceError,
    failure_of,
)
from services.common.games import GAME_ENUMS
from services.common.games import GAMES as GAME_NAMES
from services.common.outage import REDIS
from services.common.settings import DEFAULT_STAKES
from services.common.validation import request_fingerprint
from services.matchmaking import codes, metrics
from services.matchmaking.gateways import SeatedPlayer, TableGateway
from services.matchmaking.keys import Queue
from services.matchmaking.notify import TicketNotifier
from services.matchmaking.store import (
    CANCELLED,
    EXPIRED,
    FORMING,
    MATCHED,
    WAITING,
    MatchStore,
    Reservation,
    Seating,
    Ticket,
)
from shared.retry import is_retryable

log = structlog.get_logger("kishpa.matchmaking")

GAMES = NAMES
"""Games the table service plays; each (game, seats, stake) has its own queue."""
SEAT_RANGE = (2, 4)
MAX_REQUEST_ID = 128
MAX_CLIENT_SEED = 64
"""Longest client seed (the table service's limit: checked here so a group never fails)."""
ENDED = (MATCHED, CANCELLED, EXPIRED)
"""Ticket states that never change again: their reservation may be given back."""
JOIN_ATTEMPTS = 5
"""Reservations a join looks past (each one's ticket found ended) before it gives up."""


def now_ms() -> int:
    """Wall-clock milliseconds (expiries are shared between replicas)."""
    return time.time_ns() // 1_000_000


@dataclass(frozen=True, slots=True)
class MatchmakingConfig:
    """Tunables of the service (defaults suit production; tests shorten them)."""

    ticket_ttl_s: int = 300
    """How long a ticket waits for a table before it expires."""
    invite_ttl_s: int = 3600
    """How long an invite code is accepted."""
    seating_ttl_s: int = 12 * 3600
    """How long "the table he sits at" is remembered (a table that closes is forgotten)."""
    stale_group_ms: int = 5000
    """A group popped this long ago and still not seated is retried by the sweeper."""
    turn_seconds: int = 0
    """Turn timer of quick-match tables (0: the table service's default)."""
    reveal_window_seconds: int = 0
    next_round_pause_ms: int = 0
    stakes: Mapping[str, tuple[int, ...]] = field(
        default_factory=lambda: dict.fromkeys(GAMES, DEFAULT_STAKES)
    )
    """Stakes offered per game (``KISHPA_STAKES_<GAME>``, the same the table service reads)."""
    table_defaults: TableSettings = field(default_factory=TableSettings)
    """The timers the table service gives a table that leaves them unset
    (``KISHPA_TABLE_*``, read by both services): what the lobby is told (ListOffers)."""


@dataclass(frozen=True, slots=True)
class PrivateTable:
    """A private table made by CreatePrivateTable."""

    invite_code: str
    table_id: str
    expire_ms: int


@dataclass(frozen=True, slots=True)
class QueueState:
    """A ticket plus how many players wait in its queue now."""

    ticket: Ticket
    players_waiting: int


def _client_seed(seed: str) -> str:
    if len(seed) > MAX_CLIENT_SEED:
        raise InvalidArgument(
            "BAD_CLIENT_SEED", f"client_seed is longer than {MAX_CLIENT_SEED} characters"
        )
    return seed


def _reused() -> AlreadyExists:
    return AlreadyExists(
        "IDEMPOTENCY_KEY_REUSED", "request_id was already used for a different request"
    )


def _same_request(answer: Mapping[str, Any]) -> None:
    """The wallet's rule for every service: a replay must be the same request."""
    first, now = answer.get("fp"), request_fingerprint()
    if first and now and first != now:
        raise _reused()


def _request_id(request_id: str) -> str:
    if len(request_id) > MAX_REQUEST_ID:
        raise InvalidArgument("BAD_REQUEST_ID", f"request_id is longer than {MAX_REQUEST_ID}")
    # Without one, every call is new (no retry protection), which is the caller's choice.
    return request_id or secrets.token_hex(16)


@dataclass
class Matchmaking:
    """The use cases over one store and the table service."""

    store: MatchStore
    tables: TableGateway
    config: MatchmakingConfig = field(default_factory=MatchmakingConfig)
    clock: Callable[[], int] = now_ms
    notifier: TicketNotifier = field(init=False)

    def __post_init__(self) -> None:
        self.notifier = TicketNotifier(self.store.redis, self.store.keys)

    async def _only_used_for(self, player_id: str, kind: str, rid: str) -> None:
        """A request id already answered for another RPC is refused (ALREADY_EXISTS)."""
        if any(k != kind for k in await self.store.request_kinds(player_id, rid)):
            raise _reused()

    # ---- quick match ---------------------------------------------------------------------

    def _check_queue(self, game: str, seats: int, stake: int) -> Queue:
        if game not in GAMES:
            raise InvalidArgument("UNKNOWN_GAME", f"game must be one of {', '.join(GAMES)}")
        low, high = SEAT_RANGE
        if not low <= seats <= high:
            raise InvalidArgument("BAD_SEATS", f"seats must be {low}-{high}")
        stakes = self.config.stakes.get(game, (1,))
        if stake not in stakes:
            offered = ", ".join(str(s) for s in stakes)
            raise InvalidArgument("BAD_STAKE", f"stake must be one of: {offered}")
        return Queue(game, seats, stake)

    def offers(self) -> list[tuple[str, tuple[int, ...], tuple[int, ...]]]:
        """Each game with the stakes and table sizes it is offered at (``GAMES`` order)."""
        low, high = SEAT_RANGE
        return [
            (g, tuple(self.config.stakes.get(g, (1,))), tuple(range(low, high + 1))) for g in GAMES
        ]

    def timers(self) -> tuple[int, int]:
        """The turn time (s) and the longest pause between deals (ms) of the tables the lobby
        opens: quick-match's own when configured, else the table service's defaults."""
        defaults = self.config.table_defaults
        return (
            self.config.turn_seconds or defaults.turn_seconds,
            self.config.next_round_pause_ms or defaults.next_round_pause_ms,
        )

    def _offered_queues(self) -> set[Queue]:
        low, high = SEAT_RANGE
        return {
            Queue(game, seats, stake)
            for game in GAMES
            for seats in range(low, high + 1)
            for stake in self.config.stakes.get(game, (1,))
        }

    async def join_queue(
        self,
        player_id: str,
        game: str,
        seats: int,
        stake: int,
        request_id: str,
        *,
        name: str = "",
        client_seed: str = "",
        will_contribute: bool = False,
    ) -> QueueState:
        """Queue the player (one queue at a time). A player seated at a live table is sent
        back to it: his answer is a matched ticket naming that table. ``name`` and
        ``client_seed`` go to the table he is matched to; so does ``will_contribute`` (his
        client contributes to every deal: the table's first deal waits for him too).

        Two steps in two slots: first the player's reservation (his slot, with the request
        id), then the ticket in the queue (the queue's slot), made from the reservation.
        Whoever finds a reservation whose ticket is not made yet makes it (a retry, or the
        player's next request after this process died); a reservation is given back only
        once its ticket has ended, so a player never waits in two queues.
        """
        queue = self._check_queue(game, seats, stake)
        rid = _request_id(request_id)
        _client_seed(client_seed)
        await self._only_used_for(player_id, "join", rid)
        live = await self.my_table(player_id, missing_ok=True)
        if live is not None:
            now = self.clock()
            ticket = Ticket(
                "",
                player_id,
                live.game,
                seats,
                stake,
                MATCHED,
                live.table_id,
                live.seat,
                now,
                now,
            )
            return QueueState(ticket, 0)
        for _ in range(JOIN_ATTEMPTS):
            now = self.clock()
            mine = Reservation(
                queue.new_id(),
                queue,
                player_id,
                now,
                now + self.config.ticket_ttl_s * 1000,
                name,
                client_seed,
                will_contribute,
            )
            claim = await self.store.claim(mine, rid)
            if claim.kind == "claimed":
                await self._register(queue)
                await self._make_ticket(mine, request_id=rid)
                return await self.queue_state(player_id, mine.ticket_id)
            if claim.kind == "replay":
                if claim.asked != queue:
                    raise _reused()
                if claim.reservation is not None:
                    # The first call may have died between its two steps: finish it.
                    await self._make_ticket(claim.reservation)
                return await self.queue_state(player_id, claim.ticket_id)
            held = claim.reservation
            assert held is not None  # "active" always carries the reservation
            if await self._make_ticket(held) in (WAITING, FORMING):
                answer = await self.store.remember_ticket(player_id, rid, held.ticket_id, queue)
                if answer == held.ticket_id:
                    return await self.queue_state(player_id, answer)
            # Its ticket has ended (and _make_ticket gave the reservation back), or a
            # concurrent call with this request id answered first: look again.
        raise Aborted("QUEUE_BUSY", "your queue ticket changed too often meanwhile; retry")

    async def _register(self, queue: Queue) -> None:
        # Best effort: this replica's own sweeper visits the queue anyway (its settings
        # offer it); the registry is for replicas whose settings do not.
        try:
            await self.store.register_queue(queue)
        except Exception as exc:
            if not REDIS.absorbs(exc, where="matchmaking_queues"):
                log.warning("matchmaking.register_queue_failed", queue=queue.name, exc_info=True)

    async def _make_ticket(self, reservation: Reservation, *, request_id: str = "") -> str:
        """Make (or find) a reservation's ticket and seat the group it completes; returns
        the ticket's state. A ticket that has ended gives its reservation back. With
        ``request_id`` (the caller reserved just now), a failure gives the join up first:
        the ticket is made never to exist and the reservation and the answer are dropped,
        unless the ticket was made after all (then a retry finds it)."""
        try:
            outcome = await self.store.join(reservation, self.clock())
        except Exception:
            if request_id:
                await self._give_up(reservation, request_id)
            raise
        if outcome.kind in ("waiting", "formed"):
            metrics.TICKETS.labels("queued").inc()
        if outcome.kind == "formed":
            await self.seat_group(outcome.group_id)
        if outcome.state in ENDED:
            await self.store.release(reservation.player_id, reservation.ticket_id)
        return outcome.state

    async def _give_up(self, reservation: Reservation, request_id: str) -> None:
        try:
            outcome = await self.store.join(reservation, self.clock(), abort=True)
            if outcome.kind == "ended":
                await self.store.release(reservation.player_id, reservation.ticket_id, request_id)
        except Exception as exc:
            # Left as it is, the reservation is finished (or expired) by the next request.
            if not REDIS.absorbs(exc, where="matchmaking_join"):
                log.warning("matchmaking.give_up_failed", ticket_id=reservation.ticket_id)

    async def queue_state(self, player_id: str, ticket_id: str) -> QueueState:
        """The player's own ticket and its queue's length (NOT_FOUND for anyone else's)."""
        ticket = await self.store.ticket(ticket_id) if ticket_id else None
        if ticket is None or ticket.player_id != player_id:
            raise NotFound("TICKET_NOT_FOUND", "no such ticket")
        waiting = 0
        if ticket.state in (WAITING, FORMING):
            waiting = await self.store.waiting_count(ticket.queue)
            waiting = max(waiting, 1) if ticket.state == WAITING else waiting
        return QueueState(ticket, waiting)

    async def cancel(self, player_id: str, ticket_id: str) -> QueueState:
        """Leave the queue. A ticket already matched (or being seated) is refused."""
        state = await self.queue_state(player_id, ticket_id)
        after = await self.store.leave(state.ticket, CANCELLED, self.clock(), only_if_due=False)
        if after in ENDED:
            await self.store.release(player_id, ticket_id)
        if after in (MATCHED, FORMING):
            raise FailedPrecondition(
                "TICKET_MATCHED", "too late to cancel: a table was found for you"
            )
        if after == EXPIRED:
            raise FailedPrecondition("TICKET_EXPIRED", "the ticket had already expired")
        if state.ticket.state == WAITING:
            metrics.TICKETS.labels("cancelled").inc()
        return await self.queue_state(player_id, ticket_id)

    async def watch(self, player_id: str, ticket_id: str) -> AsyncIterator[QueueState]:
        """The ticket now, then each change, until it is matched, cancelled or expired."""
        state = await self.queue_state(player_id, ticket_id)
        yield state
        if state.ticket.state not in (WAITING, FORMING):
            return
        last = state
        async with self.notifier.listen(ticket_id) as changed:
            while True:
                # A wake-up means "look again"; the timeout also refreshes the queue length.
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(changed.wait(), 1.0)
                changed.clear()
                state = await self.queue_state(player_id, ticket_id)
                if state != last:
                    yield state
                    last = state
                if state.ticket.state not in (WAITING, FORMING):
                    return

    # ---- seating groups ------------------------------------------------------------------

    def _table_settings(self, game: str, seats: int, stake: int) -> table_pb2.TableSettings:
        settings = table_pb2.TableSettings(game=GAME_ENUMS[game], seats=seats, stake=stake)
        if self.config.turn_seconds:
            settings.turn_time.FromSeconds(self.config.turn_seconds)
        if self.config.reveal_window_seconds:
            settings.reveal_window.FromSeconds(self.config.reveal_window_seconds)
        if self.config.next_round_pause_ms:
            settings.next_round_pause.FromMilliseconds(self.config.next_round_pause_ms)
        return settings

    async def seat_group(self, group_id: str) -> bool:
        """Create the group's table and mark its tickets matched; True when seated.

        While the table service is unreachable the group stays forming and the sweeper
        retries with the same key (one table, however many tries); if the table service
        refuses, the players go back to the front of their queue.
        """
        group = await self.store.group(group_id)
        if group is None:
            await self.store.forget_group(group_id)
            return False
        profiles = await self.store.profiles(group.tickets)
        players = [
            SeatedPlayer(player, name, seed, contributes)
            for player, (name, seed, contributes) in zip(group.players, profiles, strict=True)
        ]
        try:
            created = await self.tables.create_table(
                players,
                self._table_settings(group.game, group.seats, group.stake),
                request_id="mm-" + group_id,
            )
        except (grpc.RpcError, OSError, ServiceError) as exc:
            failure = failure_of(exc)
            retryable = failure is not None and is_retryable(failure.code)
            log.warning(
                "matchmaking.seating_failed", group_id=group_id, retryable=retryable, error=str(exc)
            )
            metrics.SEATING_FAILURES.labels("retried" if retryable else "requeued").inc()
            if not retryable:
                # A refusal would repeat on every retry: the players wait again instead.
                await self.store.requeue_group(group)
            return False
        # Each player's table first (his slot), so whoever is told "matched" finds it.
        for seat, player in enumerate(group.players):
            seating = Seating(created.table_id, seat, group.game)
            await self.store.remember_seating(player, seating, self.config.seating_ttl_s)
        seated = await self.store.seat_group(group, created.table_id)
        if seated:
            # Not when another call seated (or requeued) the group: requeued tickets wait
            # again and keep their reservations; the seater releases its own.
            for ticket_id, player in zip(group.tickets, group.players, strict=True):
                await self.store.release(player, ticket_id)
            metrics.TABLES_FORMED.labels(str(group.seats)).inc()
            metrics.TICKETS.labels("matched").inc(len(group.tickets))
            log.info("matchmaking.table_formed", table_id=created.table_id, players=group.players)
        return seated

    async def sweep(self) -> tuple[int, int]:
        """One pass of housekeeping over every queue (those the settings offer and any
        joined before): expire overdue tickets and retry stuck groups.

        Returns (tickets expired, groups seated). Safe on every replica at once: each
        step is a script that acts only on what is still due. A queue (or a player) whose
        Redis node does not answer is skipped, so the others go on.
        """
        now = self.clock()
        offered = self._offered_queues()
        where = "matchmaking_sweep"
        try:
            offered |= await self.store.known_queues()
        except Exception as exc:
            if not REDIS.absorbs(exc, where=where):
                log.warning("matchmaking.known_queues_failed", exc_info=True)
        queues = sorted(offered)
        found = await asyncio.gather(
            *(self.store.overdue(q, now, now - self.config.stale_group_ms) for q in queues),
            return_exceptions=True,
        )
        expired = seated = 0
        answered = False
        for queue, result in zip(queues, found, strict=True):
            if isinstance(result, BaseException):
                if not REDIS.absorbs(result, where=where):
                    log.warning(
                        "matchmaking.sweep_queue_failed", queue=queue.name, error=str(result)
                    )
                continue
            answered = True
            due, stale = result
            for ticket_id in due:
                try:
                    expired += await self._expire(ticket_id, now)
                except Exception as exc:
                    if not REDIS.absorbs(exc, where=where):
                        log.warning("matchmaking.expire_failed", ticket_id=ticket_id, exc_info=True)
            for group_id in stale:
                try:
                    seated += await self.seat_group(group_id)
                except Exception as exc:
                    if not REDIS.absorbs(exc, where=where):
                        log.warning("matchmaking.seat_failed", group_id=group_id, exc_info=True)
        if answered:
            REDIS.answered()  # a queue was read: Redis answers (ends an outage, if any)
        return expired, seated

    async def _expire(self, ticket_id: str, now: int) -> int:
        ticket = await self.store.ticket(ticket_id)
        if ticket is None:
            await self.store.forget_expiring(ticket_id)
            return 0
        after = await self.store.leave(ticket, EXPIRED, now, only_if_due=True)
        if after in ENDED:
            await self.store.release(ticket.player_id, ticket_id)
        if after != EXPIRED:
            return 0
        metrics.TICKETS.labels("expired").inc()
        return 1

    async def run_sweeper(self, stop: asyncio.Event, interval_s: float = 1.0) -> None:
        """Sweep every ``interval_s`` until ``stop`` is set (errors are logged, not fatal)."""
        while not stop.is_set():
            try:
                await self.sweep()
            except Exception as exc:
                if not REDIS.absorbs(exc, where="matchmaking_sweep"):
                    log.exception("matchmaking.sweep_failed")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), interval_s)

    # ---- private tables ------------------------------------------------------------------

    async def create_private(
        self,
        player_id: str,
        settings: table_pb2.TableSettings,
        request_id: str,
        *,
        name: str = "",
        client_seed: str = "",
        will_contribute: bool = False,
    ) -> PrivateTable:
        """Create a table with the player as creator in seat 0, and an invite code for it.

        The table starts by itself when every seat is taken; its creator may also start it
        earlier (StartGame) and is the only one who may press last round.
        """
        rid = _request_id(request_id)
        _client_seed(client_seed)
        await self._only_used_for(player_id, "private", rid)
        answer = await self.store.answer(player_id, "private:" + rid)
        if answer is not None:
            _same_request(answer)
            return PrivateTable(answer["code"], answer["table_id"], int(answer["expire_ms"]))
        game = GAME_NAMES.get(settings.game, "")
        self._check_queue(game, settings.seats or 4, settings.stake or 1)
        created = await self.tables.create_table(
            [SeatedPlayer(player_id, name, client_seed, will_contribute)],
            settings,
            request_id="mmp-" + rid,
            auto_start=True,
        )
        ttl = self.config.invite_ttl_s
        expire_ms = self.clock() + ttl * 1000
        value = {"table_id": created.table_id, "creator": player_id, "game": game}
        for _ in range(10):
            code = codes.new_code()
            if await self.store.claim_code(code, value, ttl):
                break
        else:  # pragma: no cover - 10 collisions in 887 million codes
            raise FailedPrecondition("NO_CODE", "could not find a free invite code; retry")
        seating = Seating(created.table_id, 0, game)
        await self.store.remember_seating(player_id, seating, self.config.seating_ttl_s)
        metrics.PRIVATE_TABLES.labels("created").inc()
        result = PrivateTable(code, created.table_id, expire_ms)
        await self.store.remember_answer(
            player_id,
            "private:" + rid,
            {
                "code": code,
                "table_id": created.table_id,
                "expire_ms": expire_ms,
                "fp": request_fingerprint(),
            },
        )
        return result

    async def join_by_code(
        self,
        player_id: str,
        raw_code: str,
        request_id: str,
        *,
        name: str = "",
        client_seed: str = "",
        will_contribute: bool = False,
    ) -> Seating:
        """Seat the player at the private table an invite code names.

        A wrong or expired code is NOT_FOUND; a full or started table FAILED_PRECONDITION.
        """
        rid = _request_id(request_id)
        _client_seed(client_seed)
        await self._only_used_for(player_id, "code", rid)
        answer = await self.store.answer(player_id, "code:" + rid)
        if answer is not None:
            _same_request(answer)
            return Seating(answer["table_id"], int(answer["seat"]), answer["game"])
        code = codes.normalize(raw_code)
        found = None if code is None else await self.store.invite(code)
        if found is None:
            raise NotFound(
                "INVITE_NOT_FOUND",
                "no table has that invite code (it may be mistyped or expired)",
            )
        invite, _ = found
        table_id = str(invite["table_id"])
        seat = await self.tables.join_table(
            table_id,
            SeatedPlayer(player_id, name, client_seed, will_contribute),
            request_id="mmj-" + rid,
        )
        metrics.PRIVATE_TABLES.labels("joined").inc()
        seating = Seating(table_id, seat, str(invite["game"]))
        await self.store.remember_seating(player_id, seating, self.config.seating_ttl_s)
        await self.store.remember_answer(
            player_id,
            "code:" + rid,
            {
                "table_id": table_id,
                "seat": seat,
                "game": seating.game,
                "fp": request_fingerprint(),
            },
        )
        return seating

    # ---- where am I ----------------------------------------------------------------------

    async def my_table(self, player_id: str, *, missing_ok: bool = False) -> Seating | None:
        """The live table the player sits at (NOT_FOUND, or None with ``missing_ok``)."""
        seating = await self.store.seating(player_id)
        if seating is not None:
            table = await self.tables.table(seating.table_id)
            if table is not None and not table.closed:
                seat = table.seat_of(player_id)
                if seat is not None:
                    return Seating(seating.table_id, seat, seating.game)
            await self.store.forget_seating(player_id, seating.table_id)
        if missing_ok:
            return None
        raise NotFound("NO_TABLE", "you are not seated at a live table")
