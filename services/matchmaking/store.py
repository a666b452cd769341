"""The matchmaking state in Redis: reservations, tickets, queues, forming groups, invites.

Every move of a ticket between states is one Lua script in its queue's slot, and every
change of a player's reservation one in his slot (see the ``*.lua`` headers and
:mod:`services.matchmaking.keys`), so concurrent joins, cancels, expiries and seatings never
lose or duplicate a player.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

from redis.asyncio import Redis

from services.common.compat import compat_hit
from services.matchmaking.keys import Keys, Queue, queue_of

WAITING = "waiting"
FORMING = "forming"
MATCHED = "matched"
CANCELLED = "cancelled"
EXPIRED = "expired"

REQUEST_TTL_S = 24 * 3600
TICKET_TTL_S = 24 * 3600


def _load_script(name: str) -> str:
    return resources.files("services.matchmaking").joinpath(name).read_text()


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


@dataclass(frozen=True, slots=True)
class Ticket:
    """A player's place in a queue, as stored."""

    ticket_id: str
    player_id: str
    game: str
    seats: int
    stake: int
    state: str
    table_id: str
    seat: int
    created_ms: int
    expire_ms: int

    @classmethod
    def from_hash(cls, ticket_id: str, raw: Mapping[Any, Any]) -> Ticket:
        """A ticket from its Redis hash (bytes or str fields)."""
        data = {_text(k): _text(v) for k, v in raw.items()}
        return cls(
            ticket_id=ticket_id,
            player_id=data["player"],
            game=data["game"],
            seats=int(data["seats"]),
            stake=int(data["stake"]),
            state=data["state"],
            table_id=data.get("table_id", ""),
            seat=int(data.get("seat", "-1") or -1),
            created_ms=int(data["created_ms"]),
            expire_ms=int(data["expire_ms"]),
        )

    @property
    def queue(self) -> Queue:
        """The queue the ticket waits (or waited) in."""
        return Queue(self.game, self.seats, self.stake)


@dataclass(frozen=True, slots=True)
class Reservation:
    """A player's hold on one queue at a time (his slot), and everything that makes its
    ticket (the queue's slot): whoever finds it may make that ticket, once."""

    ticket_id: str
    queue: Queue
    player_id: str
    created_ms: int
    expire_ms: int
    name: str = ""
    client_seed: str = ""
    will_contribute: bool = False


@dataclass(frozen=True, slots=True)
class Claim:
    """What claim.lua found: ``kind`` is claimed, replay or active.

    ``reservation`` is the player's reservation when it holds ``ticket_id`` (always for
    claimed and active; for a replay only while that ticket's reservation is held).
    """

    kind: str
    ticket_id: str
    reservation: Reservation | None
    asked: Queue | None = None
    """For a replay: the queue the answered request asked for."""


def _answer(ticket_id: str, asked: Queue) -> str:
    """What a join request's id remembers: the ticket, and the queue asked for (an answer
    may name a ticket of another queue, the one the player already waited in)."""
    return f"{ticket_id} {asked.name}"


@dataclass(frozen=True, slots=True)
class JoinOutcome:
    """What join.lua did: ``kind`` is exists, ended, waiting or formed; ``state`` is the
    ticket's state afterwards (for exists and ended) and ``group_id`` the popped group."""

    kind: str
    state: str
    group_id: str = ""


@dataclass(frozen=True, slots=True)
class Group:
    """Tickets popped together, in seat order, waiting for their table."""

    group_id: str
    tickets: tuple[str, ...]
    players: tuple[str, ...]
    game: str
    seats: int
    stake: int
    created_ms: int

    @property
    def queue(self) -> Queue:
        """The queue the group was popped from."""
        return Queue(self.game, self.seats, self.stake)


@dataclass(frozen=True, slots=True)
class Seating:
    """Where a player sits: a table id, his seat and the game."""

    table_id: str
    seat: int
    game: str


class MatchStore:
    """Redis adapter of the matchmaking service (redis-py asyncio, registered scripts).

    Each method touches one slot: a queue's (by the ticket or group id, which names its
    queue) or a player's; the order of the steps across slots is the use cases' business.
    """

    def __init__(self, redis: Redis, keys: Keys | None = None) -> None:
        self.redis = redis
        self.keys = keys or Keys()
        self._claim = redis.register_script(_load_script("claim.lua"))
        self._release = redis.register_script(_load_script("release.lua"))
        self._join = redis.register_script(_load_script("join.lua"))
        self._matched = redis.register_script(_load_script("matched.lua"))
        self._requeue = redis.register_script(_load_script("requeue.lua"))
        self._leave = redis.register_script(_load_script("leave.lua"))

    # ---- the queues ----------------------------------------------------------------------

    async def register_queue(self, queue: Queue) -> None:
        """Remember that ``queue`` was used, so sweepers visit it whatever their settings."""
        await self.redis.sadd(self.keys.queues(), queue.name)

    async def known_queues(self) -> set[Queue]:
        """Every queue ever registered."""
        names = await self.redis.smembers(self.keys.queues())
        found = (Queue.parse_name(_text(n)) for n in names)
        return {q for q in found if q is not None}

    async def waiting_count(self, queue: Queue) -> int:
        """Players waiting now in one queue."""
        return int(await self.redis.llen(self.keys.queue(queue)))

    async def overdue(
        self, queue: Queue, now_ms: int, stale_before_ms: int, limit: int = 100
    ) -> tuple[list[str], list[str]]:
        """A queue's waiting tickets whose expiry has passed, and its groups popped before
        ``stale_before_ms`` and still not seated (their seater died): one round trip."""
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.zrangebyscore(self.keys.expiring(queue), "-inf", now_ms, 0, limit)
            pipe.zrangebyscore(self.keys.forming(queue), "-inf", stale_before_ms, 0, limit)
            due, stale = await pipe.execute()
        return [_text(i) for i in due], [_text(i) for i in stale]

    # ---- a player's reservation (his slot) -----------------------------------------------

    async def claim(self, reservation: Reservation, request_id: str) -> Claim:
        """Reserve the player's one queue for ``reservation`` unless the request id was
        answered before or he holds another reservation (see claim.lua)."""
        k, r = self.keys, reservation
        result: list[Any] = await self._claim(
            keys=[k.active_ticket(r.player_id), k.request(r.player_id, "join:" + request_id)],
            args=[
                r.ticket_id,
                r.created_ms,
                r.expire_ms,
                r.name,
                r.client_seed,
                REQUEST_TTL_S,
                TICKET_TTL_S,
                _answer(r.ticket_id, r.queue),
                "1" if r.will_contribute else "0",
            ],
        )
        parts = [_text(v) for v in result]
        kind, ticket_id = parts[0], parts[1]
        asked = None
        if kind == "replay":
            ticket_id, _, name = ticket_id.partition(" ")
            asked = Queue.parse_name(name)
        held = None
        queue = queue_of(ticket_id)
        if len(parts) == 7 and queue is not None:
            held = Reservation(
                ticket_id,
                queue,
                r.player_id,
                int(parts[2]),
                int(parts[3]),
                parts[4],
                parts[5],
                parts[6] == "1",
            )
        return Claim(kind, ticket_id, held, asked)

    async def release(self, player_id: str, ticket_id: str, request_id: str = "") -> bool:
        """Give back the player's reservation if it still holds ``ticket_id`` (and forget
        ``request_id``'s answer if it is that ticket: a join given up was never answered)."""
        keys, args = [self.keys.active_ticket(player_id)], [ticket_id]
        queue = queue_of(ticket_id)
        if request_id and queue is not None:
            keys.append(self.keys.request(player_id, "join:" + request_id))
            args.append(_answer(ticket_id, queue))
        return bool(await self._release(keys=keys, args=args))

    async def remember_ticket(
        self, player_id: str, request_id: str, ticket_id: str, asked: Queue
    ) -> str:
        """Answer a join request (for queue ``asked``) with ``ticket_id`` unless it was
        answered before; returns the ticket id of the answer that stands."""
        key = self.keys.request(player_id, "join:" + request_id)
        if await self.redis.set(key, _answer(ticket_id, asked), ex=REQUEST_TTL_S, nx=True):
            return ticket_id
        first = await self.redis.get(key)
        return ticket_id if first is None else _text(first).partition(" ")[0]

    # ---- tickets (their queue's slot) ----------------------------------------------------

    async def join(
        self, reservation: Reservation, now_ms: int, *, abort: bool = False
    ) -> JoinOutcome:
        """Make the reserved ticket and queue it, popping a group if one is full; or, with
        ``abort``, make sure it never will be. Idempotent (see join.lua)."""
        k, r, q = self.keys, reservation, reservation.queue
        group_id = q.new_id()
        result: list[Any] = await self._join(
            keys=[
                k.queue(q),
                k.ticket(q, r.ticket_id),
                k.expiring(q),
                k.forming(q),
                k.group(q, group_id),
            ],
            args=[
                r.ticket_id,
                r.player_id,
                q.game,
                q.seats,
                q.stake,
                r.created_ms,
                r.expire_ms,
                now_ms,
                group_id,
                k.ticket_prefix(q),
                TICKET_TTL_S,
                r.name,
                r.client_seed,
                "abort" if abort else "join",
                "1" if r.will_contribute else "0",
            ],
        )
        kind, detail = (_text(v) for v in result)
        if kind == "formed":
            return JoinOutcome(kind, FORMING, detail)
        return JoinOutcome(kind, WAITING if kind == "waiting" else detail)

    async def ticket(self, ticket_id: str) -> Ticket | None:
        """The stored ticket, or None (also for an id that names no queue)."""
        queue = queue_of(ticket_id)
        if queue is None:
            return None
        raw = await self.redis.hgetall(self.keys.ticket(queue, ticket_id))
        return Ticket.from_hash(ticket_id, raw) if raw else None

    async def profiles(self, ticket_ids: Sequence[str]) -> list[tuple[str, str, bool]]:
        """(name, client seed, whether his client contributes) of each ticket's player,
        empty strings and False when unknown."""
        out = []
        for ticket_id in ticket_ids:
            queue = queue_of(ticket_id)
            name, seed, contributes = None, None, None
            if queue is not None:
                key = self.keys.ticket(queue, ticket_id)
                name, seed, contributes = await self.redis.hmget(
                    key, ["name", "client_seed", "contributes"]
                )
            out.append(
                (
                    "" if name is None else _text(name),
                    "" if seed is None else _text(seed),
                    contributes is not None and _text(contributes) == "1",
                )
            )
        return out

    async def leave(self, ticket: Ticket, new_state: str, now_ms: int, *, only_if_due: bool) -> str:
        """Take a waiting ticket out of its queue; returns the state it has afterwards."""
        k, q = self.keys, ticket.queue
        result: list[Any] = await self._leave(
            keys=[k.ticket(q, ticket.ticket_id), k.expiring(q), k.queue(q)],
            args=[
                ticket.ticket_id,
                new_state,
                k.ticket_channel(ticket.ticket_id),
                now_ms,
                "1" if only_if_due else "0",
            ],
        )
        return _text(result[1])

    async def forget_expiring(self, ticket_id: str) -> None:
        """Drop an index entry whose ticket no longer exists."""
        queue = queue_of(ticket_id)
        if queue is not None:
            await self.redis.zrem(self.keys.expiring(queue), ticket_id)

    # ---- groups (their queue's slot) -----------------------------------------------------

    async def group(self, group_id: str) -> Group | None:
        """A forming group, or None once it was seated or requeued."""
        queue = queue_of(group_id)
        if queue is None:
            return None
        raw = await self.redis.hgetall(self.keys.group(queue, group_id))
        if not raw:
            return None
        data = {_text(k): _text(v) for k, v in raw.items()}
        return Group(
            group_id=group_id,
            tickets=tuple(data["tickets"].split(",")),
            players=tuple(data["players"].split(",")),
            game=data["game"],
            seats=int(data["seats"]),
            stake=int(data["stake"]),
            created_ms=int(data["created_ms"]),
        )

    async def forget_group(self, group_id: str) -> None:
        """Drop a forming index entry whose group hash is gone."""
        queue = queue_of(group_id)
        if queue is not None:
            await self.redis.zrem(self.keys.forming(queue), group_id)

    async def seat_group(self, group: Group, table_id: str) -> bool:
        """Mark every ticket of the group matched at ``table_id``; False if already done."""
        k, q = self.keys, group.queue
        tickets = group.tickets
        done = await self._matched(
            keys=[k.forming(q), k.group(q, group.group_id), *(k.ticket(q, t) for t in tickets)],
            args=[group.group_id, table_id, len(tickets), k.ticket_channel(""), *tickets],
        )
        return bool(done)

    async def requeue_group(self, group: Group) -> bool:
        """Put the group's tickets back at the front of their queue; False if not forming."""
        k, q = self.keys, group.queue
        done = await self._requeue(
            keys=[
                k.forming(q),
                k.group(q, group.group_id),
                k.queue(q),
                k.expiring(q),
                *(k.ticket(q, t) for t in group.tickets),
            ],
            args=[group.group_id, len(group.tickets), k.ticket_channel(""), *group.tickets],
        )
        return bool(done)

    # ---- where players sit (their slots) -------------------------------------------------

    def _seating_keys(self, player_id: str) -> list[str]:
        legacy = self.keys.legacy_player_table(player_id)
        return [self.keys.player_table(player_id), *([legacy] if legacy else [])]

    async def seating(self, player_id: str) -> Seating | None:
        """The table the player was last seated at (by matchmaking), if remembered."""
        for key in self._seating_keys(player_id):
            raw = await self.redis.get(key)
            if raw is not None:
                if key != self.keys.player_table(player_id):
                    # Compatibility (LEGACY_PREFIX): goes once this counter has stayed 0 for
                    # 12 h (seating_ttl_s) on every replica, and in any case by 2027-03-01.
                    compat_hit("matchmaking_legacy_seating")
                data = json.loads(raw)
                return Seating(str(data["table_id"]), int(data["seat"]), str(data["game"]))
        return None

    async def remember_seating(self, player_id: str, seating: Seating, ttl_s: int) -> None:
        """Record where a player sits."""
        value = {"table_id": seating.table_id, "seat": seating.seat, "game": seating.game}
        await self.redis.set(self.keys.player_table(player_id), json.dumps(value), ex=ttl_s)

    async def forget_seating(self, player_id: str, table_id: str) -> None:
        """Forget a closed table (only if it is still the one remembered)."""
        for key in self._seating_keys(player_id):
            raw = await self.redis.get(key)
            if raw is not None and json.loads(raw)["table_id"] == table_id:
                await self.redis.delete(key)

    # ---- invite codes and idempotent answers -------------------------------------------

    async def claim_code(self, code: str, value: Mapping[str, Any], ttl_s: int) -> bool:
        """Store a new invite code; False if the code is taken."""
        return bool(
            await self.redis.set(self.keys.invite(code), json.dumps(value), ex=ttl_s, nx=True)
        )

    async def invite(self, code: str) -> tuple[dict[str, Any], int] | None:
        """What an invite code names and its seconds to live, or None (wrong or expired)."""
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.get(self.keys.invite(code))
            pipe.ttl(self.keys.invite(code))
            raw, ttl = await pipe.execute()
        if raw is None:
            return None
        return json.loads(raw), int(ttl)

    async def answer(self, player_id: str, request_id: str) -> dict[str, Any] | None:
        """The remembered answer to a player's request, if any."""
        raw = await self.redis.get(self.keys.request(player_id, request_id))
        return None if raw is None else dict(json.loads(raw))

    async def request_kinds(self, player_id: str, request_id: str) -> list[str]:
        """Which kinds of request (``join``, ``private``, ``code``) already used this id."""
        kinds = ("join", "private", "code")
        async with self.redis.pipeline(transaction=False) as pipe:
            for kind in kinds:
                pipe.exists(self.keys.request(player_id, f"{kind}:{request_id}"))
            found = await pipe.execute()
        return [kind for kind, n in zip(kinds, found, strict=True) if n]

    async def remember_answer(
        self, player_id: str, request_id: str, answer: Mapping[str, Any]
    ) -> None:
        """Remember a request's answer so a retry returns it unchanged."""
        await self.redis.set(
            self.keys.request(player_id, request_id), json.dumps(answer), ex=REQUEST_TTL_S
        )

    def channels(self, ticket_ids: Sequence[str]) -> list[str]:
        """Pub/sub channels of some tickets."""
        return [self.keys.ticket_channel(t) for t in ticket_ids]
