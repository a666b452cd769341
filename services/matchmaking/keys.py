"""Every Redis key of the matchmaking service, built in one place.

Two kinds of hash tag, so that on a Redis Cluster matchmaking spreads over the masters:

- **one per queue** ``{mm:<game>:<seats>:<stake>}``: the queue list, its tickets and their
  profiles, its groups and its expiring and forming indexes. The queue scripts (join, leave,
  seat, requeue) touch only these, so each runs atomically in its queue's slot. Ticket and
  group ids name their queue (``kishpa-4-5-<hex>``), so their keys follow from the id.
- **one per player** ``{mm:player:<id>}``: the player's reservation of his one queue at a
  time (``active_ticket``), his request ids and the table he sits at. No script spans a
  player's slot and a queue's: :mod:`services.matchmaking.service` orders the two steps.

Invite codes each have their own tag; the registry of queues ever used has one. The prefix
carries no hash tag (``kishpa:mm``); tests pass their own (``kishpa:mm-<uuid>``) and so never
see each other's keys. A prefix *with* a hash tag (the old ``kishpa:{mm}``) still works but
puts every key in that one slot.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass

DEFAULT_PREFIX = "kishpa:mm"
LEGACY_PREFIX = "kishpa:{mm}"
"""The default prefix before queues had their own slots: where players seated then are still
remembered (read only; those keys expire within ``seating_ttl_s``). A compatibility branch
(services/common/compat.py): it goes once ``kishpa_compat_branch_hits_total{branch=
"matchmaking_legacy_seating"}`` has stayed 0 for 12 h on every replica, by 2027-03-01."""

_ID = re.compile(r"([a-z]+)-([0-9]{1,2})-([0-9]{1,9})-[0-9a-f]{16,40}")


@dataclass(frozen=True, slots=True, order=True)
class Queue:
    """One quick-match queue: players of one game, table size and stake."""

    game: str
    seats: int
    stake: int

    @property
    def name(self) -> str:
        """``<game>:<seats>:<stake>`` (the registry's member, the tag's tail)."""
        return f"{self.game}:{self.seats}:{self.stake}"

    @property
    def tag(self) -> str:
        """The hash tag (with braces) every key of this queue carries."""
        return f"{{mm:{self.name}}}"

    def new_id(self) -> str:
        """A fresh ticket or group id of this queue: ``<game>-<seats>-<stake>-<20 hex>``."""
        return f"{self.game}-{self.seats}-{self.stake}-{secrets.token_hex(10)}"

    @classmethod
    def parse_name(cls, name: str) -> Queue | None:
        """The queue a registry member names, or None."""
        game, _, rest = name.partition(":")
        seats, _, stake = rest.partition(":")
        if not (game and seats.isdigit() and stake.isdigit()):
            return None
        return cls(game, int(seats), int(stake))


def queue_of(item_id: str) -> Queue | None:
    """The queue a ticket or group id names, or None for anything that is not such an id
    (a client's typo, or a ticket id from before queues had their own slots)."""
    match = _ID.fullmatch(item_id)
    if match is None:
        return None
    return Queue(match.group(1), int(match.group(2)), int(match.group(3)))


@dataclass(frozen=True, slots=True)
class Keys:
    """Key builder for one matchmaking key space."""

    prefix: str = DEFAULT_PREFIX

    # ---- a queue's slot ------------------------------------------------------------------

    def _queue(self, queue: Queue, part: str) -> str:
        return f"{self.prefix}:{queue.tag}:{part}"

    def queue(self, queue: Queue) -> str:
        """List of waiting ticket ids, oldest first."""
        return self._queue(queue, "queue")

    def ticket(self, queue: Queue, ticket_id: str) -> str:
        """Hash of one ticket: player, game, seats, stake, state, table_id, seat, times."""
        return self.ticket_prefix(queue) + ticket_id

    def ticket_prefix(self, queue: Queue) -> str:
        """What ``ticket()`` puts before the id (the scripts build ticket keys from ids)."""
        return self._queue(queue, "ticket:")

    def profile(self, queue: Queue, ticket_id: str) -> str:
        """Hash of what the table shows of a ticket's player: ``name``, ``client_seed``.

        Written by the script that creates the ticket, so a group popped at once finds it.
        """
        return self._queue(queue, f"profile:{ticket_id}")

    def expiring(self, queue: Queue) -> str:
        """Sorted set ticket id -> expiry (ms) of the queue's waiting tickets."""
        return self._queue(queue, "expiring")

    def forming(self, queue: Queue) -> str:
        """Sorted set group id -> time (ms) of groups popped from the queue, not yet seated."""
        return self._queue(queue, "forming")

    def group(self, queue: Queue, group_id: str) -> str:
        """Hash of a group being seated: its tickets and players in seat order."""
        return self._queue(queue, f"group:{group_id}")

    # ---- a player's slot -----------------------------------------------------------------

    def _player(self, player_id: str, part: str) -> str:
        return f"{self.prefix}:{{mm:player:{player_id}}}:{part}"

    def active_ticket(self, player_id: str) -> str:
        """Hash: the player's reservation of one queue at a time (the ticket id and what
        creates that ticket: times, name, client seed), held until the ticket has ended."""
        return self._player(player_id, "ticket")

    def player_table(self, player_id: str) -> str:
        """JSON ``{table_id, seat, game}`` of the table the player was last seated at."""
        return self._player(player_id, "table")

    def legacy_player_table(self, player_id: str) -> str | None:
        """Where the default key space kept ``player_table`` before (None for other prefixes)."""
        if self.prefix != DEFAULT_PREFIX:
            return None
        return f"{LEGACY_PREFIX}:player:{player_id}:table"

    def request(self, player_id: str, request_id: str) -> str:
        """The first answer to a player's mutation with this request id."""
        return self._player(player_id, f"request:{request_id}")

    # ---- elsewhere -----------------------------------------------------------------------

    def login(self, attempt: str) -> str:
        """JSON of the guest a login attempt minted (``attempt``: the hash of its device id
        and request id), so a retry whose answer was lost gets the same player."""
        return f"{self.prefix}:{{mm:login:{attempt}}}"

    def invite(self, code: str) -> str:
        """JSON of the private table an invite code names (expires with the code)."""
        return f"{self.prefix}:{{mm:invite:{code}}}"

    def queues(self) -> str:
        """Set of the queue names ever joined, so the sweeper also visits a queue whose stake
        is no longer offered (or only offered by another replica's settings)."""
        return f"{self.prefix}:{{mm:queues}}"

    def ticket_channel(self, ticket_id: str) -> str:
        """Pub/sub channel told whenever the ticket changes (WatchQueue listens)."""
        return f"{self.prefix}:ticket-changed:{ticket_id}"
