"""Finance step 2: the tamper-evident chain, effective times, closed periods, and run records
that cannot be changed.

- ``postings.effective_ms`` (existing rows: their ``created_ms``) and its index;
- ``ledger_chain`` (one entry per batch, hashed, ``services/wallet/chain.py``) and
  ``ledger_chain_head``; existing batches are chained here, in batch id order;
- ``closed_periods``;
- ``reconciliation_runs.identity``, ``chain_seq``, ``chain_hash``;
- triggers refusing UPDATE and DELETE (and TRUNCATE on PostgreSQL) on
  ``reconciliation_runs``, ``ledger_chain`` and ``closed_periods``, and DELETE on the head.

Revision ID: 0004_finance_chain
Revises: 0003_i24
Create Date: 2026-12-06
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator
from typing import Any

import sqlalchemy as sa
from alembic import op

from services.wallet.chain import GENESIS, POSTING_COLUMNS, header_line, link, posting_line

revision = "0004_finance_chain"
down_revision = "0003_i24"
branch_labels = None
depends_on = None

_Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
INSERT_ONLY = ("reconciliation_runs", "ledger_chain", "closed_periods")
_CHUNK = 5_000

_POSTGRES_FUNCTION = """
CREATE FUNCTION kishpa_insert_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION '% is insert-only: % refused', TG_TABLE_NAME, TG_OP;
END $$
"""


def upgrade() -> None:
    """Add the columns and tables, chain the existing batches, then guard the tables."""
    op.add_column(
        "postings", sa.Column("effective_ms", sa.BigInteger, nullable=False, server_default="0")
    )
    op.execute("UPDATE postings SET effective_ms = created_ms")
    op.create_index("ix_postings_effective", "postings", ["effective_ms", "id"])
    op.add_column("reconciliation_runs", sa.Column("identity", sa.String(200), nullable=True))
    op.add_column("reconciliation_runs", sa.Column("chain_seq", sa.BigInteger, nullable=True))
    op.add_column("reconciliation_runs", sa.Column("chain_hash", sa.String(64), nullable=True))
    chain = op.create_table(
        "ledger_chain",
        sa.Column("seq", _Id, primary_key=True, autoincrement=False),
        sa.Column("batch_id", _Id, nullable=False, unique=True),
        sa.Column("digest", sa.String(64), nullable=False),
        sa.Column("hash", sa.String(64), nullable=False),
        sa.Column("created_ms", sa.BigInteger, nullable=False),
    )
    head = op.create_table(
        "ledger_chain_head",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("seq", sa.BigInteger, nullable=False),
        sa.Column("hash", sa.String(64), nullable=False),
        sa.Column("closed_until_ms", sa.BigInteger, nullable=False),
        sa.Column("created_ms", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "closed_periods",
        sa.Column("month", sa.String(7), primary_key=True),
        sa.Column("since_ms", sa.BigInteger, nullable=False),
        sa.Column("until_ms", sa.BigInteger, nullable=False),
        sa.Column("closed_ms", sa.BigInteger, nullable=False),
        sa.Column("closed_by", sa.String(200), nullable=False),
        sa.Column("request_id", sa.String(200), nullable=False),
        sa.Column("chain_seq", sa.BigInteger, nullable=False),
        sa.Column("chain_hash", sa.String(64), nullable=False),
    )
    seq, last = _chain_existing(chain)
    op.bulk_insert(
        head,
        [
            {
                "id": 1,
                "seq": seq,
                "hash": last,
                "closed_until_ms": 0,
                "created_ms": int(time.time() * 1000),
            }
        ],
    )
    _guard()


def _chain_existing(chain: sa.Table) -> tuple[int, str]:
    """Chain every batch already stored, in batch id order; the head (position, hash)."""
    bind = op.get_bind()
    batches = bind.execute(
        sa.text("SELECT id, idempotency_key, body_hash, created_ms FROM batches ORDER BY id")
    ).all()
    postings = _postings(bind)
    pending = next(postings, None)
    seq, previous = 0, GENESIS
    rows: list[dict[str, Any]] = []
    for batch_id, key, body, created in batches:
        h = hashlib.sha256(header_line(int(batch_id), key, body, int(created)).encode())
        while pending is not None and pending[0] < batch_id:
            pending = next(postings, None)  # postings of no batch: verify-chain reports them
        while pending is not None and pending[0] == batch_id:
            h.update(posting_line(pending).encode())
            pending = next(postings, None)
        seq += 1
        digest = h.hexdigest()
        previous = link(previous, seq, int(batch_id), digest)
        rows.append(
            {
                "seq": seq,
                "batch_id": batch_id,
                "digest": digest,
                "hash": previous,
                "created_ms": created,
            }
        )
        if len(rows) >= _CHUNK:
            op.bulk_insert(chain, rows)
            rows = []
    if rows:
        op.bulk_insert(chain, rows)
    return seq, previous


def _postings(bind: Any) -> Iterator[Any]:
    """Every posting in (batch id, seq) order, a page at a time (keyset)."""
    after = (-1, -1)
    columns = ", ".join(POSTING_COLUMNS)
    while True:
        page = bind.execute(
            sa.text(
                f"SELECT {columns} FROM postings WHERE batch_id > :b OR (batch_id = :b AND "  # noqa: S608 (constants)
                f"seq > :s) ORDER BY batch_id, seq LIMIT {_CHUNK * 4}"
            ),
            {"b": after[0], "s": after[1]},
        ).all()
        if not page:
            return
        yield from page
        after = (int(page[-1][0]), int(page[-1][1]))


def _guard() -> None:
    """Make the record tables insert-only (and the head undeletable)."""
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_POSTGRES_FUNCTION)
        for table in INSERT_ONLY:
            op.execute(
                f"CREATE TRIGGER {table}_insert_only BEFORE UPDATE OR DELETE ON {table} "
                f"FOR EACH ROW EXECUTE FUNCTION kishpa_insert_only()"
            )
            op.execute(
                f"CREATE TRIGGER {table}_no_truncate BEFORE TRUNCATE ON {table} "
                f"FOR EACH STATEMENT EXECUTE FUNCTION kishpa_insert_only()"
            )
        op.execute(
            "CREATE TRIGGER ledger_chain_head_kept BEFORE DELETE ON ledger_chain_head "
            "FOR EACH ROW EXECUTE FUNCTION kishpa_insert_only()"
        )
        op.execute(
            "CREATE TRIGGER ledger_chain_head_no_truncate BEFORE TRUNCATE ON ledger_chain_head "
            "FOR EACH STATEMENT EXECUTE FUNCTION kishpa_insert_only()"
        )
        return
    for table in INSERT_ONLY:
        for verb in ("UPDATE", "DELETE"):
            op.execute(
                f"CREATE TRIGGER {table}_no_{verb.lower()} BEFORE {verb} ON {table} "
                f"BEGIN SELECT RAISE(ABORT, '{table} is insert-only: {verb} refused'); END"
            )
    op.execute(
        "CREATE TRIGGER ledger_chain_head_no_delete BEFORE DELETE ON ledger_chain_head "
        "BEGIN SELECT RAISE(ABORT, 'ledger_chain_head is kept: DELETE refused'); END"
    )


def downgrade() -> None:
    """Drop it all again (development only)."""
    postgres = op.get_bind().dialect.name == "postgresql"
    if postgres:
        for table in INSERT_ONLY:
            op.execute(f"DROP TRIGGER IF EXISTS {table}_insert_only ON {table}")
            op.execute(f"DROP TRIGGER IF EXISTS {table}_no_truncate ON {table}")
    else:
        for table in INSERT_ONLY:
            for verb in ("update", "delete"):
                op.execute(f"DROP TRIGGER IF EXISTS {table}_no_{verb}")
    op.drop_table("closed_periods")
    op.drop_table("ledger_chain_head")
    op.drop_table("ledger_chain")
    if postgres:
        op.execute("DROP FUNCTION kishpa_insert_only()")
    with op.batch_alter_table("reconciliation_runs") as batch:
        batch.drop_column("chain_hash")
        batch.drop_column("chain_seq")
        batch.drop_column("identity")
    op.drop_index("ix_postings_effective", table_name="postings")
    with op.batch_alter_table("postings") as batch:
        batch.drop_column("effective_ms")
