"""The settlement task: turn one round phase's outbox record into one wallet batch.

``kishpa.settle_phase(table_id=..., round_no=..., phase=...)``:

1. read the phase record from the table's outbox (nothing to do if the phase is settled);
   while an earlier phase of the table is unsettled, settle it first, here, earliest first
   (each one exactly as its own task would: same batch key, same settled mark), so a
   table's phases still settle in order; only when the catch-up time runs out, hand the
   table back: enqueue the earliest unsettled phase and stop (``waiting``);
2. compute its postings with the game's rules engine;
3. open the players' wallets (idempotent) and apply the postings as ONE wallet batch under
   the idempotency key ``kishpa:<table_id>:<round>:<phase>``;
4. archive the phase (and, at a round's ending phase, the round) in the round archive
   (:mod:`workers.archive_write`; idempotent, keyed by table and round), BEFORE step 5, so
   a settled phase is always an archived one;
5. mark the phase settled, write the balances and publish ``settled``, in one Lua script;
6. enqueue the table's next unsettled phase at once (one that waited on this one), or, when
   nothing of the table is left unsettled, take it out of the sweeper's unsettled index.

Delivered twice, the task has one effect: the wallet replays the batch and the script finds
the phase settled. A permanent failure (no record, a record the rules reject, a batch the
wallet refuses) goes to the dead-letter list and is not retried. A transient failure is
tried again inside the task, for at most its budget (half the broker's visibility timeout),
then left to the sweeper: the task never keeps its message longer, and never leaves a
countdown retry waiting unacknowledged in its worker.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

import grpc
import redis

from archive.migrate import ArchiveNotMigrated
from archive.store import ArchiveStore, is_transient_db_error
from games.ledger import Posting
from games.registry import GAMES
from services.common.errors import error_reason
from services.common.logging import get_logger
from services.common.redis_client import sync_client
from shared.phase_record import BadPhaseRecord, PhaseRecord, PhaseRef
from shared.retry import retrying_sync, task_backoff
from shared.tasks import SETTLE_TASK
from workers import metrics
from workers.archive_write import ArchiveRefused, archive_phase, archive_store
from workers.celery_app import TransientError, is_transient, kishpa_task
from workers.config import worker_config
from workers.deadletter import index_field, index_of, is_dead_lettered, push_dead_letter
from workers.enqueue import enqueue_settlement
from workers.outbox import (
    checked_record,
    claim_enqueue,
    later_unsettled,
    mark_settled,
    phase_fields,
    phase_state,
    unindex_settled_table,
    unsettled_earlier_phases,
    unsettled_fields,
)
from workers.wallet_client import WalletClient

log = get_logger(__name__)

TASK_NAME = SETTLE_TASK

PostingsOf = Callable[[dict[str, Any]], Sequence[Posting]]

# Which rules compute each phase's postings, per game (``games.registry``: each game's spec
# names its phases). Each takes the round record (a JSON object) and returns postings
# between player ids and the table's own accounts.
PHASE_POSTINGS: Mapping[tuple[str, str], PostingsOf] = {
    (g.name, phase): postings for g in GAMES for phase, postings in g.postings.items()
}
# Accounts of a table in the rules' postings, and the wallet account each becomes.
TABLE_ACCOUNTS: Mapping[str, str] = {"bowl": "bowl", "pot": "pot"}

# Wallet refusals that settling the same batch again cannot change.
PERMANENT_GRPC_CODES = frozenset(
    {
        grpc.StatusCode.INVALID_ARGUMENT,
        grpc.StatusCode.FAILED_PRECONDITION,
        grpc.StatusCode.ALREADY_EXISTS,
        grpc.StatusCode.NOT_FOUND,
        grpc.StatusCode.OUT_OF_RANGE,
    }
)


CATCH_UP_SHARE = 0.5
"""The share of a task's budget in which it may start settling earlier phases of its table
(the rest is for its own phase and transient retries)."""


class PermanentSettlementError(Exception):
    """Settling this phase cannot succeed however often it is tried."""

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(f"{code}: {detail}")
        self.code = code


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one run of the task did (also the task's JSON result)."""

    outcome: str
    batch_id: str = ""
    reason: str = ""

    def as_dict(self) -> dict[str, str]:
        return {"outcome": self.outcome, "batch_id": self.batch_id, "reason": self.reason}


def idempotency_key(ref: PhaseRef) -> str:
    """The wallet idempotency key of a round phase: ``kishpa:<table_id>:<round>:<phase>``."""
    return f"kishpa:{ref.table_id}:{ref.round_no}:{ref.phase}"


def wallet_account(table_id: str, account: str) -> str:
    """The wallet account of a rules account: ``bowl`` -> ``bowl:<table>``, p -> ``player:p``."""
    table_account = TABLE_ACCOUNTS.get(account)
    if table_account is not None:
        return f"{table_account}:{table_id}"
    return f"player:{account}"


def _postings_function(game: str, phase: str) -> PostingsOf:
    function = PHASE_POSTINGS.get((game, phase))
    if function is None:
        raise PermanentSettlementError("UNKNOWN_PHASE", f"no settlement for {game} {phase}")
    return function


def players_of(record: PhaseRecord) -> list[str]:
    """The seated players named by the round record, in seat order."""
    players = record.record.get("players")
    if not isinstance(players, list) or not players or not all(isinstance(p, str) for p in players):
        raise PermanentSettlementError("BAD_PHASE_RECORD", "record.players is not a list of ids")
    return players


def compute_postings(record: PhaseRecord) -> list[Posting]:
    """The wallet postings of a phase, computed by the game's rules engine.

    The rules are pure, so any exception they raise is permanent: the same record would be
    refused again (InvalidRecordError for a record the rules reject, ValueError/KeyError for
    a malformed one).
    """
    function = _postings_function(record.game, record.phase)
    try:
        postings = function(record.record)
    except Exception as exc:
        reason = str(getattr(exc, "reason", "INVALID_RECORD"))
        raise PermanentSettlementError(reason, f"{type(exc).__name__}: {exc}") from exc
    return [
        Posting(
            from_account=wallet_account(record.table_id, p.from_account),
            to_account=wallet_account(record.table_id, p.to_account),
            amount=int(p.amount),
            reason=str(p.reason),
            table_id=record.table_id,
            round=record.round_no,
            phase=record.phase,
        )
        for p in postings
    ]


Payments = list[dict[str, Any]]
"""The postings a batch applied as ``{from, to, amount, reason}`` (the ``settled`` event's)."""


def _apply(
    wallet: WalletClient, ref: PhaseRef, record: PhaseRecord
) -> tuple[str, dict[str, int], Payments]:
    """Apply the phase's batch; returns the batch id, each player's balance after it and
    the postings applied (bank loads included)."""
    players = players_of(record)
    postings = compute_postings(record)
    try:
        wallet.open_wallets(players)
        if postings:
            result = wallet.apply_batch(idempotency_key(ref), postings)
            batch_id, after = result.batch_id, dict(result.balances)
            payments = [
                {"from": p.from_account, "to": p.to_account, "amount": p.amount, "reason": p.reason}
                for p in result.applied
            ]
        else:
            # Nothing moves (e.g. a round with no winner and no bonus): still publish balances.
            batch_id, after, payments = "", {}, []
        balances = {}
        for player in players:
            account = wallet_account(ref.table_id, player)
            balances[player] = after[account] if account in after else wallet.balance(account)
    except grpc.RpcError as exc:
        if isinstance(exc, grpc.Call) and exc.code() in PERMANENT_GRPC_CODES:
            reason = error_reason(exc) or exc.code().name
            raise PermanentSettlementError(reason, str(exc.details())) from exc
        raise
    return batch_id, balances, payments


def settle(
    client: redis.Redis,
    wallet: WalletClient,
    ref: PhaseRef,
    *,
    now_ms: Callable[[], int],
    catch_up_until: float | None = None,
    archive: ArchiveStore | None = None,
) -> Outcome:
    """Settle one round phase (see the module docstring); safe to run any number of times.

    ``archive`` is the round archive (None: the process's, ``ARCHIVE_DATABASE_URL``).

    While an earlier phase of the table is unsettled (and not dead-lettered) it settles that
    phase first, earliest first, starting no new one after the monotonic time
    ``catch_up_until`` (None: none at all); a phase still blocking then makes it answer
    ``waiting`` naming that phase, its own phase unchanged.
    """
    # One round trip answers all four: settled? dead-lettered? the record, and the table's
    # earlier unsettled phases.
    state = phase_state(client, ref, dead_letter_index=index_of(ref), field=index_field(ref))
    if state.settled:
        return Outcome("already_settled")
    if state.dead_lettered:
        return Outcome("dead_letter", reason="already in the dead-letter list")
    try:
        if state.raw_record is None:
            raise PermanentSettlementError("PHASE_RECORD_MISSING", "no outbox record")
        record = checked_record(ref, state.raw_record)
        live = [p for p in state.earlier_unsettled if not is_dead_lettered(client, p)]
        if live:
            blocking = _catch_up(
                client, wallet, ref, now_ms=now_ms, until=catch_up_until, archive=archive
            )
            if blocking is not None:
                return Outcome("waiting", reason=f"{blocking.round_no}:{blocking.phase}")
        batch_id, balances, payments = _apply(wallet, ref, record)
        # The archive first, then the settled mark (the cross-stream contract: a settled
        # round is an archived one; Redis may forget it once settled).
        _archive(client, archive, record, batch_id, payments)
    except BadPhaseRecord as exc:
        return _dead_letter(
            client, ref, PermanentSettlementError("BAD_PHASE_RECORD", str(exc)), now_ms()
        )
    except PermanentSettlementError as exc:
        return _dead_letter(client, ref, exc, now_ms())
    settled_ms = now_ms()
    if not mark_settled(
        client,
        ref,
        batch_id=batch_id,
        balances=balances,
        settled_ms=settled_ms,
        postings=payments,
    ):
        return Outcome("already_settled", batch_id=batch_id)
    metrics.SETTLEMENT_LATENCY.observe(max(0, settled_ms - record.created_ms) / 1000)
    log.info(
        "phase_settled",
        table_id=ref.table_id,
        round=ref.round_no,
        phase=ref.phase,
        batch_id=batch_id,
        latency_ms=settled_ms - record.created_ms,
    )
    return Outcome("settled", batch_id=batch_id)


def _archive(
    client: redis.Redis,
    archive: ArchiveStore | None,
    record: PhaseRecord,
    batch_id: str,
    payments: Payments,
) -> None:
    """Write the phase (and the round it ends) to the round archive, idempotently."""
    try:
        store = archive or archive_store(worker_config().settings.archive_url)
        archive_phase(client, store, record, batch_id=batch_id, postings=payments)
    except ArchiveRefused as exc:
        raise PermanentSettlementError("ARCHIVE_CONFLICT", str(exc)) from exc
    except ArchiveNotMigrated as exc:
        log.error("round_archive_not_migrated", error=str(exc))
        raise TransientError(str(exc)) from exc
    except Exception as exc:
        if is_transient_db_error(exc):
            raise TransientError(f"round archive unavailable: {exc}") from exc
        raise


def earliest_blocking_phase(client: redis.Redis, ref: PhaseRef) -> PhaseRef | None:
    """The earliest phase of the table before ``ref`` that is unsettled and not dead-lettered.

    A dead-lettered phase waits for an operator; later phases go ahead without it.
    """
    for earlier in unsettled_earlier_phases(client, ref):
        if not is_dead_lettered(client, earlier):
            return earlier
    return None


def _catch_up(
    client: redis.Redis,
    wallet: WalletClient,
    ref: PhaseRef,
    *,
    now_ms: Callable[[], int],
    until: float | None,
    archive: ArchiveStore | None = None,
) -> PhaseRef | None:
    """Settle the unsettled phases of the table before ``ref``, earliest first; returns the
    one still blocking ``ref`` when time ran out (or it could not be settled here), else None.

    Waiting for the earlier phase's own task instead stalls a table behind it: after an
    outage its message may sit behind every later phase of the table, each waiting for it.
    Settling it here is what its own task would do (the same wallet batch key, the same
    atomic settled mark), so it stays exactly once even when both run at the same moment.
    """
    tried: PhaseRef | None = None
    while True:
        blocking = earliest_blocking_phase(client, ref)
        if blocking is None:
            return None
        if until is None or blocking == tried or time.monotonic() >= until:
            return blocking
        tried = blocking
        # The earliest live phase: nothing before it to catch up, so no recursion.
        outcome = settle(client, wallet, blocking, now_ms=now_ms, archive=archive)
        metrics.SETTLEMENTS.labels(phase=blocking.phase, outcome=outcome.outcome).inc()
        log.info(
            "earlier_phase_settled_first",
            **_ids(ref),
            earlier=f"{blocking.round_no}:{blocking.phase}",
            outcome=outcome.outcome,
        )
        if outcome.outcome == "waiting":
            return blocking


def _dead_letter(
    client: redis.Redis, ref: PhaseRef, exc: PermanentSettlementError, time_ms: int
) -> Outcome:
    reason = str(exc)
    if push_dead_letter(client, ref, reason=reason, time_ms=time_ms):
        metrics.DEAD_LETTERS.labels(reason=exc.code).inc()
        log.error(
            "settlement_dead_lettered",
            table_id=ref.table_id,
            round=ref.round_no,
            phase=ref.phase,
            reason=reason,
        )
    return Outcome("dead_letter", reason=reason)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


@cache
def redis_client() -> redis.Redis:
    """The process's Redis client (a thread-safe connection pool; a cluster client for a
    ``redis+cluster://`` URL, see :mod:`services.common.redis_client`)."""
    # Socket timeouts keep a hung Redis from holding a task past its budget.
    budget = worker_config().task_budget_s
    client: redis.Redis = sync_client(
        worker_config().redis_url,
        health_check_interval=30,
        socket_timeout=budget,
        socket_connect_timeout=min(2.0, budget),
    )
    return client


@cache
def wallet_client() -> WalletClient:
    """The process's wallet client (one channel, reconnecting by itself)."""
    config = worker_config()
    return WalletClient.from_settings(config.settings, timeout_s=config.task_budget_s)


def settle_within_budget(
    client: redis.Redis,
    wallet: WalletClient,
    ref: PhaseRef,
    *,
    budget_s: float,
    now_ms: Callable[[], int] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    archive: ArchiveStore | None = None,
) -> Outcome:
    """:func:`settle`, trying again after transient failures for at most ``budget_s``.

    Returns ``retry_later`` when the budget ran out (the sweeper enqueues the phase again
    after its deadline) and ``failed`` for a non-transient gRPC error (e.g. a wrong service
    secret). Anything else that raises is a bug and propagates.
    """
    catch_up_until = time.monotonic() + budget_s * CATCH_UP_SHARE
    clock = now_ms or _now_ms
    retries = 0

    def note_retry(_tried: int, exc: BaseException, _pause: float) -> None:
        nonlocal retries
        retries += 1
        metrics.SETTLEMENTS.labels(phase=ref.phase, outcome="retry").inc()
        log.info("settlement_retrying", **_ids(ref), transient=True, error=str(exc))

    try:
        return retrying_sync(
            lambda: settle(
                client, wallet, ref, now_ms=clock, catch_up_until=catch_up_until, archive=archive
            ),
            task_backoff(budget_s),
            retry_on=is_transient,
            on_retry=note_retry,
            sleep=sleep,
        )
    except Exception as exc:
        if not is_transient(exc):
            if isinstance(exc, grpc.RpcError):
                log.error("settlement_failed", **_ids(ref), transient=False, error=str(exc))
                return Outcome("failed", reason=str(exc))
            raise
        metrics.SETTLEMENTS.labels(phase=ref.phase, outcome="retry").inc()
        log.warning(
            "settlement_handed_to_sweeper",
            **_ids(ref),
            transient=True,
            attempts=retries + 1,
            error=str(exc),
        )
        return Outcome("retry_later", reason=str(exc))


def _ids(ref: PhaseRef) -> dict[str, object]:
    return {"table_id": ref.table_id, "round": ref.round_no, "phase": ref.phase}


def follow_up(
    client: redis.Redis,
    ref: PhaseRef,
    outcome: Outcome,
    *,
    enqueue: Callable[..., None] = enqueue_settlement,
    hand_back: Callable[[PhaseRef], bool] | None = None,
) -> list[PhaseRef]:
    """What a finished task enqueues next; returns the phases it enqueued.

    - settled or dead-lettered: the table's next unsettled phase, at once (it may have been
      waiting on this one, or its own message may have been lost);
    - waiting: the earliest unsettled phase blocking it, unless the sweeper or another
      waiting task enqueued it within the deadline (``hand_back`` takes that marker).

    A settled phase (also one found settled already) that leaves nothing of its table
    unsettled takes the table out of the sweeper's unsettled index.
    """
    targets: Iterable[PhaseRef] = ()
    fields: tuple[list[Any], list[Any]] | None = None
    if outcome.outcome in ("settled", "dead_letter", "already_settled"):
        fields = phase_fields(client, ref.table_id)
    if fields is not None and outcome.outcome != "already_settled":
        later = later_unsettled(ref, *fields)
        targets = [p for p in later if not is_dead_lettered(client, p)][:1]
    elif outcome.outcome == "waiting":
        blocking = earliest_blocking_phase(client, ref)
        if blocking is not None and (hand_back is None or hand_back(blocking)):
            targets = [blocking]
    sent = []
    for target in targets:
        enqueue(table_id=target.table_id, round_no=target.round_no, phase=target.phase)
        sent.append(target)
    if fields is not None and not unsettled_fields(*fields):
        unindex_settled_table(client, ref.table_id)
    return sent


@kishpa_task(TASK_NAME)
def settle_phase(*, table_id: str, round_no: int, phase: str) -> dict[str, str]:
    """Celery task ``kishpa.settle_phase``: settle one round phase of one table."""
    ref = PhaseRef(table_id, round_no, phase)
    config = worker_config()
    client = redis_client()
    try:
        outcome = settle_within_budget(client, wallet_client(), ref, budget_s=config.task_budget_s)
    except Exception:
        metrics.SETTLEMENTS.labels(phase=phase, outcome="failed").inc()
        raise
    metrics.SETTLEMENTS.labels(phase=phase, outcome=outcome.outcome).inc()
    if outcome.outcome == "waiting":
        # Not an error: an earlier phase of the table is not settled yet. The task stops
        # (its message is acknowledged); that phase is enqueued, and settling it enqueues
        # this one again.
        log.info("phase_waits_for_earlier_phase", **_ids(ref), earlier=outcome.reason)
    try:
        follow_up(
            client,
            ref,
            outcome,
            hand_back=lambda blocking: claim_enqueue(
                client, blocking, now_ms=_now_ms(), deadline_s=config.settle_deadline_s
            ),
        )
    except Exception as exc:  # the sweeper finds the next phase anyway
        log.warning("settlement_follow_up_failed", **_ids(ref), error=str(exc))
    return outcome.as_dict()
