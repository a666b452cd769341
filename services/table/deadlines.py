"""Deadlines: applying a table's passed deadline (a timed-out turn, a closing reveal window,
the next round) through the versioned commit; ``services/table/timers.py`` finds them due.
"""

from __future__ import annotations

from games import contributions as fair_order
from games import table as rules_table
from services.table.core import (
    NotDueError,
    new_server_seed,
)
from services.table.engine import (
    Step,
    Table,
)
from services.table.metrics import DEADLINES
from services.table.rematch import REMATCH, Rematch
from services.table.store import (
    Snapshot,
    Transition,
)
from shared.stream import TableEvent


class Deadlines(Rematch):
    async def handle_deadline(self, table_id: str) -> bool:
        """Apply a passed deadline through the versioned commit; False when nothing was due."""
        applied: list[str] = []  # the kind of the deadline the last attempt applied

        def build(snapshot: Snapshot) -> Transition:
            table = Table.from_dict(snapshot.state)
            now = self.clock()
            if table.deadline is None or table.deadline.at_ms > now:
                raise NotDueError
            kind = table.deadline.kind
            if kind == REMATCH and table.status == rules_table.WAITING:
                # The others had the pause to accept: bots take the seats left.
                applied.append(kind)
                return self._transition(table, self.start_rematch(table, Step(game={})), {})
            if table.status != "playing":
                raise NotDueError
            engine = self._engine(table.game_name)
            applied.append(kind)
            if kind == fair_order.CONTRIBUTIONS:
                step = self._deal(table, str(table.fair.get("waiting") or fair_order.NEXT))
            elif kind == rules_table.NEXT_ROUND:
                step = self._deal(table, fair_order.NEXT)
            else:
                step = engine.on_deadline(table, new_server_seed(), now)
            if step.timed_out_seat is not None:
                limit = engine.timeouts_before_autoplay
                fact = rules_table.record_timeout(table, step.timed_out_seat, limit)
                if fact is not None:
                    round_no = engine.view(table, None).round_no
                    step.events.append(TableEvent(fact.type, round_no, fact.seat, fact.data))
            return self._transition(table, step, {})

        try:
            committed = await self.store.transact(table_id, build)
        except NotDueError:
            # Restore the index from the state (the claim moved it by a lease).
            await self.store.set_deadline(table_id, await self.store.deadline_of(table_id))
            return False
        except LookupError:
            await self.store.set_deadline(table_id, None)
            return False
        DEADLINES.labels(applied[-1]).inc()
        await self._after_commit(table_id, committed)
        return True
