"""Reconciliation runs as records a finance team keeps: which check ran when, over what, how
long it took and what it found (``reconciliation_runs``, migration ``0003_i24``).

Two kinds: ``ledger`` (the ledger's own consistency, :mod:`services.wallet.reconcile`) and
``drift`` (live tables against the ledger, run by the workers and stored through the
``RecordReconciliationRun`` RPC). Rows are only ever inserted (migration ``0004_finance``
adds triggers refusing UPDATE and DELETE on both databases). Each row names who ran it as
authenticated (``identity``: ``service:worker``, ``admin:<subject>``, or ``database:<role>``
for a run written straight to the database) and the chain head the run saw.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Engine, insert, select

from services.wallet import chain, schema
from services.wallet.errors import InvalidRequest

KINDS = ("ledger", "drift")
DEFAULT_PAGE = 50
MAX_PAGE = 500
MAX_RESULT_CHARS = 200_000
"""A run's stored JSON is capped (a broken ledger lists its first differences, not all)."""


@dataclass(frozen=True, slots=True)
class Run:
    """One reconciliation run."""

    kind: str
    scope: str
    source: str
    started_ms: int
    duration_ms: int
    ok: bool
    discrepancies: int
    result: dict[str, Any]
    run_id: int = 0
    identity: str = ""
    """Who ran it, as authenticated (filled in when it is stored)."""
    chain_seq: int | None = None
    """The chain head the run saw (None: the head when it is stored)."""
    chain_hash: str = ""

    @property
    def mode(self) -> str:
        """``full`` or ``incremental`` for a ledger run (from its result), else ``""``."""
        mode = self.result.get("mode", "")
        return mode if isinstance(mode, str) else ""

    def check(self) -> None:
        """Refuse a malformed record (InvalidRequest) before it is stored."""
        if self.kind not in KINDS:
            raise InvalidRequest(f"kind must be one of {', '.join(KINDS)}", "INVALID_RUN")
        if not 1 <= len(self.scope) <= 200 or not 1 <= len(self.source) <= 40:
            raise InvalidRequest("scope (1-200) and source (1-40) are required", "INVALID_RUN")
        if self.started_ms <= 0 or self.duration_ms < 0 or self.discrepancies < 0:
            raise InvalidRequest("times and counts must not be negative", "INVALID_RUN")
        if self.ok != (self.discrepancies == 0):
            raise InvalidRequest("ok must mean no discrepancies", "INVALID_RUN")


def _result_text(result: dict[str, Any]) -> str:
    text = json.dumps(result, sort_keys=True, separators=(",", ":"))
    if len(text) > MAX_RESULT_CHARS:
        raise InvalidRequest(f"result is over {MAX_RESULT_CHARS} characters", "INVALID_RUN")
    return text


def database_identity(conn: Connection) -> str:
    """Who writes through ``conn`` as the database knows it (``database:<role>``)."""
    if conn.dialect.name == "sqlite":
        import getpass

        return f"database:sqlite ({getpass.getuser()})"
    return f"database:{conn.exec_driver_sql('SELECT current_user').scalar_one()}"


def record_run(engine: Engine, run: Run, identity: str = "") -> int:
    """Store ``run`` as run by ``identity`` (default: the database role writing it); its new
    id. Without a chain head of its own, the run records the head at this moment."""
    run.check()
    if len(identity) > 200:
        raise InvalidRequest("identity is over 200 characters", "INVALID_RUN")
    row: dict[str, Any] = {
        "kind": run.kind,
        "scope": run.scope,
        "source": run.source,
        "started_ms": run.started_ms,
        "duration_ms": run.duration_ms,
        "ok": run.ok,
        "discrepancies": run.discrepancies,
        "result": _result_text(run.result),
    }
    r = schema.reconciliation_runs
    with engine.begin() as conn:
        row["identity"] = identity or run.identity or database_identity(conn)
        if run.chain_seq is None:
            head = chain.read_head(conn)
            row["chain_seq"], row["chain_hash"] = head.seq, head.hash
        else:
            row["chain_seq"], row["chain_hash"] = run.chain_seq, run.chain_hash
        return int(conn.execute(insert(r).values(**row).returning(r.c.id)).scalar_one())


def list_runs(
    engine: Engine, kind: str = "", page_size: int = 0, page_token: str = ""
) -> tuple[list[Run], str]:
    """Runs, newest first, and the next page's token."""
    if kind and kind not in KINDS:
        raise InvalidRequest(f"kind must be one of {', '.join(KINDS)}", "INVALID_RUN_KIND")
    size = page_size or DEFAULT_PAGE
    if not 0 < size <= MAX_PAGE:
        raise InvalidRequest(f"page_size must be 1..{MAX_PAGE}", "INVALID_PAGE_SIZE")
    r = schema.reconciliation_runs.c
    query = select(schema.reconciliation_runs).order_by(r.id.desc()).limit(size + 1)
    if kind:
        query = query.where(r.kind == kind)
    if page_token:
        query = query.where(r.id < _decode(page_token))
    with engine.connect().execution_options(sqlite_begin="DEFERRED") as conn:
        rows = conn.execute(query).all()
    runs = [
        Run(
            row.kind,
            row.scope,
            row.source,
            int(row.started_ms),
            int(row.duration_ms),
            bool(row.ok),
            int(row.discrepancies),
            json.loads(row.result),
            int(row.id),
            row.identity or "",
            None if row.chain_seq is None else int(row.chain_seq),
            row.chain_hash or "",
        )
        for row in rows[:size]
    ]
    more = len(rows) > size
    token = base64.urlsafe_b64encode(f"r1:{runs[-1].run_id}".encode()).decode() if more else ""
    return runs, token


def _decode(token: str) -> int:
    try:
        version, _, number = base64.urlsafe_b64decode(token.encode()).decode().partition(":")
        if version != "r1" or not number.isdigit() or len(number) > 18:
            raise ValueError(version)
        return int(number)
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise InvalidRequest("malformed page_token", "INVALID_PAGE_TOKEN") from None
