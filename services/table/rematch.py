"""Play again (issue 33): a new table with the same players, bots and stake as a table whose
game is over.

Each human of the old table accepts with ``PlayAgain``. The first acceptance opens the new
table (its id derived from the old one, so every acceptance finds the same table and a
retried call is harmless) with him seated; the others take their seats as they accept. When
every human of the old table sat down, the house bots sit in their seats and the first deal
is dealt in that same commit. When the table's pause (``next_round_pause_ms``, the pause
between deals) passes first, a bot takes the seat of each human who did not accept and the
game starts without him; nobody is charged anything before the new game starts.
"""

from __future__ import annotations

import hashlib
from dataclasses import replace
from typing import Any

from games import contributions as fair_order
from games import table as rules_table
from services.table.core import (
    ActResult,
    TableCore,
    answer_of,
    check_request_id,
)
from services.table.engine import Deadline, Step, Table
from services.table.store import Snapshot, TableExistsError, Transition, request_field
from shared.stream import TableEvent

REMATCH = "rematch"
"""The deadline of a new table waiting for the old table's players to accept."""


def rematch_id(table_id: str) -> str:
    """The id of the table that replays ``table_id`` (the same for every acceptance)."""
    return "t" + hashlib.sha256(f"kishpa/rematch\0{table_id}".encode()).digest()[:12].hex()


def humans_of(table: Table) -> list[str]:
    """The old table's human players, in seat order."""
    return [p for p in table.players if p not in table.bots]


def check_may_play_again(table: Table, player_id: str) -> None:
    """Only a human who sat at the table, once its game is over."""
    if player_id not in humans_of(table):
        raise rules_table.NotAllowed("you did not play at this table", "NOT_SEATED")
    if table.status != rules_table.CLOSED:
        raise rules_table.TableRuleError("the game is not over yet", "GAME_NOT_OVER")


class Rematch(TableCore):
    async def play_again(
        self, player_id: str, table_id: str, *, name: str = "", request_id: str = ""
    ) -> ActResult:
        """Accept to play again: open the new table or sit at it; it starts once every
        human of the old table accepted (or its pause passed: bots in the missing seats)."""
        check_request_id(request_id)
        old, _ = await self._load(table_id)
        check_may_play_again(old, player_id)
        new_id = rematch_id(table_id)
        try:
            return await self._open_rematch(old, new_id, player_id, name, request_id)
        except TableExistsError:
            return await self._join_rematch(old, new_id, player_id, name, request_id)

    async def _open_rematch(
        self, old: Table, new_id: str, player_id: str, name: str, request_id: str
    ) -> ActResult:
        humans = humans_of(old)
        settings = replace(old.settings, bots=0)
        pause = old.settings.next_round_pause_ms or rules_table.DEFAULT_NEXT_DEAL_PAUSE_MS

        def build(snapshot: Snapshot) -> Transition:
            now = self.clock()
            table = Table(
                table_id=new_id,
                game_name=old.game_name,
                creator=player_id,
                settings=settings,
                created_ms=now,
                players=[player_id],
                names={player_id: name or old.names.get(player_id, "")},
                rematch={"of": old.table_id, "humans": humans},
            )
            table.deadline = Deadline(now + pause, REMATCH)
            events = [
                TableEvent(
                    "table_created",
                    0,
                    0,
                    {"creator": player_id, "game": old.game_name, **settings.to_dict()},
                ),
                self._commit_event(table, 1),
                TableEvent("player_joined", 0, 0, {"player_id": player_id, "name": name}),
            ]
            step = self._start_if_everyone(table, Step(game=table.game, events=events))
            if table.status == rules_table.WAITING:
                step.deadline = table.deadline  # the pause the others have to accept
            return self._transition(table, step, answer_of({"table_id": new_id}))

        committed = await self.store.transact(
            new_id, build, create=True, request=request_field(player_id, request_id)
        )
        await self._after_commit(new_id, committed)
        committed = await self._seed_balances(new_id, committed)
        return await self._answer(player_id, new_id, committed)

    async def _join_rematch(
        self, old: Table, new_id: str, player_id: str, name: str, request_id: str
    ) -> ActResult:
        def compute(table: Table) -> tuple[Step | None, dict[str, Any]]:
            if table.seat_of(player_id) is not None:
                return None, {"table_id": new_id}  # accepted already
            fact = rules_table.seat(table, player_id, name=name or old.names.get(player_id, ""))
            event = TableEvent(fact.type, 0, fact.seat, fact.data)
            step = Step(game=table.game, events=[event], deadline=table.deadline)
            return self._start_if_everyone(table, step), {"table_id": new_id}

        return await self._mutate(player_id, new_id, request_id, compute)

    def _start_if_everyone(self, table: Table, step: Step) -> Step:
        """Every human of the old table sat down: seat the bots and deal."""
        wanted = table.rematch.get("humans", [])
        if table.status == rules_table.WAITING and set(wanted) <= set(table.players):
            return self.start_rematch(table, step)
        return step

    def start_rematch(self, table: Table, step: Step) -> Step:
        """Seat a house bot in every seat still free (the old table's bots, and the humans
        who did not accept) and deal the first deal."""
        free = table.settings.seats - len(table.players)
        if free > 0:
            table.settings = replace(table.settings, bots=free)
            for bot_id, bot_name in rules_table.house_bots(
                table.settings, len(table.players), table.table_id
            ):
                table.players.append(bot_id)
                table.bots.append(bot_id)
                table.names[bot_id] = bot_name
                data = {"player_id": bot_id, "name": bot_name, "bot": True}
                step.events.append(TableEvent("player_joined", 0, len(table.players) - 1, data))
        table.deadline = None
        rules_table.start_playing(table)
        started = self._deal(table, fair_order.START)
        started.events = [*step.events, *started.events]
        return started
