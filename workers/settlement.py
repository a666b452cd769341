"""The settlement task: turn one round phase's outbox record into one wallet batch.

``kishpa.settle_phase(table_id=..., round_no=..., phase=...)``:

1. read the phase record from the table's outbox (nothing to do if the phase is settled);
   wait (retry later) while an earlier phase of the table is still unsettled;
2. compute its postings with the game's rules engine;
3. open the players' wallets (idempotent) and apply the postings as ONE wallet batch under
   the idempotency key ``kishpa:<table_id>:<round>:<phase>``;
4. mark the phase settled, write the balances and publish ``settled``, in one Lua script.

Delivered twice, the task has one effect: the wallet replays the batch and the script finds
the phase settled. A permanent failure (no record, a record the rules reject, a batch the
wallet refuses) goes to the dead-letter list and is not retried; transient failures are
retried by the task decorator with backoff.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

import grpc
import redis

from games.hand.ledger import Posting as HandPosting
from games.kishpa.ledger import Posting
from games.kishpa.record import end_postings, start_postings
from services.common.errors import error_reason
from services.common.logging import get_logger
from shared.phase_record import BadPhaseRecord, PhaseRecord, PhaseRef
from shared.tasks import SETTLE_TASK
from workers import hand_postings, metrics
from workers.celery_app import TransientError, is_transient, kishpa_task
from workers.config import worker_config
from workers.deadletter import is_dead_lettered, push_dead_letter
from workers.outbox import mark_settled, read_phase, read_settlement, unsettled_earlier_phases
from workers.wallet_client import WalletClient, WalletPosting

log = get_logger(__name__)

TASK_NAME = SETTLE_TASK

PostingsOf = Callable[[dict[str, Any]], Sequence[Posting | HandPosting]]

# Which rules compute each phase's postings, per game. Each takes the round record (a JSON
# object) and returns postings between player ids and the table's own accounts; a new game
# adds its phases here.
PHASE_POSTINGS: Mapping[tuple[str, str], PostingsOf] = {
    ("kishpa", "start"): start_postings,
    ("kishpa", "end"): end_postings,
    ("hand", "buy_in"): hand_postings.buy_in_postings,
    ("hand", "payout"): hand_postings.payout_postings,
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


class EarlierPhaseUnsettled(TransientError):
    """An earlier phase of the table is not settled yet: settle this one after it."""


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


def compute_postings(record: PhaseRecord) -> list[WalletPosting]:
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
        WalletPosting(
            from_account=wallet_account(record.table_id, p.from_account),
            to_account=wallet_account(record.table_id, p.to_account),
            amount=int(p.amount),
            reason=str(p.reason),  # Kishpa's reasons are a StrEnum, Hand's plain text
            table_id=record.table_id,
            round_no=record.round_no,
            phase=record.phase,
        )
        for p in postings
    ]


def _apply(wallet: WalletClient, ref: PhaseRef, record: PhaseRecord) -> tuple[str, dict[str, int]]:
    """Apply the phase's batch; returns the batch id and each player's balance after it."""
    players = players_of(record)
    postings = compute_postings(record)
    try:
        wallet.open_wallets(players)
        if postings:
            result = wallet.apply_batch(idempotency_key(ref), postings)
            batch_id, after = result.batch_id, dict(result.balances)
        else:
            # Nothing moves (e.g. a round with no winner and no bonus): still publish balances.
            batch_id, after = "", {}
        balances = {}
        for player in players:
            account = wallet_account(ref.table_id, player)
            balances[player] = after[account] if account in after else wallet.balance(account)
    except grpc.RpcError as exc:
        if isinstance(exc, grpc.Call) and exc.code() in PERMANENT_GRPC_CODES:
            reason = error_reason(exc) or exc.code().name
            raise PermanentSettlementError(reason, str(exc.details())) from exc
        raise
    return batch_id, balances


def settle(
    client: redis.Redis, wallet: WalletClient, ref: PhaseRef, *, now_ms: Callable[[], int]
) -> Outcome:
    """Settle one round phase (see the module docstring); safe to run any number of times."""
    if read_settlement(client, ref) is not None:
        return Outcome("already_settled")
    if is_dead_lettered(client, ref):
        return Outcome("dead_letter", reason="already in the dead-letter list")
    try:
        record = read_phase(client, ref)
        if record is None:
            raise PermanentSettlementError("PHASE_RECORD_MISSING", "no outbox record")
        _require_earlier_phases_settled(client, ref)
        batch_id, balances = _apply(wallet, ref, record)
    except BadPhaseRecord as exc:
        return _dead_letter(
            client, ref, PermanentSettlementError("BAD_PHASE_RECORD", str(exc)), now_ms()
        )
    except PermanentSettlementError as exc:
        return _dead_letter(client, ref, exc, now_ms())
    settled_ms = now_ms()
    if not mark_settled(client, ref, batch_id=batch_id, balances=balances, settled_ms=settled_ms):
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


def _require_earlier_phases_settled(client: redis.Redis, ref: PhaseRef) -> None:
    # A dead-lettered phase waits for an operator; later phases go ahead without it.
    waiting = [p for p in unsettled_earlier_phases(client, ref) if not is_dead_lettered(client, p)]
    if waiting:
        first = waiting[0]
        raise EarlierPhaseUnsettled(
            f"{ref.table_id} round {ref.round_no} {ref.phase} waits for round "
            f"{first.round_no} {first.phase} to settle"
        )


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
    """The process's Redis client (a thread-safe connection pool)."""
    return redis.Redis.from_url(worker_config().redis_url, health_check_interval=30)


@cache
def wallet_client() -> WalletClient:
    """The process's wallet client (one channel, reconnecting by itself)."""
    return WalletClient.from_settings(worker_config().settings)


@kishpa_task(TASK_NAME)
def settle_phase(*, table_id: str, round_no: int, phase: str) -> dict[str, str]:
    """Celery task ``kishpa.settle_phase``: settle one round phase of one table."""
    ref = PhaseRef(table_id, round_no, phase)
    try:
        outcome = settle(redis_client(), wallet_client(), ref, now_ms=_now_ms)
    except Exception as exc:
        transient = is_transient(exc)
        metrics.SETTLEMENTS.labels(phase=phase, outcome="retry" if transient else "failed").inc()
        log.warning(
            "settlement_attempt_failed",
            table_id=table_id,
            round=round_no,
            phase=phase,
            transient=transient,
            error=str(exc),
        )
        raise
    metrics.SETTLEMENTS.labels(phase=phase, outcome=outcome.outcome).inc()
    return outcome.as_dict()
