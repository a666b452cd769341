"""Every Redis key of the matchmaking service, built in one place.

All keys share one hash tag (``{mm}`` by default) so the queue scripts, which move tickets
between a queue, ticket hashes and player indexes, touch a single Redis Cluster slot. Tests
pass their own prefix (``kishpa:{mm-<uuid>}``) and so never see each other's queues.
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_PREFIX = "kishpa:{mm}"


@dataclass(frozen=True, slots=True)
class Keys:
    """Key builder for one matchmaking key space."""

    prefix: str = DEFAULT_PREFIX

    def queue(self, game: str, seats: int, stake: int) -> str:
        """List of waiting ticket ids, oldest first, for one (game, seats, stake)."""
        return f"{self.prefix}:queue:{game}:{seats}:{stake}"

    def ticket(self, ticket_id: str) -> str:
        """Hash of one ticket: player, game, seats, stake, state, table_id, seat, times."""
        return f"{self.prefix}:ticket:{ticket_id}"

    def profile(self, ticket_id: str) -> str:
        """Hash of what the table shows of a ticket's player: ``name``, ``client_seed``.

        Written before the ticket is queued (so a group popped at once finds it) and
        expiring with the ticket.
        """
        return f"{self.prefix}:profile:{ticket_id}"

    def ticket_prefix(self) -> str:
        """What ``ticket()`` puts before the id (the scripts build ticket keys from ids)."""
        return f"{self.prefix}:ticket:"

    def active_ticket(self, player_id: str) -> str:
        """The player's waiting (or forming) ticket id: one queue at a time."""
        return f"{self.prefix}:player:{player_id}:ticket"

    def player_table(self, player_id: str) -> str:
        """JSON ``{table_id, seat, game}`` of the table the player was last seated at."""
        return f"{self.prefix}:player:{player_id}:table"

    def expiring(self) -> str:
        """Sorted set ticket id -> expiry (ms) of waiting tickets."""
        return f"{self.prefix}:expiring"

    def forming(self) -> str:
        """Sorted set group id -> time (ms) of groups popped from a queue, table not yet made."""
        return f"{self.prefix}:forming"

    def group(self, group_id: str) -> str:
        """Hash of a group being seated: its tickets and players in seat order."""
        return f"{self.prefix}:group:{group_id}"

    def request(self, player_id: str, request_id: str) -> str:
        """The first answer to a player's mutation with this request id."""
        return f"{self.prefix}:request:{player_id}:{request_id}"

    def invite(self, code: str) -> str:
        """JSON of the private table an invite code names (expires with the code)."""
        return f"{self.prefix}:invite:{code}"

    def ticket_channel(self, ticket_id: str) -> str:
        """Pub/sub channel told whenever the ticket changes (WatchQueue listens)."""
        return f"{self.prefix}:ticket-changed:{ticket_id}"
