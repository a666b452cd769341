"""The matchmaking state in Redis: tickets, queues, forming groups, invite codes.

Every move of a ticket between states is one Lua script (see the ``*.lua`` headers), so
concurrent joins, cancels, expiries and seatings never lose or duplicate a player.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

from redis.asyncio import Redis

from services.matchmaking.keys import Keys

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


@dataclass(frozen=True, slots=True)
class JoinOutcome:
    """What the join script did: ``kind`` is replay, existing, waiting or formed."""

    kind: str
    ticket_id: str
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


@dataclass(frozen=True, slots=True)
class Seating:
    """Where a player sits: a table id, his seat and the game."""

    table_id: str
    seat: int
    game: str


class MatchStore:
    """Redis adapter of the matchmaking service (redis-py asyncio, registered scripts)."""

    def __init__(self, redis: Redis, keys: Keys | None = None) -> None:
        self.redis = redis
        self.keys = keys or Keys()
        self._join = redis.register_script(_load_script("join.lua"))
        self._matched = redis.register_script(_load_script("matched.lua"))
        self._requeue = redis.register_script(_load_script("requeue.lua"))
        self._leave = redis.register_script(_load_script("leave.lua"))

    # ---- queue -------------------------------------------------------------------------

    async def save_profile(self, ticket_id: str, name: str, client_seed: str, ttl_s: int) -> None:
        """Remember the name and client seed of a ticket's player (read when seating)."""
        key = self.keys.profile(ticket_id)
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.hset(key, mapping={"name": name, "client_seed": client_seed})
            pipe.expire(key, ttl_s)
            await pipe.execute()

    async def profiles(self, ticket_ids: Sequence[str]) -> list[tuple[str, str]]:
        """(name, client seed) of each ticket's player, empty strings when unknown."""
        out = []
        for ticket_id in ticket_ids:
            raw = await self.redis.hgetall(self.keys.profile(ticket_id))
            data = {_text(k): _text(v) for k, v in raw.items()}
            out.append((data.get("name", ""), data.get("client_seed", "")))
        return out

    async def join(
        self,
        *,
        ticket_id: str,
        player_id: str,
        game: str,
        seats: int,
        stake: int,
        now_ms: int,
        expire_ms: int,
        group_id: str,
        request_id: str,
    ) -> JoinOutcome:
        """Queue a ticket (or find the player's existing one); pop a group if one is full."""
        k = self.keys
        result: list[Any] = await self._join(
            keys=[
                k.queue(game, seats, stake),
                k.ticket(ticket_id),
                k.active_ticket(player_id),
                k.expiring(),
                k.forming(),
                k.group(group_id),
                k.request(player_id, "join:" + request_id),
            ],
            args=[
                ticket_id,
                player_id,
                game,
                seats,
                stake,
                now_ms,
                expire_ms,
                group_id,
                k.ticket_prefix(),
                REQUEST_TTL_S,
                TICKET_TTL_S,
            ],
        )
        parts = [_text(v) for v in result]
        return JoinOutcome(parts[0], parts[1], parts[2] if len(parts) > 2 else "")

    async def ticket(self, ticket_id: str) -> Ticket | None:
        """The stored ticket, or None."""
        raw = await self.redis.hgetall(self.keys.ticket(ticket_id))
        return Ticket.from_hash(ticket_id, raw) if raw else None

    async def waiting_count(self, game: str, seats: int, stake: int) -> int:
        """Players waiting now in one queue."""
        return int(await self.redis.llen(self.keys.queue(game, seats, stake)))

    async def leave(self, ticket: Ticket, new_state: str, now_ms: int, *, only_if_due: bool) -> str:
        """Take a waiting ticket out of its queue; returns the state it has afterwards."""
        k = self.keys
        result: list[Any] = await self._leave(
            keys=[
                k.ticket(ticket.ticket_id),
                k.active_ticket(ticket.player_id),
                k.expiring(),
                k.queue(ticket.game, ticket.seats, ticket.stake),
            ],
            args=[
                ticket.ticket_id,
                new_state,
                k.ticket_channel(ticket.ticket_id),
                now_ms,
                "1" if only_if_due else "0",
            ],
        )
        return _text(result[1])

    async def due_tickets(self, now_ms: int, limit: int = 100) -> list[str]:
        """Waiting tickets whose expiry has passed."""
        ids = await self.redis.zrangebyscore(self.keys.expiring(), "-inf", now_ms, 0, limit)
        return [_text(i) for i in ids]

    async def forget_expiring(self, ticket_id: str) -> None:
        """Drop an index entry whose ticket no longer exists."""
        await self.redis.zrem(self.keys.expiring(), ticket_id)

    # ---- groups ------------------------------------------------------------------------

    async def group(self, group_id: str) -> Group | None:
        """A forming group, or None once it was seated or requeued."""
        raw = await self.redis.hgetall(self.keys.group(group_id))
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

    async def stale_groups(self, older_than_ms: int, limit: int = 50) -> list[str]:
        """Groups popped before ``older_than_ms`` and still not seated (their seater died)."""
        ids = await self.redis.zrangebyscore(self.keys.forming(), "-inf", older_than_ms, 0, limit)
        return [_text(i) for i in ids]

    async def forget_group(self, group_id: str) -> None:
        """Drop a forming index entry whose group hash is gone."""
        await self.redis.zrem(self.keys.forming(), group_id)

    async def seat_group(self, group: Group, table_id: str, seating_ttl_s: int) -> bool:
        """Mark every ticket of the group matched at ``table_id``; False if already done."""
        k = self.keys
        keys = [k.forming(), k.group(group.group_id)]
        for tid, player in zip(group.tickets, group.players, strict=True):
            keys += [k.ticket(tid), k.active_ticket(player), k.player_table(player)]
        done = await self._matched(
            keys=keys,
            args=[
                group.group_id,
                table_id,
                len(group.tickets),
                seating_ttl_s,
                group.game,
                k.ticket_channel(""),
                *group.tickets,
                *group.players,
            ],
        )
        return bool(done)

    async def requeue_group(self, group: Group) -> bool:
        """Put the group's tickets back at the front of their queue; False if not forming."""
        k = self.keys
        done = await self._requeue(
            keys=[
                k.forming(),
                k.group(group.group_id),
                k.queue(group.game, group.seats, group.stake),
                k.expiring(),
                *(k.ticket(t) for t in group.tickets),
            ],
            args=[group.group_id, len(group.tickets), k.ticket_channel(""), *group.tickets],
        )
        return bool(done)

    # ---- where players sit -------------------------------------------------------------

    async def seating(self, player_id: str) -> Seating | None:
        """The table the player was last seated at (by matchmaking), if remembered."""
        raw = await self.redis.get(self.keys.player_table(player_id))
        if raw is None:
            return None
        data = json.loads(raw)
        return Seating(str(data["table_id"]), int(data["seat"]), str(data["game"]))

    async def remember_seating(self, player_id: str, seating: Seating, ttl_s: int) -> None:
        """Record where a player sits (private tables; the queue does it in its script)."""
        value = {"table_id": seating.table_id, "seat": seating.seat, "game": seating.game}
        await self.redis.set(self.keys.player_table(player_id), json.dumps(value), ex=ttl_s)

    async def forget_seating(self, player_id: str, table_id: str) -> None:
        """Forget a closed table (only if it is still the one remembered)."""
        current = await self.seating(player_id)
        if current is not None and current.table_id == table_id:
            await self.redis.delete(self.keys.player_table(player_id))

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
