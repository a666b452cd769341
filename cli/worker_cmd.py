"""``kishpa worker`` (the settlement worker and its operator tools) and ``kishpa beat``.

- ``kishpa worker``: a Celery worker running settlement and sweeper tasks in threads of one
  process, serving Prometheus metrics on KISHPA_METRICS_PORT;
- ``kishpa worker --drift``: the same on the drift check's own queue (one thread is enough);
- ``kishpa worker deadletters [--json]``: the phases settlement refused, newest first;
- ``kishpa worker release TABLE ROUND PHASE``: take a phase off the dead-letter list (after
  fixing its cause) so the sweeper settles it again;
- ``kishpa worker sweep``: rebuild the unsettled index from the outboxes and sweep once,
  now, printing what was enqueued;
- ``kishpa worker ping``: exit 0 when a worker of this host answers a Celery ping (the
  worker pod's liveness probe), 1 otherwise;
- ``kishpa beat``: Celery beat, scheduling the sweeper and the wallet reconciliation.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

from services.common.settings import SettingsError, load_section, load_settings


def register(subparsers: Any) -> None:
    """Add the ``worker`` and ``beat`` commands."""
    worker = subparsers.add_parser(
        "worker",
        help="run a settlement worker, or inspect its dead letters",
        description="Run a Celery settlement worker (default), or an operator sub-command.",
    )
    worker.add_argument(
        "--concurrency", type=int, default=8, help="tasks run at once (threads; default 8)"
    )
    worker.add_argument("--queue", default=None, help="queue to consume (KISHPA_WORKER_QUEUE)")
    worker.add_argument(
        "--drift",
        action="store_true",
        help="consume the drift check's own queue instead (KISHPA_DRIFT_QUEUE)",
    )
    worker.add_argument("--name", default=None, help="worker node name (default: host and pid)")
    worker.add_argument(
        "--beat", action="store_true", help="also run the beat scheduler inside this worker"
    )
    worker.set_defaults(handler=run_worker)
    actions = worker.add_subparsers(dest="action", metavar="ACTION")

    letters = actions.add_parser("deadletters", help="list the phases settlement refused")
    letters.add_argument("--json", action="store_true", help="one JSON object per line")
    letters.add_argument("--limit", type=int, default=100, help="how many (newest first)")
    letters.set_defaults(handler=list_dead_letters)

    release = actions.add_parser("release", help="take a phase off the dead-letter list")
    release.add_argument("table_id")
    release.add_argument("round_no", type=int)
    release.add_argument("phase")
    release.set_defaults(handler=release_dead_letter)

    sweep = actions.add_parser("sweep", help="enqueue every phase left unsettled, now")
    sweep.set_defaults(handler=sweep_now)

    ping = actions.add_parser(
        "ping", help="exit 0 if this host's worker answers a Celery ping (liveness probe)"
    )
    ping.add_argument("--timeout", type=float, default=5.0, help="seconds to wait (default 5)")
    ping.set_defaults(handler=ping_worker)

    beat = subparsers.add_parser("beat", help="run Celery beat (sweeper and reconciliation)")
    beat.set_defaults(handler=run_beat)


def _check_settings(service: str) -> bool:
    try:
        settings = load_settings(service)
        from workers.config import WorkerSettings

        load_section(WorkerSettings)  # its knobs too: a bad one stops the start, named
    except SettingsError as exc:
        print(f"kishpa {service}: {exc}", file=sys.stderr)
        return False
    from services.common.logging import configure_logging

    configure_logging(settings.log_format, settings.log_level, service=service)
    return True


def _operator_logging() -> None:
    # Operator commands print their answer on stdout; log lines go to stderr.
    from services.common.logging import configure_logging
    from workers.config import worker_config

    settings = worker_config().settings
    configure_logging(settings.log_format, settings.log_level, service="worker-cli")


def run_worker(args: argparse.Namespace) -> int:
    """Start a Celery worker on the settlement queue (blocks until it is stopped)."""
    if not _check_settings("worker"):
        return 2
    from workers import metrics
    from workers.celery_app import app, quiet_routine_logs
    from workers.config import worker_config

    quiet_routine_logs()
    config = worker_config()
    # The round archive before any task: an embedded SQLite one is created, a PostgreSQL
    # one not migrated is reported now (its writes are retried until `kishpa migrate`).
    prepare_worker_archive(config.settings.archive_url)
    metrics.serve_metrics(config.settings.metrics_port)
    name = args.name or f"kishpa-{os.getpid()}"
    argv = [
        "worker",
        "--pool=threads",
        f"--concurrency={args.concurrency}",
        f"--queues={args.queue or (config.drift_queue if args.drift else config.queue)}",
        f"--hostname={name}@%h",
        "--without-gossip",
        "--without-mingle",
        f"--loglevel={config.settings.log_level}",
    ]
    if args.beat:
        argv += ["--beat", "--scheduler=celery.beat:Scheduler"]
    return run_celery(app, argv)


def prepare_worker_archive(url: str) -> None:
    """Create or check the round archive (:func:`workers.archive_write.archive_store`)."""
    from archive.migrate import ArchiveNotMigrated
    from services.common.logging import get_logger
    from workers.archive_write import archive_store

    try:
        archive_store(url)
    except ArchiveNotMigrated as exc:
        get_logger("kishpa.worker").error("round_archive_not_migrated", error=str(exc))
    except Exception as exc:  # unreachable now: the tasks retry it
        get_logger("kishpa.worker").warning("round_archive_unavailable", error=str(exc))


def run_beat(args: argparse.Namespace) -> int:
    """Start Celery beat with the sweeper and reconciliation schedule (in-memory schedule)."""
    if not _check_settings("beat"):
        return 2
    from workers.celery_app import app, quiet_routine_logs
    from workers.config import worker_config

    quiet_routine_logs()
    argv = [
        "beat",
        "--scheduler=celery.beat:Scheduler",
        f"--loglevel={worker_config().settings.log_level}",
    ]
    return run_celery(app, argv)


def run_celery(app: Any, argv: list[str]) -> int:
    """Run a Celery command for ``app`` and return its exit code.

    ``Celery.worker_main`` and ``Celery.start`` throw the code away: they run Celery's click
    command with ``standalone_mode=False``, under which click *returns* the code of
    ``ctx.exit(worker.exitcode)``, and they return nothing. So a worker that stopped on an
    unrecoverable error exited 0 and its supervisor saw a clean exit. This runs the same
    command the way ``Celery.start`` does (the app as the ``--app`` default) and keeps the
    code; a command that raised (beat logs it at critical level) exits 1.
    """
    from celery.bin.celery import celery as celery_command
    from click.exceptions import Exit

    celery_command.params[0].default = app  # what Celery.start does: the app to run
    try:
        code = celery_command.main(args=argv, standalone_mode=False)
    except Exit as exc:
        code = exc.exit_code
    except Exception as exc:
        print(f"kishpa {argv[0]}: stopped on {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    finally:
        celery_command.params[0].default = None
    return code if isinstance(code, int) else 0


def ping_worker(args: argparse.Namespace) -> int:
    """Ping the workers over the broker; 0 when one named ``...@<this host>`` answers.

    A worker whose consumer is stuck, or that lost its broker for good, answers nothing and
    the probe fails; the broker itself being down fails it too, which a liveness probe with
    a few failures' threshold rides out."""
    import socket

    from workers.celery_app import app

    host = socket.gethostname()
    try:
        replies = app.control.ping(timeout=args.timeout) or []
    except Exception as exc:
        print(f"kishpa worker ping: no broker ({type(exc).__name__}: {exc})", file=sys.stderr)
        return 1
    mine = [name for reply in replies for name in reply if name.endswith(f"@{host}")]
    if not mine:
        print(f"kishpa worker ping: no worker of {host} answered", file=sys.stderr)
        return 1
    print(f"pong from {', '.join(sorted(mine))}")
    return 0


def list_dead_letters(args: argparse.Namespace) -> int:
    """Print the dead-letter list, newest first."""
    _operator_logging()
    from workers.deadletter import list_dead_letters as read_letters
    from workers.settlement import redis_client

    letters = read_letters(redis_client(), limit=args.limit)
    for letter in letters:
        if args.json:
            print(letter.to_json())
        else:
            when = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(letter.time_ms / 1000))
            print(f"{when}Z  {letter.table_id}  round {letter.round_no} {letter.phase}")
            print(f"    {letter.reason}")
    if not letters and not args.json:
        print("no dead letters")
    return 0


def release_dead_letter(args: argparse.Namespace) -> int:
    """Take one phase off the dead-letter list."""
    _operator_logging()
    from shared.phase_record import PhaseRef
    from workers.deadletter import release_dead_letter as release
    from workers.settlement import redis_client

    ref = PhaseRef(args.table_id, args.round_no, args.phase)
    if not release(redis_client(), ref):
        print(f"{args.table_id} round {args.round_no} {args.phase} is not a dead letter")
        return 1
    print(f"released {args.table_id} round {args.round_no} {args.phase}: the sweeper will retry")
    return 0


def sweep_now(args: argparse.Namespace) -> int:
    """Rebuild the unsettled index, run one sweep in this process and print what it
    enqueued (an operator who asks for a sweep gets every unsettled phase, not only the
    indexed ones)."""
    _operator_logging()
    from workers.config import worker_config
    from workers.outbox import rebuild_unsettled_index
    from workers.settlement import redis_client
    from workers.sweeper import sweep

    client = redis_client()
    rebuild_unsettled_index(client)
    refs = sweep(
        client,
        deadline_s=worker_config().settle_deadline_s,
        now_ms=time.time_ns() // 1_000_000,
    )
    for ref in refs:
        print(json.dumps({"table_id": ref.table_id, "round": ref.round_no, "phase": ref.phase}))
    return 0
