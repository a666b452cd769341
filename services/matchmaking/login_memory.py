"""What a guest login attempt answered, kept so a retry of it gets the same player.

A guest ``Login`` mints a new player and opens his wallet with the device's starting grant.
When its answer is lost (a dropped connection, a passed deadline) the client sends it again;
without a memory that retry minted a *second* player, whose wallet opened empty because the
device's grant had gone to the first one (2,000 tokens stranded on a player nobody holds).

The client sends one ``request_id`` per login attempt and the same one on every retry. The
first call records, before it touches the wallet, which player it minted under that id; a
retry finds him and runs the rest again (the grant claim and the wallet opening are both
idempotent per player), so it ends with the same player and his one grant. Only the player
id is kept, never the token: a replay is answered with a freshly signed token.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, Final

from services.matchmaking.keys import Keys

LOGIN_MEMORY_TTL_S: Final = 15 * 60
"""How long a login attempt is remembered: far longer than any client keeps retrying one
(the SDK's ``KISHPA_RETRY_BUDGET_S``, 30 s by default; the web client's 45 s)."""


def attempt_key(device_id: str, request_id: str) -> str:
    """The attempt's name in Redis: a hash, so a client's text never shapes a key, and
    scoped by the device so one install's id never finds another's player."""
    digest = hashlib.sha256(device_id.encode())
    digest.update(b"\0")
    digest.update(request_id.encode())
    return digest.hexdigest()[:40]


@dataclass(frozen=True, slots=True)
class Remembered:
    """The player a login attempt minted, and the fingerprint of the request that did."""

    player_id: str
    fingerprint: str


class LoginMemory:
    """Login attempts by request id, in the matchmaking service's Redis."""

    def __init__(self, redis: Any, keys: Keys) -> None:
        self._redis = redis
        self._keys = keys

    async def remember(
        self, device_id: str, request_id: str, player_id: str, fingerprint: str
    ) -> Remembered:
        """Record ``player_id`` for the attempt unless it has a player already; returns the
        attempt's player either way (a concurrent retry may have recorded first)."""
        key = self._keys.login(attempt_key(device_id, request_id))
        value = json.dumps({"player_id": player_id, "fp": fingerprint})
        if await self._redis.set(key, value, ex=LOGIN_MEMORY_TTL_S, nx=True):
            return Remembered(player_id, fingerprint)
        raw = await self._redis.get(key)
        if raw is None:  # expired between the two calls: the attempt is as good as new
            await self._redis.set(key, value, ex=LOGIN_MEMORY_TTL_S)
            return Remembered(player_id, fingerprint)
        first = json.loads(raw)
        return Remembered(str(first["player_id"]), str(first["fp"]))
