"""The SDK's contributions to each deal's shuffle (docs/fairness.md, "The commitment order").

A :class:`~sdk.client.KishpaClient` contributes by default: it declares so when it asks for a
seat (``will_contribute``), and sends a fresh random contribution to every deal of a table it
sits at as soon as that deal's commitment is out: when it is seated (the answer of
``join_queue``, ``wait_for_table``, ``create_private_table``, ``join_by_code``), when a
``WatchTable`` stream opens, and on each ``seed_committed`` event, at once and in the
background (the table waits for declared seats up to a short deadline, so a late send slows
every deal). This module keeps what was sent, so a verifier can name the player's own
contribution in the deal (``KishpaClient.my_contribution``).
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import Awaitable, Callable
from typing import Any

import grpc

from sdk.errors import KishpaError

SEED_COMMITTED = "seed_committed"
QUIET = frozenset(
    {
        # Too late (already dealt), not seated, a bot seat: the deal uses the seat's default.
        grpc.StatusCode.FAILED_PRECONDITION,
        grpc.StatusCode.PERMISSION_DENIED,
        grpc.StatusCode.NOT_FOUND,
    }
)


def new_contribution() -> str:
    """16 fresh random bytes in hex (32 characters): what the SDK and ``kishpa play`` send."""
    return secrets.token_hex(16)


class Contributions:
    """What this client contributed (accepted, by table and deal) and its pending sends."""

    def __init__(self) -> None:
        self.accepted: dict[tuple[str, int], str] = {}
        self._tried: set[tuple[str, int]] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    def of(self, table_id: str, deal: int) -> str | None:
        """The contribution of this client accepted for ``deal`` at the table, if any."""
        return self.accepted.get((table_id, deal))

    def should_send(self, table_id: str, deal: int) -> bool:
        """True once per (table, deal): the first time a send is considered."""
        key = (table_id, deal)
        if deal <= 0 or key in self._tried:
            return False
        self._tried.add(key)
        return True

    async def send(
        self,
        table_id: str,
        deal: int,
        call: Callable[[str, int, str], Awaitable[Any]],
    ) -> str | None:
        """Send one contribution to ``deal`` through ``call(table_id, deal, text)``; the text
        when accepted, None when the table refused it quietly (too late, not seated)."""
        text = new_contribution()
        try:
            await call(table_id, deal, text)
        except KishpaError as exc:
            if exc.code in QUIET:
                return None
            raise
        self.accepted[(table_id, deal)] = text
        for old in [k for k in self.accepted if k[0] == table_id and k[1] < deal - 8]:
            del self.accepted[old]
        return text

    def in_background(self, work: Callable[[], Awaitable[Any]]) -> None:
        """Run ``work()`` now without waiting for it (a watch stream keeps delivering). The
        coroutine is made inside the task, so a task cancelled before it ran leaves none
        never awaited."""

        async def run() -> None:
            # Best effort: without it the deal is dealt with the seat's default.
            with contextlib.suppress(KishpaError):
                await work()

        task = asyncio.ensure_future(run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def settle(self) -> None:
        """Wait for the sends in flight (tests, a client about to close)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    def cancel(self) -> None:
        for task in list(self._tasks):
            task.cancel()
