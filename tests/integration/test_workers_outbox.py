"""The workers' Redis side against the machine's real Redis: the settle script, dead letters,
the unsettled index and the sweeper reading it. Unique table ids isolate each test; nothing
else is touched."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis
from redis.cluster import RedisCluster

from devkit.phase_samples import phase_entry, round_record
from services.common.redis_client import sync_client
from shared import keys, stream
from shared.phase_record import PhaseRef
from tests.child_env import TEST_LIMITS_PREFIX
from workers.deadletter import (
    is_dead_lettered,
    list_dead_letters,
    push_dead_letter,
    release_dead_letter,
)
from workers.outbox import (
    index_unsettled,
    indexed_tables,
    mark_settled,
    read_settlement,
    unindex_settled_table,
    unsettled_earlier_phases,
    unsettled_phases,
)
from workers.settlement import Outcome, follow_up
from workers.sweeper import (
    REBUILT_MARKER,
    enqueued_marker,
    rebuild_if_due,
    stalled_marker,
    sweep,
    sweep_report,
)

pytestmark = pytest.mark.integration

WORKERS_REDIS_URL = os.environ.get("TEST_WORKERS_REDIS_URL", "redis://127.0.0.1:6379/13")
# Celery's Redis broker does not speak Cluster: under ``--redis-cluster`` it stays on a node.
BROKER_URL = os.environ.get("TEST_BROKER_URL") or WORKERS_REDIS_URL


@pytest.fixture
def client() -> Iterator[redis.Redis]:
    connection = sync_client(WORKERS_REDIS_URL)
    yield connection
    connection.close()


@pytest.fixture
def table_id(client: redis.Redis) -> Iterator[str]:
    table = f"gtest-{uuid.uuid4().hex[:12]}"
    yield table
    for key in (keys.outbox, keys.settled, keys.balances, keys.events, keys.state):
        client.delete(key(table))
    client.zrem(keys.unsettled(table), table)
    for round_no in range(5):
        for phase in ("start", "end"):
            ref = PhaseRef(table, round_no, phase)
            release_dead_letter(client, ref)
            client.delete(enqueued_marker(ref))


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _write_phase(
    client: redis.Redis,
    table_id: str,
    round_no: int,
    phase: str,
    created_ms: int,
    *,
    indexed: bool = True,
) -> PhaseRef:
    """A phase record in the table's outbox and, unless ``indexed`` is false (its index write
    lost), the table in the unsettled index: what the table service's commit writes."""
    entry = phase_entry(table_id, round_no, phase, round_record(["ann", "ben"]), created_ms)
    client.hset(keys.outbox(table_id), keys.phase_field(round_no, phase), entry)
    if indexed:
        index_unsettled(client, table_id, created_ms)
    return PhaseRef(table_id, round_no, phase)


def _scans(client: redis.Redis) -> int:
    """SCAN calls the server(s) answered so far (every master of a cluster)."""
    if isinstance(client, RedisCluster):
        stats = client.info("commandstats", target_nodes=RedisCluster.PRIMARIES).values()
    else:
        stats = [client.info("commandstats")]
    return sum(int(node.get("cmdstat_scan", {}).get("calls", 0)) for node in stats)


def _indexed(client: redis.Redis, table_id: str) -> float | None:
    score: float | None = client.zscore(keys.unsettled(table_id), table_id)
    return score


def test_settling_twice_writes_and_publishes_once(client: redis.Redis, table_id: str) -> None:
    ref = PhaseRef(table_id, 1, "start")
    balances = {"ann": 1998, "ben": 2001}
    assert mark_settled(client, ref, batch_id="17", balances=balances, settled_ms=5)
    assert not mark_settled(client, ref, batch_id="17", balances=balances, settled_ms=6)

    assert read_settlement(client, ref) == {"batch_id": "17", "balances": balances, "settled_ms": 5}
    assert client.hgetall(keys.balances(table_id)) == {b"ann": b"1998", b"ben": b"2001"}
    entries = client.xrange(keys.events(table_id))
    assert len(entries) == 1
    event = stream.decode(entries[0][1])
    assert (event.type, event.round, event.seat, event.private_seat) == ("settled", 1, -1, None)
    assert event.data["balances"] == balances
    assert event.data["phase"] == "start"


def test_a_late_old_phase_does_not_overwrite_newer_balances(
    client: redis.Redis, table_id: str
) -> None:
    newer, older = PhaseRef(table_id, 2, "start"), PhaseRef(table_id, 1, "end")
    assert mark_settled(client, newer, batch_id="9", balances={"ann": 10}, settled_ms=1)
    assert mark_settled(client, older, batch_id="8", balances={"ann": 99}, settled_ms=2)
    assert client.hget(keys.balances(table_id), "ann") == b"10"
    # Both phases are settled and both events published, in the order they settled.
    assert read_settlement(client, older) is not None
    assert len(client.xrange(keys.events(table_id))) == 2


def test_a_dead_letter_is_listed_once_and_can_be_released(
    client: redis.Redis, table_id: str
) -> None:
    ref = PhaseRef(table_id, 3, "end")
    assert push_dead_letter(client, ref, reason="INVALID_RECORD: no", time_ms=42)
    assert not push_dead_letter(client, ref, reason="INVALID_RECORD: no", time_ms=43)
    mine = [d for d in list_dead_letters(client, limit=1000) if d.table_id == table_id]
    assert [(d.round_no, d.phase, d.reason, d.time_ms) for d in mine] == [
        (3, "end", "INVALID_RECORD: no", 42)
    ]
    assert is_dead_lettered(client, ref)
    assert release_dead_letter(client, ref)
    assert not is_dead_lettered(client, ref)
    assert not [d for d in list_dead_letters(client, limit=1000) if d.table_id == table_id]


def test_sweep_enqueues_only_old_unsettled_live_phases_once_per_deadline(
    client: redis.Redis, table_id: str
) -> None:
    now = _now_ms()
    _write_phase(client, table_id, 1, "start", now - 60_000)
    _write_phase(client, table_id, 1, "end", now - 60_000)
    _write_phase(client, table_id, 2, "start", now - 60_000)
    _write_phase(client, table_id, 2, "end", now - 100)  # young
    mark_settled(client, PhaseRef(table_id, 1, "start"), batch_id="1", balances={}, settled_ms=1)
    push_dead_letter(client, PhaseRef(table_id, 2, "start"), reason="test", time_ms=1)

    found = {r for r in unsettled_phases(client, created_before_ms=now - 5000)}
    assert {r for r in found if r.table_id == table_id} == {
        PhaseRef(table_id, 1, "end"),
        PhaseRef(table_id, 2, "start"),
    }

    sent: list[dict[str, object]] = []

    def enqueue(**kwargs: object) -> None:
        sent.append(kwargs)

    sweep(client, deadline_s=5, now_ms=now, enqueue=enqueue)
    mine = [s for s in sent if s["table_id"] == table_id]
    # The dead letter is left alone; the settled and the young phase are not due.
    assert mine == [{"table_id": table_id, "round_no": 1, "phase": "end"}]
    sent.clear()
    sweep(client, deadline_s=5, now_ms=now + 10, enqueue=enqueue)
    assert not [s for s in sent if s["table_id"] == table_id]  # enqueued once per deadline


def test_sweep_sends_an_unreadable_record_to_a_task_which_dead_letters_it(
    client: redis.Redis, table_id: str
) -> None:
    client.hset(keys.outbox(table_id), "4:end", json.dumps({"garbage": True}))
    client.delete(REBUILT_MARKER)
    assert rebuild_if_due(client, now_ms=_now_ms(), interval_s=60) is not None
    assert _indexed(client, table_id) == 0  # no time to read: due at once
    found = [r for r in unsettled_phases(client, created_before_ms=0) if r.table_id == table_id]
    assert found == [PhaseRef(table_id, 4, "end")]


def test_earlier_unsettled_phases_of_the_table_are_found_in_order(
    client: redis.Redis, table_id: str
) -> None:
    record = round_record(["ann", "ben"])
    for round_no in (1, 2, 3):
        for phase in ("start", "end"):
            entry = phase_entry(table_id, round_no, phase, record, 1)
            client.hset(keys.outbox(table_id), keys.phase_field(round_no, phase), entry)
    mark_settled(client, PhaseRef(table_id, 1, "start"), batch_id="1", balances={}, settled_ms=1)
    mark_settled(client, PhaseRef(table_id, 2, "start"), batch_id="2", balances={}, settled_ms=1)

    assert unsettled_earlier_phases(client, PhaseRef(table_id, 3, "start")) == [
        PhaseRef(table_id, 1, "end"),
        PhaseRef(table_id, 2, "end"),
    ]
    assert unsettled_earlier_phases(client, PhaseRef(table_id, 1, "end")) == []
    assert unsettled_earlier_phases(client, PhaseRef(table_id, 2, "end")) == [
        PhaseRef(table_id, 1, "end")
    ]


def _kishpa(*args: str, **extra_env: str) -> subprocess.CompletedProcess[str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("KISHPA_") or k.startswith(TEST_LIMITS_PREFIX)
    }
    env["REDIS_URL"] = WORKERS_REDIS_URL
    env["KISHPA_BROKER_URL"] = BROKER_URL
    env.update(extra_env)
    kishpa = str(Path(sys.executable).with_name("kishpa"))
    return subprocess.run(
        [kishpa, *args], env=env, capture_output=True, text=True, timeout=60, check=False
    )


def test_operators_list_and_release_dead_letters_from_the_command_line(
    client: redis.Redis, table_id: str
) -> None:
    push_dead_letter(client, PhaseRef(table_id, 2, "end"), reason="INVALID_RECORD: x", time_ms=7)
    listed = _kishpa("worker", "deadletters", "--json", "--limit", "100000")
    assert listed.returncode == 0, listed.stderr
    mine = [json.loads(line) for line in listed.stdout.splitlines() if table_id in line]
    assert mine == [
        {
            "table_id": table_id,
            "round": 2,
            "phase": "end",
            "reason": "INVALID_RECORD: x",
            "time_ms": 7,
        }
    ]
    released = _kishpa("worker", "release", table_id, "2", "end")
    assert released.returncode == 0, released.stderr
    assert not is_dead_lettered(client, PhaseRef(table_id, 2, "end"))
    assert _kishpa("worker", "release", table_id, "2", "end").returncode == 1


def test_a_closed_tables_settlement_keys_expire_with_it_once_all_is_settled(
    client: redis.Redis, table_id: str
) -> None:
    record = round_record(["ann", "ben"])
    for phase in ("start", "end"):
        entry = phase_entry(table_id, 1, phase, record, 1)
        client.hset(keys.outbox(table_id), keys.phase_field(1, phase), entry)
    client.hset(keys.state(table_id), "version", 9)
    settlement_keys = (keys.outbox(table_id), keys.settled(table_id), keys.balances(table_id))

    mark_settled(
        client, PhaseRef(table_id, 1, "start"), batch_id="1", balances={"ann": 1}, settled_ms=1
    )
    assert [client.ttl(k) for k in settlement_keys] == [-1, -1, -1]  # the table is still open

    client.expire(keys.state(table_id), 500)  # the table closed
    mark_settled(
        client, PhaseRef(table_id, 1, "end"), batch_id="2", balances={"ann": 2}, settled_ms=2
    )
    assert all(400 < client.ttl(k) <= 500 for k in settlement_keys)


def test_an_unsettled_phase_keeps_a_closed_tables_outbox(
    client: redis.Redis, table_id: str
) -> None:
    record = round_record(["ann", "ben"])
    for phase in ("start", "end"):
        entry = phase_entry(table_id, 1, phase, record, 1)
        client.hset(keys.outbox(table_id), keys.phase_field(1, phase), entry)
    client.hset(keys.state(table_id), "version", 9)
    client.expire(keys.state(table_id), 500)
    mark_settled(
        client, PhaseRef(table_id, 1, "end"), batch_id="2", balances={"ann": 2}, settled_ms=2
    )
    assert client.ttl(keys.outbox(table_id)) == -1


def test_an_operator_sweep_enqueues_the_unsettled_phases_now(
    client: redis.Redis, table_id: str
) -> None:
    queue = f"gtest-{uuid.uuid4().hex[:10]}"
    # Never indexed: an operator's sweep rebuilds the index from the outboxes first.
    _write_phase(client, table_id, 1, "start", _now_ms() - 60_000, indexed=False)
    try:
        swept = _kishpa("worker", "sweep", KISHPA_WORKER_QUEUE=queue, KISHPA_SETTLE_DEADLINE="10")
        assert swept.returncode == 0, swept.stderr
        mine = [json.loads(line) for line in swept.stdout.splitlines() if table_id in line]
        assert mine == [{"table_id": table_id, "round": 1, "phase": "start"}]
        broker = sync_client(BROKER_URL)
        queued = [json.loads(m) for m in broker.lrange(queue, 0, -1)]
        assert any(
            m["headers"]["task"] == "kishpa.settle_phase" and table_id in m["headers"]["kwargsrepr"]
            for m in queued
        )
    finally:
        broker = sync_client(BROKER_URL)
        broker.delete(queue, f"_kombu.binding.{queue}", f"_kombu.binding_permanent.{queue}")


def test_sweep_enqueues_only_each_tables_earliest_unsettled_phase_oldest_table_first(
    client: redis.Redis, table_id: str
) -> None:
    other = f"{table_id}-b"
    now = _now_ms()
    try:
        # This table: round 1 end and round 2 start both overdue; only 1:end is enqueued
        # (settling it enqueues 2:start at once).
        _write_phase(client, table_id, 1, "end", now - 9_000)
        _write_phase(client, table_id, 2, "start", now - 8_000)
        # Another table, overdue for longer: swept first.
        _write_phase(client, other, 3, "start", now - 70_000)
        sent: list[dict[str, object]] = []

        def enqueue(**kwargs: object) -> None:
            sent.append(kwargs)

        report = sweep_report(client, deadline_s=5, now_ms=now, stall_after_s=60, enqueue=enqueue)
        mine = [s for s in sent if str(s["table_id"]).startswith(table_id)]
        assert mine == [
            {"table_id": other, "round_no": 3, "phase": "start"},
            {"table_id": table_id, "round_no": 1, "phase": "end"},
        ]
        assert report.oldest_age_s >= 70
        assert other in report.stalled
        assert table_id not in report.stalled
        assert report.unsettled >= 3
    finally:
        for key in (keys.outbox(other), enqueued_marker(PhaseRef(other, 3, "start"))):
            client.delete(key)
        client.delete(stalled_marker(other))
        client.zrem(keys.unsettled(other), other)


def test_a_settled_phase_enqueues_the_tables_next_unsettled_phase_and_a_waiting_one_its_blocker(
    client: redis.Redis, table_id: str
) -> None:
    record = round_record(["ann", "ben"])
    for round_no, phase in ((1, "start"), (1, "end"), (2, "start")):
        entry = phase_entry(table_id, round_no, phase, record, _now_ms())
        client.hset(keys.outbox(table_id), keys.phase_field(round_no, phase), entry)
    first = PhaseRef(table_id, 1, "start")
    sent: list[dict[str, object]] = []

    def enqueue(**kwargs: object) -> None:
        sent.append(kwargs)

    # Round 2's start waits for round 1: handed back, it enqueues the earliest blocker once.
    claims: list[PhaseRef] = []

    def claim(ref: PhaseRef) -> bool:
        claims.append(ref)
        return True

    waiting = Outcome("waiting", reason="1:start")
    follow_up(client, PhaseRef(table_id, 2, "start"), waiting, enqueue=enqueue, hand_back=claim)
    assert sent == [{"table_id": table_id, "round_no": 1, "phase": "start"}]
    assert claims == [first]
    sent.clear()
    follow_up(
        client, PhaseRef(table_id, 2, "start"), waiting, enqueue=enqueue, hand_back=lambda r: False
    )
    assert sent == []  # someone enqueued it within the deadline

    mark_settled(client, first, batch_id="1", balances={}, settled_ms=1)
    follow_up(client, first, Outcome("settled"), enqueue=enqueue)
    assert sent == [{"table_id": table_id, "round_no": 1, "phase": "end"}]
    sent.clear()
    follow_up(client, first, Outcome("already_settled"), enqueue=enqueue)
    assert sent == []  # a duplicate delivery does not chain again


def _collect(sent: list[dict[str, object]]) -> Callable[..., None]:
    def enqueue(**kwargs: object) -> None:
        sent.append(kwargs)

    return enqueue


def test_the_sweeper_finds_a_table_through_the_unsettled_index_without_a_scan(
    client: redis.Redis, table_id: str
) -> None:
    lost = f"{table_id}-lost"
    now = _now_ms()
    try:
        _write_phase(client, table_id, 1, "start", now - 60_000)
        _write_phase(client, lost, 1, "start", now - 60_000, indexed=False)
        assert (table_id, now - 60_000) in indexed_tables(client)
        sent: list[dict[str, object]] = []
        scans = _scans(client)
        sweep_report(client, deadline_s=5, now_ms=now, enqueue=_collect(sent))
        assert _scans(client) == scans, "a sweep reads the index shards, it never SCANs"
        mine = [s for s in sent if str(s["table_id"]).startswith(table_id)]
        # The table whose index write was lost is not seen: the sweep does not look at
        # outboxes, only at the index.
        assert mine == [{"table_id": table_id, "round_no": 1, "phase": "start"}]
    finally:
        client.delete(keys.outbox(lost), enqueued_marker(PhaseRef(lost, 1, "start")))
        client.zrem(keys.unsettled(lost), lost)


def test_a_table_whose_index_entry_was_lost_is_swept_after_the_periodic_rebuild(
    client: redis.Redis, table_id: str
) -> None:
    now = _now_ms()
    ref = _write_phase(client, table_id, 2, "end", now - 60_000, indexed=False)
    sent: list[dict[str, object]] = []
    sweep_report(client, deadline_s=5, now_ms=now, enqueue=_collect(sent))
    assert not [s for s in sent if s["table_id"] == table_id]

    # The first sweep of each interval (whichever worker runs it) rebuilds the index from
    # the outboxes, then sweeps: the table is enqueued within the interval and one sweep.
    client.delete(REBUILT_MARKER)
    restored = rebuild_if_due(client, now_ms=now, interval_s=60)
    assert restored is not None
    assert restored >= 1
    assert rebuild_if_due(client, now_ms=now + 1000, interval_s=60) is None  # once per interval
    assert 0 < client.pttl(REBUILT_MARKER) <= 60_000
    assert _indexed(client, table_id) == now - 60_000
    sweep_report(client, deadline_s=5, now_ms=now, enqueue=_collect(sent))
    assert [s for s in sent if s["table_id"] == table_id] == [
        {"table_id": table_id, "round_no": ref.round_no, "phase": ref.phase}
    ]


def test_a_table_leaves_the_index_when_its_last_phase_settles_and_stays_while_one_is_unsettled(
    client: redis.Redis, table_id: str
) -> None:
    now = _now_ms()
    start = _write_phase(client, table_id, 1, "start", now - 1_000)
    end = _write_phase(client, table_id, 1, "end", now - 500)
    assert _indexed(client, table_id) == now - 1_000  # the earliest unsettled phase's time
    sent: list[dict[str, object]] = []

    mark_settled(client, start, batch_id="1", balances={}, settled_ms=now)
    follow_up(client, start, Outcome("settled"), enqueue=_collect(sent))
    assert sent == [{"table_id": table_id, "round_no": 1, "phase": "end"}]
    assert _indexed(client, table_id) is not None  # the end is unsettled

    mark_settled(client, end, batch_id="2", balances={}, settled_ms=now)
    follow_up(client, end, Outcome("settled"), enqueue=_collect(sent))
    assert _indexed(client, table_id) is None

    # The next round's commit indexes it again; a dead-lettered phase keeps it indexed (it
    # is unsettled, and the sweeper settles it once an operator releases it).
    poisoned = _write_phase(client, table_id, 2, "start", now)
    push_dead_letter(client, poisoned, reason="test", time_ms=now)
    follow_up(client, poisoned, Outcome("dead_letter"), enqueue=_collect(sent))
    assert _indexed(client, table_id) == now


def test_a_stale_entry_goes_with_the_next_settlement_or_sweep_but_not_a_new_phases(
    client: redis.Redis, table_id: str
) -> None:
    now = _now_ms()
    # A settlement that died before it took its table out of the index: a duplicate delivery
    # (already settled) takes it out.
    start = _write_phase(client, table_id, 1, "start", now - 60_000)
    mark_settled(client, start, batch_id="1", balances={}, settled_ms=now)
    assert _indexed(client, table_id) is not None
    follow_up(client, start, Outcome("already_settled"), enqueue=_collect([]))
    assert _indexed(client, table_id) is None

    # ... and so does a sweep, which finds nothing unsettled behind the entry.
    end = _write_phase(client, table_id, 1, "end", now - 60_000)
    mark_settled(client, end, batch_id="2", balances={}, settled_ms=now)
    sent: list[dict[str, object]] = []
    sweep_report(client, deadline_s=5, now_ms=now, enqueue=_collect(sent))
    assert not [s for s in sent if s["table_id"] == table_id]
    assert _indexed(client, table_id) is None

    # Removal takes the entry first and reads the outbox after: a phase committed (and
    # indexed) just before the removal keeps its table in the index.
    late = _write_phase(client, table_id, 2, "start", now - 10)
    assert [p.ref for p in unindex_settled_table(client, table_id)] == [late]
    assert _indexed(client, table_id) == now - 10


def _play(client: redis.Redis, table_id: str, round_no: int, count: int) -> list[str]:
    """``count`` game events of round ``round_no`` appended as the table service does."""
    return [
        client.xadd(
            keys.events(table_id),
            stream.encode(stream.TableEvent("tiles_laid", round_no, 0, {"n": i})),  # type: ignore[arg-type]
        ).decode()
        for i in range(count)
    ]


def _settle(client: redis.Redis, table_id: str, round_no: int, phase: str) -> bool:
    return mark_settled(
        client,
        PhaseRef(table_id, round_no, phase),
        batch_id=f"{round_no}{phase}",
        balances={"ann": round_no},
        settled_ms=round_no,
    )


def test_settling_a_rounds_end_trims_the_history_redis_no_longer_needs(
    client: redis.Redis, table_id: str
) -> None:
    """Rounds 1-3 played and settled in order, as a table and its workers do. Once round 2's
    end is settled, the stream starts at round 2's first event (the round that just ended
    stays, for the view between deals) and no record or settled mark of round 1 is left;
    once round 3's start is settled (round 3 dealt), round 2's events go too: while a round
    is played the stream holds that round alone (the archive serves the ended ones). Round
    2's records and marks (small) stay until round 3's end."""
    client.hset(keys.state(table_id), "version", 1)
    first_of: dict[int, str] = {}
    for round_no in (1, 2, 3):
        # The deal's seed commitment comes first, with the round before (as the table sends
        # it between deals): the deal's record needs it, so it is the round's first event.
        first_of[round_no] = client.xadd(
            keys.events(table_id),
            stream.encode(
                stream.TableEvent("seed_committed", round_no - 1, -1, {"deal": round_no})
            ),  # type: ignore[arg-type]
        ).decode()
        _write_phase(client, table_id, round_no, "start", round_no)
        _play(client, table_id, round_no, 5)
        assert _settle(client, table_id, round_no, "start")
        _play(client, table_id, round_no, 5)
        _write_phase(client, table_id, round_no, "end", round_no)
        if round_no < 3:
            assert _settle(client, table_id, round_no, "end")
        if round_no == 2:
            # Between the deals: round 2, just ended, is all the stream holds.
            entries = client.xrange(keys.events(table_id))
            assert entries[0][0].decode() == first_of[2]
            assert {stream.decode(f).round for _, f in entries} == {1, 2}  # 1: the seed
            assert {f.decode() for f in client.hkeys(keys.outbox(table_id))} == {
                "2:start",
                "2:end",
            }

    entries = client.xrange(keys.events(table_id))
    assert entries[0][0].decode() == first_of[3]
    assert {stream.decode(fields).round for _, fields in entries} == {2, 3}  # 2: seed
    assert {f.decode() for f in client.hkeys(keys.outbox(table_id))} == {
        "2:start",
        "2:end",
        "3:start",
        "3:end",
    }
    settled = {k.decode(): v.decode() for k, v in client.hgetall(keys.settled(table_id)).items()}
    assert {k for k in settled if not k.startswith("_")} == {"2:start", "2:end", "3:start"}
    assert settled["_trimmed"] == "1"
    assert settled["_events_from"] == first_of[3]


def test_a_dead_lettered_phase_keeps_its_rounds_events(client: redis.Redis, table_id: str) -> None:
    """A phase left unsettled (dead-lettered) is not archived: its round's events stay, so
    its record can still be folded from the stream."""
    client.hset(keys.state(table_id), "version", 1)
    first = _play(client, table_id, 1, 3)[0]
    _write_phase(client, table_id, 1, "start", 1)  # refused: waits in the dead letters
    _write_phase(client, table_id, 1, "end", 1)
    assert _settle(client, table_id, 1, "end")
    _play(client, table_id, 2, 3)
    _write_phase(client, table_id, 2, "start", 1)
    assert _settle(client, table_id, 2, "start")
    assert client.xrange(keys.events(table_id))[0][0].decode() == first
    assert client.hget(keys.settled(table_id), "_events_from") is None


def test_a_redelivered_task_of_a_trimmed_phase_is_settled_already_not_settled_again(
    client: redis.Redis, table_id: str
) -> None:
    from workers.outbox import phase_state

    client.hset(keys.state(table_id), "version", 1)
    for round_no in (1, 2):
        for phase in ("start", "end"):
            _write_phase(client, table_id, round_no, phase, 1)
            _play(client, table_id, round_no, 2)
            assert _settle(client, table_id, round_no, phase)
    assert client.hlen(keys.outbox(table_id)) == 2  # round 1's went with round 2's end
    length = client.xlen(keys.events(table_id))
    for phase in ("start", "end"):
        assert not _settle(client, table_id, 1, phase)  # nothing written, nothing published
        ref = PhaseRef(table_id, 1, phase)
        state = phase_state(client, ref, dead_letter_index="gtest:none", field=ref.field)
        assert state.settled
    assert client.xlen(keys.events(table_id)) == length


def test_a_dead_lettered_phase_keeps_its_record_through_a_trim_and_settles_later(
    client: redis.Redis, table_id: str
) -> None:
    client.hset(keys.state(table_id), "version", 1)
    _write_phase(client, table_id, 1, "start", 1)  # refused: waits in the dead letters
    for round_no, phase in ((1, "end"), (2, "start"), (2, "end")):
        _write_phase(client, table_id, round_no, phase, 1)
        assert _settle(client, table_id, round_no, phase)
    assert {f.decode() for f in client.hkeys(keys.outbox(table_id))} == {
        "1:start",
        "2:start",
        "2:end",
    }
    assert client.hget(keys.settled(table_id), "1:start") is None
    assert _settle(client, table_id, 1, "start")  # released and settled by an operator


def test_a_closing_tables_history_is_not_trimmed(client: redis.Redis, table_id: str) -> None:
    """A table's last ending phase (a Hand game's payout, a Kishpa table's last round) trims
    nothing: every key goes with the table, and its deals stay verifiable until then."""
    client.hset(keys.state(table_id), "version", 1)
    client.expire(keys.state(table_id), 500)  # the table closed
    for round_no in (1, 2):
        for phase in ("start", "end"):
            _write_phase(client, table_id, round_no, phase, 1)
            _play(client, table_id, round_no, 2)
            assert _settle(client, table_id, round_no, phase)
    assert client.hlen(keys.outbox(table_id)) == 4
    assert client.hget(keys.settled(table_id), "_trimmed") is None
    rounds = {stream.decode(f).round for _, f in client.xrange(keys.events(table_id))}
    assert rounds == {1, 2}
