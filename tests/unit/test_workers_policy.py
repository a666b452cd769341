"""The workers' pure parts: task policy, naming of keys and accounts, postings of a record."""

from __future__ import annotations

import json

import grpc
import pytest
import redis.exceptions

from devkit.phase_samples import phase_entry, poisoned_end_record, round_record, start_part
from games.kishpa.ledger import net_movements
from games.kishpa.record import end_postings, start_postings
from services.common.settings import Settings, SettingsError
from shared.phase_record import BadPhaseRecord, PhaseRef, parse_phase_record
from workers.celery_app import app, celery_settings, is_transient
from workers.config import WorkerConfig, config_from_settings
from workers.outbox import phase_order, table_id_of_outbox
from workers.settlement import (
    PermanentSettlementError,
    compute_postings,
    idempotency_key,
    wallet_account,
)

pytestmark = pytest.mark.unit

PLAYERS = ["ann", "ben", "cal", "dan"]


class _FakeCall(grpc.RpcError, grpc.Call):  # type: ignore[misc]
    """A gRPC error value with a status code (what a failed blocking call raises)."""

    def __init__(self, code: grpc.StatusCode) -> None:
        self._code = code

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return "test"


def test_settlement_acks_late_and_periodic_checks_ack_on_receipt() -> None:
    import workers.settlement
    import workers.sweeper

    assert workers.settlement.settle_phase.name == "kishpa.settle_phase"
    assert workers.sweeper.sweep_outboxes.name == "kishpa.sweep_outboxes"

    import workers.drift

    assert workers.drift.check_drift_task.name == "kishpa.check_drift"
    for name in ("kishpa.settle_phase", "kishpa.sweep_outboxes"):
        task = app.tasks[name]
        assert task.acks_late is True
        assert task.reject_on_worker_lost is True
    # The periodic checks may outlast the visibility timeout: late-acked, Redis would hand
    # a running check out again (tests/integration/test_workers_periodic_checks.py). Acked
    # on receipt, a check lost with its worker waits for the next beat.
    for name in ("kishpa.reconcile_wallet", "kishpa.check_drift"):
        assert app.tasks[name].acks_late is False
    names = (
        "kishpa.settle_phase",
        "kishpa.sweep_outboxes",
        "kishpa.reconcile_wallet",
        "kishpa.check_drift",
    )
    for name in names:
        task = app.tasks[name]
        # No countdown retries: a retry waiting in a worker is lost with it until the
        # broker's visibility timeout. Tasks retry inside their budget, or leave it to the
        # sweeper.
        assert task.max_retries == 0
        assert not getattr(task, "autoretry_for", ())


def test_a_task_gives_its_message_back_well_within_the_visibility_timeout() -> None:
    settings = Settings(service="worker", redis_url="redis://example:6379/3")
    config = WorkerConfig(settings=settings)
    assert config.visibility_timeout_s <= 15  # a lost message comes back in seconds
    assert config.task_budget_s <= config.visibility_timeout_s / 2
    assert config.settle_deadline_s <= 10
    assert config.sweep_interval_s <= config.settle_deadline_s
    options = celery_settings(config)["broker_transport_options"]
    assert options["unacked_restore_interval"] <= config.visibility_timeout_s / 2


def test_tasks_take_keyword_ids_only() -> None:
    from workers.settlement import settle_phase

    with pytest.raises(TypeError, match="keyword arguments only"):
        settle_phase.run("t-1", 1, "start")


def test_celery_settings_hold_one_message_per_worker_and_a_visibility_timeout() -> None:
    settings = Settings(service="worker", redis_url="redis://example:6379/3")
    config = WorkerConfig(settings=settings, queue="q1", visibility_timeout_s=7)
    conf = celery_settings(config)
    assert conf["worker_prefetch_multiplier"] == 1
    assert conf["task_acks_late"] is True
    assert conf["broker_url"] == "redis://example:6379/3"
    assert conf["broker_transport_options"]["visibility_timeout"] == 7
    assert conf["broker_transport_options"]["unacked_restore_interval"] <= 7
    assert conf["task_default_queue"] == "q1"
    assert set(conf["beat_schedule"]) == {"sweep-outboxes", "reconcile-wallet", "check-drift"}


def test_the_drift_check_travels_on_a_queue_of_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = Settings(service="worker", redis_url="redis://example:6379/3")
    conf = celery_settings(WorkerConfig(settings=settings, queue="q1"))
    # Sent by beat or by hand, it goes to q1.drift, which no settlement worker consumes.
    assert conf["task_routes"] == {"kishpa.check_drift": {"queue": "q1.drift"}}
    assert conf["beat_schedule"]["check-drift"]["options"]["queue"] == "q1.drift"
    assert "queue" not in conf["beat_schedule"]["sweep-outboxes"]["options"]
    monkeypatch.setenv("KISHPA_DRIFT_QUEUE", "checks")
    assert config_from_settings(settings).drift_queue == "checks"


def test_the_unsettled_index_is_rebuilt_every_minute_unless_configured(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings = Settings(service="worker", redis_url="redis://example:6379/3")
    monkeypatch.delenv("KISHPA_REINDEX_INTERVAL", raising=False)
    assert config_from_settings(settings).reindex_interval_s == 60
    monkeypatch.setenv("KISHPA_REINDEX_INTERVAL", "15")
    assert config_from_settings(settings).reindex_interval_s == 15
    monkeypatch.setenv("KISHPA_REINDEX_INTERVAL", "0")  # at least one second
    with pytest.raises(SettingsError, match="KISHPA_REINDEX_INTERVAL"):
        config_from_settings(settings)


def test_rabbitmq_broker_gets_no_redis_transport_options() -> None:
    settings = Settings(
        service="worker", redis_url="redis://r:6379/0", broker_url="amqp://guest@mq:5672//"
    )
    conf = celery_settings(
        WorkerConfig(settings=settings, reconcile_interval_s=0, drift_interval_s=0)
    )
    assert conf["broker_url"].startswith("amqp://")
    assert conf["result_backend"] == "redis://r:6379/0"
    assert "broker_transport_options" not in conf
    assert set(conf["beat_schedule"]) == {"sweep-outboxes"}


@pytest.mark.parametrize(
    ("exc", "transient"),
    [
        (_FakeCall(grpc.StatusCode.UNAVAILABLE), True),
        (_FakeCall(grpc.StatusCode.DEADLINE_EXCEEDED), True),
        (_FakeCall(grpc.StatusCode.ABORTED), True),
        (_FakeCall(grpc.StatusCode.INVALID_ARGUMENT), False),
        (_FakeCall(grpc.StatusCode.FAILED_PRECONDITION), False),
        (redis.exceptions.ConnectionError("down"), True),
        (redis.exceptions.TimeoutError("slow"), True),
        (redis.exceptions.ClusterDownError("The cluster is down"), True),
        (redis.exceptions.MasterDownError("Link with MASTER is down"), True),
        (redis.exceptions.TryAgainError("Multiple keys request during rehashing"), True),
        (redis.exceptions.SlotNotCoveredError('Slot "7" is not covered'), True),
        (redis.exceptions.ResponseError("WRONGTYPE"), False),
        (ValueError("bad"), False),
    ],
)
def test_transient_errors_are_told_apart(exc: BaseException, transient: bool) -> None:
    assert is_transient(exc) is transient


def test_keys_and_accounts_follow_the_contract() -> None:
    ref = PhaseRef("t-1", 3, "end")
    assert idempotency_key(ref) == "kishpa:t-1:3:end"
    assert wallet_account("t-1", "bowl") == "bowl:t-1"
    assert wallet_account("t-1", "ann") == "player:ann"
    assert table_id_of_outbox(b"kishpa:table:{t-1}:outbox") == "t-1"
    assert phase_order(3, "start") < phase_order(3, "end") < phase_order(4, "start")


def test_phase_record_round_trips_and_bad_ones_are_refused() -> None:
    entry = phase_entry("t-9", 2, "start", round_record(PLAYERS), 1234)
    parsed = parse_phase_record(entry)
    assert (parsed.table_id, parsed.round_no, parsed.phase, parsed.created_ms) == (
        "t-9",
        2,
        "start",
        1234,
    )
    assert "end_hands" not in parsed.record
    with pytest.raises(BadPhaseRecord):
        parse_phase_record("not json")
    with pytest.raises(BadPhaseRecord):
        parse_phase_record(json.dumps({"table_id": "t", "game": "kishpa"}))
    with pytest.raises(BadPhaseRecord):
        parse_phase_record(json.dumps([1, 2]))


def test_wallet_postings_are_the_rules_postings_mapped_to_accounts() -> None:
    record = round_record(PLAYERS, bowl=6)
    for phase, rules in (("start", start_postings), ("end", end_postings)):
        parsed = parse_phase_record(phase_entry("t-2", 5, phase, record, 1))
        wallet = compute_postings(parsed)
        expected = rules(parsed.record)
        assert len(wallet) == len(expected) > 0
        for w, r in zip(wallet, expected, strict=True):
            assert w.from_account == wallet_account("t-2", r.from_account)
            assert w.to_account == wallet_account("t-2", r.to_account)
            assert (w.amount, w.reason) == (r.amount, r.reason)
            assert (w.table_id, w.round, w.phase) == ("t-2", 5, phase)


def test_a_record_the_rules_reject_is_a_permanent_error() -> None:
    parsed = parse_phase_record(phase_entry("t-3", 1, "end", poisoned_end_record(PLAYERS), 1))
    with pytest.raises(PermanentSettlementError) as info:
        compute_postings(parsed)
    assert info.value.code == "INVALID_RECORD"


def test_an_unknown_game_is_a_permanent_error() -> None:
    entry = json.loads(phase_entry("t-4", 1, "start", round_record(PLAYERS), 1))
    entry["game"] = "chess"
    with pytest.raises(PermanentSettlementError) as info:
        compute_postings(parse_phase_record(json.dumps(entry)))
    assert info.value.code == "UNKNOWN_PHASE"


@pytest.mark.parametrize("players", [PLAYERS, PLAYERS[:3], PLAYERS[:2]])
def test_a_last_round_leaves_the_bowl_at_zero(players: list[str]) -> None:
    # Whatever was in the bowl before, plus this round's contributions, is paid out.
    for bowl, previous in ((0, None), (7, None), (13, players[1])):
        record = round_record(players, bowl=bowl, last_round=True, previous_winner=previous)
        start = start_postings(start_part(record))
        end = end_postings(record)
        assert bowl + net_movements(start).get("bowl", 0) + net_movements(end)["bowl"] == 0


def _hand_entry(phase: str, record: dict[str, object]) -> str:
    return json.dumps(
        {
            "table_id": "h-1",
            "game": "hand",
            "round": 0 if phase == "buy_in" else 7,
            "phase": phase,
            "record": record,
            "created_ms": 1,
        }
    )


def test_a_hand_game_buys_into_and_pays_out_of_the_tables_pot() -> None:
    players = ["ann", "ben", "cal"]
    buy_in = compute_postings(
        parse_phase_record(_hand_entry("buy_in", {"players": players, "stake": 10}))
    )
    assert [(p.from_account, p.to_account, p.amount) for p in buy_in] == [
        (f"player:{p}", "pot:h-1", 10) for p in players
    ]
    payout = compute_postings(
        parse_phase_record(
            _hand_entry(
                "payout",
                {"players": players, "stake": 10, "pot": 30, "totals": dict.fromkeys(players, 50)},
            )
        )
    )
    assert {p.from_account for p in payout} == {"pot:h-1"}
    assert sum(p.amount for p in payout) == 30
    assert phase_order(0, "buy_in") < phase_order(7, "payout")
