"""The drift check: the tables against the ledger, in two halves.

The ledger's own consistency is :mod:`services.wallet.reconcile`; this checks that what the
tables say happened is what the ledger holds, and reports each difference with what to do.

- **New rounds** (:mod:`workers.drift_archive`): every phase archived or posted since the
  last clean run, the round archive's record of it against the ledger's batches of its
  round. Incremental: its cost is the rounds played since, not the tables' age.
- **Live tables** (this module): what Redis still holds of each open table (the current
  round's phase records and settled marks: settle.lua trims the rest once archived), its
  bowl and pot, and the balances it shows, against the ledger's batches *of those rounds*
  (``GetTableLedger`` with ``rounds``): a cost per open table, never per round played.

It reads each side only through its contract: the outbox and settled hashes through
``shared`` (the settlement hand-off the workers already own), the table's bowl and pot and
whether it is closed through the table service's ``GetTable``, the ledger through the
wallet's finance RPCs (``GetTableLedger``, ``ListTableAccounts``, ``ExportTransfers``, and
``GetAccountStatement`` for the balances the table shows, compared as of the batch that
wrote them), and the round archive (the workers' own) directly. The run is stored by the
wallet (``RecordReconciliationRun``) and counted in metrics an alert fires on.

Live tables looked at: every table with an outbox in Redis, plus every bowl or pot the ledger
says holds tokens. A table whose phases are still settling, or that moved while it was read,
has only its settled phases compared (never its bowl): the next run looks again.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import grpc
import redis
import sqlalchemy as sa
from google.protobuf.duration_pb2 import Duration
from google.protobuf.timestamp_pb2 import Timestamp

from archive.migrate import ArchiveNotMigrated
from archive.store import ArchiveStore
from games.ledger import Posting
from kishpa.table.v1 import table_pb2, table_pb2_grpc
from kishpa.wallet.v1 import wallet_pb2, wallet_pb2_grpc
from services.common.auth import ServiceCredentials
from services.common.logging import get_logger
from services.common.settings import Settings
from services.common.tls import client_tls_from_settings
from shared import keys
from shared.phase_record import BadPhaseRecord, PhaseRecord, parse_phase_record
from shared.tls import sync_channel
from workers import metrics
from workers.archive_write import archive_store
from workers.celery_app import PERIODIC_CHECK, kishpa_task
from workers.config import worker_config
from workers.outbox import ROUND_ORDER_STRIDE, TRIMMED_FIELD, phase_order
from workers.settlement import PermanentSettlementError, compute_postings, redis_client
from workers.wallet_client import CHANNEL_OPTIONS

log = get_logger(__name__)

DRIFT_TASK = "kishpa.check_drift"
CALL_TIMEOUT_S = 30.0
SERVICE_NAME = "worker"
MAX_LISTED = 100
SETTLEMENT_KEY_PREFIX = "kishpa:"
LOAD_REASON = "bank_load"

ACTIONS: Mapping[str, str] = {
    "bowl_mismatch": (
        "the table's bowl in Redis differs from bowl:<table> in the ledger, with every phase "
        "settled: the ledger is the truth for money. Compare the table's events with "
        "`kishpa wallet history --table <table>`; if the table state is wrong, close the table "
        "(`kishpa admin close-table`) so its bowl is refunded from the ledger"
    ),
    "pot_mismatch": (
        "the Hand table's pot in Redis differs from pot:<table> in the ledger, with every "
        "phase settled: as for a bowl, the ledger is the truth; close the table to refund it"
    ),
    "closed_table_not_zero": (
        "a closed (or forgotten) table's bowl or pot still holds tokens: refund it with "
        "`kishpa admin close-table --table <table>` (it refunds whoever paid in)"
    ),
    "phase_settled_twice": (
        "two ledger batches carry the same round phase: find the one the table's settled hash "
        "does not name (`kishpa wallet export --table <table>`) and reverse its effect with "
        "`kishpa admin debit|credit`, quoting the incident"
    ),
    "batch_without_phase": (
        "a ledger batch names the table but no phase the table recorded: someone applied it "
        "by hand (or a bug invented it). Identify its request id, confirm with the table's "
        "events, and reverse it with `kishpa admin debit|credit` if it is not owed"
    ),
    "settled_without_batch": (
        "the table marked a phase settled but the ledger has no batch under its key: the "
        "players saw balances the ledger never applied. Stop and escalate: do not settle by hand"
    ),
    "settled_batch_mismatch": (
        "the table's settled hash names another batch than the ledger holds for the phase: "
        "escalate (a database restore or a replay under another key)"
    ),
    "postings_differ": (
        "the ledger's postings for a phase are not what the rules compute from the table's "
        "phase record (a doctored posting or a changed rule): run `kishpa wallet reconcile`, "
        "then correct with audited admin batches"
    ),
    "balance_mismatch": (
        "a player's balance in the table's balances hash (what the table shows) differs from "
        "the ledger's balance right after the batch that wrote it: the ledger is the truth; "
        "the next settled phase rewrites the hash. If it recurs, compare "
        "`kishpa wallet history --table <table>` with the table's events and escalate"
    ),
    "bad_phase_record": (
        "a phase record in the outbox cannot be read: it is also dead-lettered; see "
        "`kishpa worker dead-letters`"
    ),
}


def round_pot(round_msg: table_pb2.Round) -> int:
    """The tokens a round's game part shows in its pot (0 for a game without one)."""
    case = round_msg.WhichOneof("game_round")
    part = getattr(round_msg, case) if case else None
    return int(getattr(part, "pot", 0))


def _elapsed(started: float) -> Duration:
    """The time since ``started`` (a ``time.time()``), to the millisecond."""
    duration = Duration()
    duration.FromMilliseconds(int((time.time() - started) * 1000))
    return duration


@dataclass(frozen=True, slots=True)
class Difference:
    """One disagreement between a table and the ledger."""

    check: str
    table_id: str
    detail: str

    @property
    def action(self) -> str:
        return ACTIONS[self.check]

    def to_dict(self) -> dict[str, str]:
        return {
            "check": self.check,
            "table_id": self.table_id,
            "detail": self.detail,
            "action": self.action,
        }


@dataclass(slots=True)
class DriftReport:
    """What one drift check looked at and found."""

    tables: int = 0
    in_motion: int = 0
    differences: list[Difference] = field(default_factory=list)
    new_rounds: dict[str, int] = field(default_factory=dict)
    """The incremental half's window and what it read (``ArchiveCheck.to_dict``)."""

    @property
    def ok(self) -> bool:
        return not self.differences

    def by_check(self) -> dict[str, int]:
        counts = dict.fromkeys(ACTIONS, 0)
        for d in self.differences:
            counts[d.check] += 1
        return counts

    def to_dict(self) -> dict[str, Any]:
        return {
            "tables": self.tables,
            "in_motion": self.in_motion,
            "ok": self.ok,
            "by_check": self.by_check(),
            "new_rounds": self.new_rounds,
            "differences": [d.to_dict() for d in self.differences[:MAX_LISTED]],
        }


# --- the facts of one table, from each side ---------------------------------------------


@dataclass(frozen=True, slots=True)
class RedisFacts:
    """The settlement hand-off of a table: phase records and settled phases' batch ids."""

    records: Mapping[str, PhaseRecord | None]
    """Outbox field ("<round>:<phase>") -> its record (None: unreadable)."""
    settled: Mapping[str, str]
    """Settled field -> the batch id the workers recorded."""
    trimmed_round: int = -1
    """Rounds up to this one were settled and trimmed from Redis (settle.lua): their
    batches name phases Redis no longer holds, rightly."""

    @property
    def fully_settled(self) -> bool:
        return set(self.records) <= set(self.settled)

    def rounds(self) -> tuple[int, ...]:
        """The rounds Redis still holds a phase of (the ledger is read for these only)."""
        return tuple(sorted({_round(f) for f in (*self.records, *self.settled)} - {-1}))


@dataclass(frozen=True, slots=True)
class TableFacts:
    """What the table service says: closed or not, its bowl and pot."""

    closed: bool
    bowl: int
    pot: int


@dataclass(frozen=True, slots=True)
class LedgerBatch:
    batch_id: int
    request_id: str
    postings: tuple[Posting, ...]


@dataclass(frozen=True, slots=True)
class PhasePosting:
    """One ledger posting as the export lists it: which table, round and phase it names."""

    table_id: str
    round_no: int
    phase: str
    reason: str
    batch_id: int


@dataclass(frozen=True, slots=True)
class LedgerFacts:
    bowl: int
    pot: int
    batches: tuple[LedgerBatch, ...]


def _movement(p: Posting) -> tuple[str, str, int, str]:
    return (p.from_account, p.to_account, p.amount, p.reason)


def compare(
    table_id: str,
    redis_facts: RedisFacts | None,
    table: TableFacts | None,
    ledger: LedgerFacts,
    expected: Callable[[PhaseRecord], Sequence[Posting]],
    *,
    settled_still: bool,
) -> list[Difference]:
    """Every difference between one table's live facts and the ledger (pure).

    ``redis_facts`` None: Redis no longer holds the table; ``table`` None: the table service
    does not know it. ``settled_still``: nothing moved while the facts were read, and every
    recorded phase is settled, so money can be compared.
    """
    found: list[Difference] = []
    by_phase: dict[str, list[LedgerBatch]] = {}
    for batch in ledger.batches:
        if batch.request_id.startswith("wallet:admin:"):
            continue  # audited corrections and refunds: the admin audit log explains them
        phases = {f"{p.round}:{p.phase}" for p in batch.postings if p.table_id == table_id}
        for phase_field in sorted(phases):
            by_phase.setdefault(phase_field, []).append(batch)
            # A trimmed round's phases left Redis once settled (settle.lua), rightly.
            trimmed = redis_facts is not None and _round(phase_field) <= redis_facts.trimmed_round
            if redis_facts is not None and phase_field not in redis_facts.records and not trimmed:
                found.append(
                    Difference(
                        "batch_without_phase",
                        table_id,
                        f"batch {batch.batch_id} ({batch.request_id}) posts phase "
                        f"{phase_field!r}, which the table never recorded",
                    )
                )
    for phase_field, batches in sorted(by_phase.items()):
        if len(batches) > 1:
            ids = ", ".join(f"{b.batch_id} ({b.request_id})" for b in batches)
            found.append(
                Difference("phase_settled_twice", table_id, f"phase {phase_field}: batches {ids}")
            )
    if redis_facts is not None:
        for phase_field, record in sorted(redis_facts.records.items()):
            if record is None:
                found.append(Difference("bad_phase_record", table_id, f"phase {phase_field}"))
                continue
            settled_batch = redis_facts.settled.get(phase_field)
            if settled_batch is None:
                continue  # still settling: the sweeper's business
            key = f"{SETTLEMENT_KEY_PREFIX}{table_id}:{phase_field}"
            keyed = [b for b in ledger.batches if b.request_id == key]
            if not keyed and settled_batch == "" and not expected(record):
                continue  # nothing moves in this phase: settled, rightly, without a batch
            if not keyed:
                found.append(
                    Difference(
                        "settled_without_batch",
                        table_id,
                        f"phase {phase_field} settled as batch {settled_batch}, no batch {key}",
                    )
                )
                continue
            batch = keyed[0]
            if str(batch.batch_id) != settled_batch:
                found.append(
                    Difference(
                        "settled_batch_mismatch",
                        table_id,
                        f"phase {phase_field}: settled names batch {settled_batch}, "
                        f"the ledger's is {batch.batch_id}",
                    )
                )
            want = sorted(_movement(p) for p in expected(record))
            have = sorted(_movement(p) for p in batch.postings if p.reason != LOAD_REASON)
            if want != have:
                found.append(
                    Difference(
                        "postings_differ",
                        table_id,
                        f"phase {phase_field} batch {batch.batch_id}: "
                        + postings_difference(want, have),
                    )
                )
    if settled_still:
        if table is not None and table.bowl != ledger.bowl:
            found.append(
                Difference(
                    "bowl_mismatch",
                    table_id,
                    f"table bowl {table.bowl}, ledger bowl:{table_id} {ledger.bowl}",
                )
            )
        if table is not None and table.pot != ledger.pot:
            found.append(
                Difference(
                    "pot_mismatch",
                    table_id,
                    f"table pot {table.pot}, ledger pot:{table_id} {ledger.pot}",
                )
            )
        if (table is None or table.closed) and (ledger.bowl or ledger.pot):
            state = "closed" if table is not None else "unknown to the table service"
            found.append(
                Difference(
                    "closed_table_not_zero",
                    table_id,
                    f"table {state}; bowl {ledger.bowl}, pot {ledger.pot}",
                )
            )
    return found


Movement = tuple[str, str, int, str]


def postings_difference(want: Sequence[Movement], have: Sequence[Movement]) -> str:
    """Which postings differ and in which field, the rules' side against the ledger's.

    A posting on both sides between the same accounts for the same reason but of another
    amount is named with both amounts; what only one side holds is listed as such; an
    empty side is said in words (never an empty list).
    """
    missing = Counter(want) - Counter(have)
    extra = Counter(have) - Counter(want)
    parts: list[str] = []
    for m in sorted(missing.elements()):
        same = next((e for e in sorted(extra.elements()) if e[:2] + e[3:] == m[:2] + m[3:]), None)
        if same is not None:
            extra[same] -= 1
            missing[m] -= 1
            parts.append(
                f"{m[0]}->{m[1]} {m[3]}: amount {m[2]} by the rules, {same[2]} in the ledger"
            )
    left = sorted((+missing).elements())
    if left:
        parts.append("the rules give, the ledger lacks: " + _show(left))
    more = sorted((+extra).elements())
    if more:
        parts.append("the ledger holds, the rules do not give: " + _show(more))
    if not have:
        parts.append("the ledger's batch holds no posting of this phase")
    if not want:
        parts.append("the rules give no posting for this phase")
    return "; ".join(parts)


def _reason(reason: int) -> str:
    """``TRANSFER_REASON_BOWL_WIN`` -> ``bowl_win`` (the rules' and the archive's names)."""
    return (
        wallet_pb2.TransferReason.Name(wallet_pb2.TransferReason.ValueType(reason))
        .removeprefix("TRANSFER_REASON_")
        .lower()
    )


def _round(phase_field: str) -> int:
    head = phase_field.split(":", 1)[0]
    return int(head) if head.isdigit() else -1


def _show(movements: Sequence[tuple[str, str, int, str]]) -> str:
    text = "; ".join(f"{f}->{t} {a} {r}" for f, t, a, r in movements)
    return text if len(text) <= 600 else text[:600] + "..."


# --- the balances the table shows (Redis) against the ledger ----------------------------


BALANCES_ORDER_FIELD = "_balances_order"
"""Settled-hash field (settle.lua): the order of the phase whose settlement wrote the
balances hash."""


@dataclass(frozen=True, slots=True)
class TableBalances:
    """The table's balances hash and the ledger batch that wrote it, read atomically."""

    batch_id: int
    """The batch of the phase named by ``_balances_order`` (0: that phase moved nothing,
    its balances were read from the wallet at some moment no batch marks)."""
    balances: Mapping[str, int]
    """Player id -> the balance the table shows."""


def read_table_balances(client: redis.Redis, table_id: str) -> TableBalances | None:
    """The balances hash with the batch that wrote it (None: no settlement wrote it yet).

    One MULTI read, as settle.lua writes the hash, ``_balances_order`` and the phase's
    settled mark in one script: the three always belong together.
    """
    pipe = client.pipeline(transaction=True)
    pipe.hgetall(keys.balances(table_id))
    pipe.hgetall(keys.settled(table_id))
    raw_balances, settled = pipe.execute()
    marks = {_text(k): v for k, v in settled.items()}
    order = marks.get(BALANCES_ORDER_FIELD)
    if order is None:
        return None  # seeded from the wallet at seating (wallet_balances.py): no batch
    batch_id = 0
    for phase_field, raw in marks.items():
        head, _, phase = phase_field.partition(":")
        if head.isdigit() and phase_order(int(head), phase) == int(order):
            try:
                batch_id = int(json.loads(raw).get("batch_id") or 0)
            except (ValueError, AttributeError):
                batch_id = 0
    balances = {_text(k): int(v) for k, v in raw_balances.items()}
    return TableBalances(batch_id, balances)


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def compare_balances(
    table_id: str, shown: TableBalances, ledger_after: Mapping[str, int]
) -> list[Difference]:
    """Each player whose shown balance differs from the ledger's after ``shown.batch_id``.

    ``ledger_after``: player id -> the ledger balance of ``player:<id>`` right after that
    batch, for the players the batch posted to (only they are comparable: the workers took
    the others' balances from the wallet at a moment no batch marks). Pure.
    """
    return [
        Difference(
            "balance_mismatch",
            table_id,
            f"table {table_id} account player:{player}: Redis balance {shown.balances[player]}, "
            f"ledger balance {ledger_after[player]} after batch {shown.batch_id}",
        )
        for player in sorted(shown.balances)
        if player in ledger_after and shown.balances[player] != ledger_after[player]
    ]


# --- reading the facts ------------------------------------------------------------------


def read_redis_facts(client: redis.Redis, table_id: str) -> RedisFacts | None:
    """The table's outbox and settled hashes (None when Redis holds no outbox)."""
    pipe = client.pipeline(transaction=False)
    pipe.hgetall(keys.outbox(table_id))
    pipe.hgetall(keys.settled(table_id))
    outbox, settled = pipe.execute()
    if not outbox:
        return None
    records: dict[str, PhaseRecord | None] = {}
    for name, raw in outbox.items():
        phase_field = name.decode() if isinstance(name, bytes) else str(name)
        try:
            records[phase_field] = parse_phase_record(raw)
        except BadPhaseRecord:
            records[phase_field] = None
    done: dict[str, str] = {}
    trimmed = -1
    for name, raw in settled.items():
        phase_field = name.decode() if isinstance(name, bytes) else str(name)
        if phase_field == TRIMMED_FIELD:
            trimmed = int(raw)
        if phase_field.startswith("_"):
            continue  # the workers' own bookkeeping (e.g. _balances_order), not a phase
        try:
            done[phase_field] = str(json.loads(raw).get("batch_id", ""))
        except (ValueError, AttributeError):
            done[phase_field] = ""
    return RedisFacts(records, done, trimmed)


def tables_in_redis(client: redis.Redis, scan_count: int = 500) -> Iterable[str]:
    """Every table with an outbox (SCAN: a drift check runs minutes apart, not per sweep)."""
    prefix = f"{keys.PREFIX}:table:{{"
    for key in client.scan_iter(match=keys.outbox_pattern(), count=scan_count):
        text = key.decode() if isinstance(key, bytes) else str(key)
        if text.startswith(prefix) and "}:" in text:
            yield text[len(prefix) : text.index("}:")]


class Sources(Protocol):
    """Where the check reads the table service and the ledger."""

    def table(self, table_id: str) -> TableFacts | None: ...

    def ledger(self, table_id: str, rounds: Sequence[int] = ()) -> LedgerFacts: ...

    def nonzero_tables(self) -> Iterable[str]: ...

    def round_batches(self, table_id: str, round_no: int) -> Sequence[LedgerBatch]: ...

    def postings_between(self, since_ms: int, until_ms: int) -> Iterable[PhasePosting]: ...

    def balances_after(self, batch_id: int, players: Sequence[str]) -> Mapping[str, int]: ...

    def record(self, report: DriftReport, source: str, started: float) -> int: ...


class GrpcSources:
    """The table service and the wallet over gRPC, with the workers' service credential."""

    def __init__(self, settings: Settings) -> None:
        settings.require_workload_identity()
        self._credentials = ServiceCredentials.for_process(settings, SERVICE_NAME)
        tls = client_tls_from_settings(settings)
        self._table_channel = sync_channel(settings.table_addr, tls, options=CHANNEL_OPTIONS)
        self._wallet_channel = sync_channel(settings.wallet_addr, tls, options=CHANNEL_OPTIONS)
        self._tables = table_pb2_grpc.TableServiceStub(self._table_channel)
        self._wallet = wallet_pb2_grpc.WalletServiceStub(self._wallet_channel)
        self._batch_times: dict[int, Timestamp] = {}
        """Batch id -> its effective time, from the ledger reads (statements start there)."""

    def close(self) -> None:
        self._table_channel.close()
        self._wallet_channel.close()

    def table(self, table_id: str) -> TableFacts | None:
        try:
            view = self._tables.GetTable(
                table_pb2.GetTableRequest(table_id=table_id),
                metadata=self._credentials.metadata(),
                timeout=CALL_TIMEOUT_S,
            ).table
        except grpc.RpcError as exc:
            if isinstance(exc, grpc.Call) and exc.code() == grpc.StatusCode.NOT_FOUND:
                return None
            raise
        pot = round_pot(view.round)
        return TableFacts(view.status == table_pb2.TABLE_STATUS_CLOSED, view.bowl, pot)

    def ledger(self, table_id: str, rounds: Sequence[int] = ()) -> LedgerFacts:
        """The table's bowl and pot, and its batches (of ``rounds`` only, when given)."""
        reply = self._wallet.GetTableLedger(
            wallet_pb2.GetTableLedgerRequest(table_id=table_id, rounds=rounds),
            metadata=self._credentials.metadata(),
            timeout=CALL_TIMEOUT_S,
        )
        batches = tuple(
            LedgerBatch(
                b.batch_id,
                b.request_id,
                tuple(
                    Posting(
                        t.posting.from_account,
                        t.posting.to_account,
                        t.posting.amount,
                        _reason(t.posting.reason),
                        t.posting.table_id,
                        t.posting.round,
                        t.posting.phase,
                    )
                    for t in b.transfers
                ),
            )
            for b in reply.batches
        )
        for b in reply.batches:
            if b.transfers:
                self._batch_times[b.batch_id] = b.transfers[0].effective_time
        return LedgerFacts(reply.bowl, reply.pot, batches)

    def round_batches(self, table_id: str, round_no: int) -> Sequence[LedgerBatch]:
        """The ledger's batches of one round of a table (the incremental half's read)."""
        return self.ledger(table_id, (round_no,)).batches

    def postings_between(self, since_ms: int, until_ms: int) -> Iterable[PhasePosting]:
        """Every posting the ledger made in ``[since_ms, until_ms)`` (by effective time),
        streamed as columns: what is new since the last clean run."""
        since, until = Timestamp(), Timestamp()
        since.FromMilliseconds(since_ms)
        until.FromMilliseconds(until_ms)
        stream = self._wallet.ExportTransfers(
            wallet_pb2.ExportTransfersRequest(
                since=since, until=until, columns=True, chunk_size=5000
            ),
            metadata=self._credentials.metadata(),
            timeout=CALL_TIMEOUT_S * 10,
        )
        for chunk in stream:
            c = chunk.columns
            for i in range(len(c.batch_id)):
                yield PhasePosting(
                    c.table_id[i], c.round[i], c.phase[i], _reason(c.reason[i]), c.batch_id[i]
                )

    def balances_after(self, batch_id: int, players: Sequence[str]) -> Mapping[str, int]:
        """Each player's running balance after his last posting in ``batch_id`` (statement)."""
        since = self._batch_times.get(batch_id)
        out: dict[str, int] = {}
        for player in players:
            request = wallet_pb2.GetAccountStatementRequest(account=f"player:{player}")
            if since is not None:
                request.since.CopyFrom(since)
            stream = self._wallet.GetAccountStatement(
                request, metadata=self._credentials.metadata(), timeout=CALL_TIMEOUT_S
            )
            for chunk in stream:
                for line in chunk.lines:
                    if line.batch_id == batch_id:
                        out[player] = int(line.balance)
        return out

    def nonzero_tables(self) -> Iterable[str]:
        token = ""
        while True:
            reply = self._wallet.ListTableAccounts(
                wallet_pb2.ListTableAccountsRequest(page_size=1000, page_token=token),
                metadata=self._credentials.metadata(),
                timeout=CALL_TIMEOUT_S,
            )
            for balance in reply.balances:
                yield balance.account.partition(":")[2]
            token = reply.next_page_token
            if not token:
                return

    def record(self, report: DriftReport, source: str, started: float) -> int:
        start = wallet_pb2.ReconciliationRun().start_time
        start.FromMilliseconds(int(started * 1000))
        run = wallet_pb2.ReconciliationRun(
            kind="drift",
            scope=(
                f"{report.tables} live tables (Redis outboxes and non-zero bowls/pots), "
                f"{report.new_rounds.get('rounds', 0)} new rounds (archive and ledger)"
            ),
            source=source,
            start_time=start,
            duration=_elapsed(started),
            ok=report.ok,
            discrepancies=len(report.differences),
            result_json=json.dumps(report.to_dict(), sort_keys=True),
        )
        reply = self._wallet.RecordReconciliationRun(
            wallet_pb2.RecordReconciliationRunRequest(run=run),
            metadata=self._credentials.metadata(),
            timeout=CALL_TIMEOUT_S,
        )
        return int(reply.run_id)


def check_drift(
    client: redis.Redis,
    sources: Sources,
    expected: Callable[[PhaseRecord], Sequence[Posting]],
) -> DriftReport:
    """Compare every table Redis or the ledger knows with the ledger."""
    report = DriftReport()
    tables = set(tables_in_redis(client)) | set(sources.nonzero_tables())
    for table_id in sorted(tables):
        report.tables += 1
        before = read_redis_facts(client, table_id)
        table = sources.table(table_id)
        # Only the rounds Redis holds (and the one whose batch wrote the balances shown):
        # older rounds are the incremental half's, read once.
        rounds = set(before.rounds()) if before is not None else set()
        rounds |= _balances_round(client, table_id)
        ledger = sources.ledger(table_id, tuple(sorted(rounds)) or (NO_ROUND,))
        after = read_redis_facts(client, table_id)
        still = before == after and (after is None or after.fully_settled)
        if not still:
            report.in_motion += 1
        # A phase may settle between the ledger read and the second Redis read: its batch is
        # then missing from the ledger read although Redis marks it settled. A mark is written
        # after its batch commits, so marks are judged by the first read (their batches are
        # in the ledger read); a record is written before its batch, so records by the second.
        facts = (
            after
            if after is None or before is None
            else RedisFacts(after.records, before.settled, after.trimmed_round)
        )
        report.differences.extend(
            compare(table_id, facts, table, ledger, expected, settled_still=still)
        )
        if still:
            report.differences.extend(_balance_differences(client, sources, table_id, ledger))
    return report


NO_ROUND = 0
"""The round asked for when Redis holds none of a table's (only its bowl and pot are needed):
round 0 holds at most a Hand table's first buy-in."""


def _balances_round(client: redis.Redis, table_id: str) -> set[int]:
    order = client.hget(keys.settled(table_id), BALANCES_ORDER_FIELD)
    return set() if order is None else {int(order) // ROUND_ORDER_STRIDE}


def _balance_differences(
    client: redis.Redis, sources: Sources, table_id: str, ledger: LedgerFacts
) -> list[Difference]:
    """The table's shown balances against the ledger's right after the batch that wrote them.

    Only a batch the ledger read holds is compared (one settled later is the next run's),
    and only the players it posted to: their balance after it is a ledger fact, whatever
    they did at other tables since.
    """
    shown = read_table_balances(client, table_id)
    if shown is None or not shown.batch_id:
        return []
    batch = next((b for b in ledger.batches if b.batch_id == shown.batch_id), None)
    if batch is None:
        return []
    posted = {
        account.removeprefix("player:")
        for p in batch.postings
        for account in (p.from_account, p.to_account)
        if account.startswith("player:")
    }
    players = sorted(posted & set(shown.balances))
    if not players:
        return []
    return compare_balances(table_id, shown, sources.balances_after(shown.batch_id, players))


def expected_postings(record: PhaseRecord) -> Sequence[Posting]:
    """What the rules say the phase's batch holds (the settlement's own computation)."""
    try:
        return compute_postings(record)
    except PermanentSettlementError:
        return ()


def run_drift_check(
    client: redis.Redis,
    sources: Sources,
    *,
    source: str,
    archive: ArchiveStore | None = None,
) -> tuple[DriftReport, int]:
    """One drift check: compare, record the run with the wallet, set the metrics, log.

    ``archive``: the round archive, for the new rounds' half (None: the process's,
    ``ARCHIVE_DATABASE_URL``). Its watermark moves only when the whole run found nothing.
    """
    # Imported here: the incremental half builds on this module's types.
    from workers import drift_archive

    started = time.time()
    try:
        config = worker_config()
        store = archive or archive_store(config.settings.archive_url)
        new_rounds = drift_archive.check_new_rounds(
            store, sources, now_ms=int(started * 1000), lag_ms=int(config.drift_lag_s * 1000)
        )
        report = check_drift(client, sources, expected_postings)
    except (redis.RedisError, grpc.RpcError, sa.exc.SQLAlchemyError, ArchiveNotMigrated) as exc:
        metrics.DRIFT_RUNS.labels(result="error").inc()
        log.error("wallet_drift_check_error", error=repr(exc)[:500])
        raise
    report.differences[:0] = new_rounds.differences
    report.new_rounds = new_rounds.to_dict()
    if report.ok:
        report.new_rounds["advanced"] = int(
            drift_archive.advance(store, new_rounds, now_ms=int(time.time() * 1000))
        )
    run_id = sources.record(report, source, started)
    for check, count in report.by_check().items():
        metrics.DRIFT_DIFFERENCES.labels(check=check).set(count)
    metrics.DRIFT_LAST_RUN.set(time.time())
    if report.ok:
        metrics.DRIFT_RUNS.labels(result="clean").inc()
        log.info("wallet_drift_clean", tables=report.tables, run_id=run_id)
    else:
        metrics.DRIFT_RUNS.labels(result="differences").inc()
        log.error(
            "wallet_drift_found",
            differences=len(report.differences),
            run_id=run_id,
            details=[d.to_dict() for d in report.differences[:20]],
        )
    return report, run_id


def format_report(report: DriftReport, run_id: int = 0) -> str:
    """A readable report for people."""
    lines = [f"tables {report.tables} (in motion, money not compared: {report.in_motion})"]
    if run_id:
        lines.append(f"recorded as run {run_id}")
    if report.ok:
        lines.append("OK: the live tables agree with the ledger")
        return "\n".join(lines)
    lines.append(f"FOUND {len(report.differences)} differences")
    for d in report.differences:
        lines.append(f"  [{d.check}] table {d.table_id}: {d.detail}")
        lines.append(f"      what to do: {d.action}")
    return "\n".join(lines)


@kishpa_task(DRIFT_TASK, **PERIODIC_CHECK)
def check_drift_task() -> dict[str, Any]:
    """Celery task ``kishpa.check_drift`` (beat, every ``KISHPA_DRIFT_INTERVAL``)."""
    sources = GrpcSources(worker_config().settings)
    try:
        report, run_id = run_drift_check(redis_client(), sources, source="beat")
    finally:
        sources.close()
    return {"differences": len(report.differences), "run_id": run_id}
