"""A periodic check that runs past the visibility timeout runs once, not once per timeout.

With Redis as broker, a message left unacknowledged past ``KISHPA_VISIBILITY_TIMEOUT`` is
handed out again even though its task still runs. The reconciliation (the whole ledger) and
the drift check (every table, two RPCs each) can run that long; late-acked, the drift check
of a 32-minute soak ran in several threads at once (docs/BENCHMARKS.md, "Worker RSS in the
long soak"). Here a real ``kishpa worker`` with a 2 s timeout reconciles a real PostgreSQL
ledger whose tables the test holds locked: the run waits on the lock as long as the test
wants, and every run of it is one more backend waiting in ``pg_stat_activity``.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
import redis
from sqlalchemy import create_engine
from sqlalchemy import text as sql

from devkit.postgres import temporary_postgres_database
from services.wallet.migrate import upgrade
from tests.conftest import TEST_DATABASE_URL
from tests.integration.workers_support import SHARED, Worker, wait_for

pytestmark = pytest.mark.integration

VISIBILITY_TIMEOUT_S = 2
WAITING = (
    "SELECT count(*) FROM pg_stat_activity "
    "WHERE datname = current_database() AND wait_event_type = 'Lock'"
)


def _unacked_ids(client: redis.Redis) -> set[str]:
    """Task ids of the messages kombu's Redis transport holds as delivered, not acked."""
    ids = set()
    for raw in client.hvals("unacked"):
        message = json.loads(raw)[0]
        ids.add(str(message.get("headers", {}).get("id", "")))
    return ids


def test_a_reconciliation_outliving_the_visibility_timeout_runs_once(tmp_path: Path) -> None:
    with temporary_postgres_database(TEST_DATABASE_URL) as url:
        upgrade(url)
        engine = create_engine(url)
        broker = redis.Redis.from_url(SHARED.broker_url)
        worker = Worker(
            "127.0.0.1:1",  # the reconciliation reads the database, not the wallet service
            tmp_path / "worker.log",
            SHARED,
            queue=f"checks-{uuid.uuid4().hex[:10]}",
            extra_env={
                "DATABASE_URL": url,
                "KISHPA_VISIBILITY_TIMEOUT": str(VISIBILITY_TIMEOUT_S),
                "KISHPA_DRIFT_INTERVAL": "0",
            },
        ).start(concurrency=4)
        try:
            # The observer autocommits: in a transaction pg_stat_activity stays a snapshot.
            autocommit = engine.execution_options(isolation_level="AUTOCOMMIT")
            with engine.connect() as locker, autocommit.connect() as observer:
                locker.execute(
                    sql("LOCK TABLE accounts, batches, postings IN ACCESS EXCLUSIVE MODE")
                )

                def waiting() -> int:
                    return int(observer.execute(sql(WAITING)).scalar_one())

                task_id = worker.sender().send_task("kishpa.reconcile_wallet").id
                wait_for(lambda: waiting() >= 1, 30, "the reconciliation to wait on the lock")
                # Acknowledged while it still runs: Redis has nothing of it to hand out again.
                wait_for(lambda: task_id not in _unacked_ids(broker), 5, "the message acked")
                # Late-acked, a second run waited on the lock about one timeout plus one
                # restore interval (1 s) after the first; give it longer than that.
                with pytest.raises(AssertionError, match="timed out"):
                    wait_for(lambda: waiting() >= 2, VISIBILITY_TIMEOUT_S + 2, "a second run")
                assert waiting() == 1
                locker.rollback()  # the run goes on and ends; the worker stops at once
        finally:
            worker.stop()
            broker.close()
            engine.dispose()
