"""The table service's use cases, in one façade: :class:`Tables`.

Split along their seams (see ``services/table/core.py``): the commit and the views
(:class:`~services.table.core.TableCore`), seating (``seating.py``), watching
(``watching.py``), deadlines (``deadlines.py``); playing is here: a seated player's moves,
pressing the last round, the rack order, hints, a player's contribution to the next deal's
shuffle, and the operator's close.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from games import contributions as fair_order
from games import table as rules_table
from services.table.core import (
    ActResult,
    TableNotFoundError,
    TableView,
    new_server_seed,
    now_ms,
)
from services.table.deadlines import Deadlines
from services.table.engine import (
    Action,
    Hint,
    Step,
    Table,
)
from services.table.seating import Seating
from services.table.watching import Watching
from shared.stream import NO_SEAT, TableEvent

PLAYER_READY = "player_ready"
"""A seat said it is ready for the next deal (the pause between deals may end early)."""


class Tables(Seating, Watching, Deadlines):
    """The table use cases over one store and the registered game engines."""

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
                {"deal": deal, "contribution": contribution, "player_id": player_id},
            )
            step = Step(game=table.game, events=[event], deadline=table.deadline)
            waiting = table.fair.get("waiting")
            if waiting and not fair_order.awaited(table):
                dealt = self._deal(table, str(waiting))
                dealt.events = [event, *dealt.events]
                step = dealt
            return step, {}

        return await self._mutate(player_id, table_id, request_id, compute)

    async def ready(
        self, player_id: str, table_id: str, ended_round: int, *, request_id: str = ""
    ) -> ActResult:
        """The player is ready for the deal after ``ended_round``: ``player_ready``, and the
        next deal at once when no human seat is awaited any more (else the pause runs on)."""

        def compute(table: Table) -> tuple[Step | None, dict[str, Any]]:
            current = self._engine(table.game_name).view(table, None).round_no
            seat = rules_table.mark_ready(table, player_id, ended_round, current)
            if seat is None:
                return None, {}
            data = {"player_id": player_id, "next_round": ended_round + 1}
            event = TableEvent(PLAYER_READY, ended_round, seat, data)
            step = Step(game=table.game, events=[event], deadline=table.deadline)
            pausing = table.deadline is not None and table.deadline.kind == rules_table.NEXT_ROUND
            if pausing and not rules_table.awaited_ready(table):
                dealt = self._deal(table, fair_order.NEXT)
                dealt.events = [event, *dealt.events]
                step = dealt
            return step, {}

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


__all__ = [
    "NO_SEAT",
    "ActResult",
    "TableNotFoundError",
    "TableView",
    "Tables",
    "new_server_seed",
    "now_ms",
]
