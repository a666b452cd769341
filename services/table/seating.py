"""Seating: opening a table, taking and leaving a seat, starting the game.

Who may sit, leave and start is ``games.table``; this module commits it (an auto-start table
deals its first round in the same commit that fills it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from games import contributions as fair_order
from games import table as rules_table
from services.table.core import (
    ActResult,
    TableCore,
    answer_of,
    check_client_seed,
    check_request_id,
    check_watchers,
    table_id_for,
)
from services.table.engine import (
    BadRequestError,
    NotAllowedError,
    Step,
    Table,
    TableSettings,
    announce_deadline,
)
from services.table.store import (
    Snapshot,
    TableExistsError,
    Transition,
    request_field,
)
from shared.stream import TableEvent


class Seating(TableCore):
    async def create(
        self,
        creator: str,
        settings: TableSettings,
        *,
        game: str = "kishpa",
        players: Sequence[tuple[str, str]] = (),
        client_seed: str = "",
        client_seeds: Mapping[str, str] | None = None,
        will_contribute: Sequence[str] = (),
        auto_start: bool = False,
        request_id: str = "",
        table_id: str | None = None,
        viewer: str | None = None,
    ) -> ActResult:
        """Open a table with ``players`` (id, display name) seated in order, creator first.

        A player creating a table sits alone in seat 0; matchmaking seats a whole table and
        may ask it to start as soon as it is full. ``client_seeds`` (by player) and
        ``client_seed`` (the creator's) are mixed into every round's shuffle. The players in
        ``will_contribute`` declared that their clients contribute to every deal: every
        deal, the first included, waits for them (games/contributions.py).
        """
        check_request_id(request_id)
        seeds = dict(client_seeds or {})
        if client_seed:
            seeds[creator] = client_seed
        for seed in seeds.values():
            check_client_seed(seed)
        engine = self._engine(game)
        rules_table.check_settings(settings)
        check_watchers(settings)
        offered = self.stakes.get(game, (1,))
        if settings.stake not in offered:
            listed = ", ".join(str(stake) for stake in offered)
            raise BadRequestError(f"stake must be one of: {listed}", "BAD_STAKE")
        seated = list(players) or [(creator, "")]
        # A replayed CreateTable must find the table it created: with a request id, the
        # table's id is derived from it, so "create" is atomic and idempotent in one step.
        table_id = table_id or table_id_for(creator, request_id)
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
            commit = self._commit_event(table, 1)
            if self.await_lone_creator:
                fair_order.await_lone_creator(table)
            for player in will_contribute:
                if player in ids and player not in table.bots:
                    fair_order.declare(table, player)
            events = [
                TableEvent(
                    "table_created", 0, 0, {"creator": creator, "game": game, **settings.to_dict()}
                ),
                commit,
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
            return self._transition(table, step, answer_of({"table_id": table_id}))

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

    async def join(
        self,
        player_id: str,
        table_id: str,
        *,
        name: str = "",
        client_seed: str = "",
        will_contribute: bool = False,
        request_id: str = "",
        viewer: str | None = None,
    ) -> ActResult:
        """Take the next free seat at a table that has not started (``will_contribute``:
        his client contributes to every deal, see :meth:`create`)."""
        check_client_seed(client_seed)

        def compute(table: Table) -> tuple[Step | None, dict[str, Any]]:
            if table.rematch and player_id not in table.rematch.get("humans", []):
                raise NotAllowedError(
                    "this table replays a game: only its players may sit (PlayAgain)",
                    "NOT_ALLOWED",
                )
            fact = rules_table.seat(table, player_id, name=name, client_seed=client_seed)
            if will_contribute:
                fair_order.declare(table, player_id)
            event = TableEvent(fact.type, 0, fact.seat, fact.data)
            step = self._maybe_auto_start(table, Step(game=table.game, events=[event]))
            return step, {"seat": fact.seat}

        return await self._mutate(player_id, table_id, request_id, compute, viewer=viewer)

    async def leave(self, player_id: str, table_id: str, *, request_id: str = "") -> ActResult:
        """Leave a waiting table; during a game the seat goes on auto-play instead, and when
        only the server plays the table any more it ends with the round in progress."""

        def compute(table: Table) -> tuple[Step | None, dict[str, Any]]:
            fact = rules_table.leave(table, player_id)
            round_no = 0
            if table.status != rules_table.WAITING:
                round_no = self._engine(table.game_name).view(table, None).round_no
            event = TableEvent(fact.type, round_no, fact.seat, fact.data)
            events = [event]
            if table.status == rules_table.PLAYING:
                sooner = rules_table.deadline_after_leave(table, fact.seat, self.clock())
                announce_deadline(table, round_no, sooner, events)
                table.deadline = sooner
            step = Step(game=table.game, events=events, deadline=table.deadline)
            if table.status == rules_table.PLAYING and rules_table.abandoned(table):
                # Only the server plays here now: the table ends with the round in progress.
                ended = self._engine(table.game_name).abandon(table, self.clock())
                if ended is not None:
                    ended.events = [*events, *ended.events]
                    step = ended
            return step, {}

        return await self._mutate(player_id, table_id, request_id, compute)

    async def start(self, player_id: str, table_id: str, *, request_id: str = "") -> ActResult:
        """The creator starts the first round."""

        def compute(table: Table) -> tuple[Step | None, dict[str, Any]]:
            rules_table.check_start(table, player_id)
            rules_table.start_playing(table)
            return self._deal(table, fair_order.START), {}

        return await self._mutate(player_id, table_id, request_id, compute)
