"""The ledger's tables (SQLAlchemy Core). Migrations in ``migrations/`` create them."""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
)

metadata = MetaData()

# SQLite only auto-increments an INTEGER PRIMARY KEY; PostgreSQL gets a BIGINT identity.
_Id = BigInteger().with_variant(Integer(), "sqlite")

accounts = Table(
    "accounts",
    metadata,
    Column("id", String(120), primary_key=True),
    Column("kind", String(8), nullable=False),
    Column("balance", BigInteger, nullable=False, server_default="0"),
    Column("created_ms", BigInteger, nullable=False),
    # The last line of defence for docs/rules/kishpa.md section 5: only the bank may go negative.
    CheckConstraint("kind = 'bank' OR balance >= 0", name="ck_accounts_not_negative"),
    CheckConstraint("kind IN ('player', 'bowl', 'pot', 'bank')", name="ck_accounts_kind"),
)

batches = Table(
    "batches",
    metadata,
    Column("id", _Id, primary_key=True, autoincrement=True),
    Column("idempotency_key", String(200), nullable=False, unique=True),
    Column("body_hash", String(64), nullable=False),
    # JSON of the first result (applied postings, balances after), returned on replays.
    Column("result", Text, nullable=False),
    Column("created_ms", BigInteger, nullable=False),
)

postings = Table(
    "postings",
    metadata,
    Column("id", _Id, primary_key=True, autoincrement=True),
    Column("batch_id", _Id, ForeignKey("batches.id"), nullable=False),
    Column("seq", Integer, nullable=False),
    Column("from_account", String(120), ForeignKey("accounts.id"), nullable=False),
    Column("to_account", String(120), ForeignKey("accounts.id"), nullable=False),
    Column("amount", BigInteger, nullable=False),
    Column("reason", String(32), nullable=False),
    Column("table_id", String(100), nullable=True),
    Column("round", Integer, nullable=True),
    Column("phase", String(16), nullable=True),
    Column("created_ms", BigInteger, nullable=False),
    # The posting's effective time (0004_finance): its commit time, unless that fell in a
    # closed period, then the first instant after it. Periods, exports and reports use it.
    Column("effective_ms", BigInteger, nullable=False),
    CheckConstraint("amount > 0", name="ck_postings_amount_positive"),
    CheckConstraint("from_account <> to_account", name="ck_postings_distinct_accounts"),
)

# Append-only (migration 0002 adds triggers refusing UPDATE and DELETE): what operators did.
admin_audit = Table(
    "admin_audit",
    metadata,
    Column("id", _Id, primary_key=True, autoincrement=True),
    Column("created_ms", BigInteger, nullable=False),
    Column("admin_id", String(120), nullable=False),
    Column("action", String(16), nullable=False),
    Column("player_id", String(100), nullable=True),
    Column("table_id", String(100), nullable=True),
    Column("amount", BigInteger, nullable=False, server_default="0"),
    Column("reason", Text, nullable=False),
    Column("ticket", String(100), nullable=False),
    Column("request_id", String(200), nullable=False),
    Column("batch_id", _Id, ForeignKey("batches.id"), nullable=True),
    Column("details", Text, nullable=False, server_default="{}"),
)

Index("ix_admin_audit_request", admin_audit.c.request_id, admin_audit.c.action, unique=True)
Index("ix_admin_audit_player", admin_audit.c.player_id, admin_audit.c.id)
Index("ix_admin_audit_table", admin_audit.c.table_id, admin_audit.c.id)

Index("ix_postings_batch", postings.c.batch_id, postings.c.seq, unique=True)
Index("ix_postings_from", postings.c.from_account, postings.c.id)
Index("ix_postings_to", postings.c.to_account, postings.c.id)
Index("ix_postings_table_round", postings.c.table_id, postings.c.round)
Index("ix_postings_created", postings.c.created_ms, postings.c.id)
Index("ix_postings_effective", postings.c.effective_ms, postings.c.id)

# What each reconciliation (ledger consistency, drift against live tables) found (0003_i24).
reconciliation_runs = Table(
    "reconciliation_runs",
    metadata,
    Column("id", _Id, primary_key=True, autoincrement=True),
    Column("kind", String(16), nullable=False),
    Column("scope", String(200), nullable=False),
    Column("source", String(40), nullable=False),
    Column("started_ms", BigInteger, nullable=False),
    Column("duration_ms", BigInteger, nullable=False),
    Column("ok", Boolean, nullable=False),
    Column("discrepancies", BigInteger, nullable=False),
    Column("result", Text, nullable=False),
    # 0004_finance: who ran it as authenticated (an operator's subject, a workload, or the
    # database role that wrote it), and the chain head it saw.
    Column("identity", String(200), nullable=True),
    Column("chain_seq", BigInteger, nullable=True),
    Column("chain_hash", String(64), nullable=True),
)
Index("ix_reconciliation_runs_kind", reconciliation_runs.c.kind, reconciliation_runs.c.id)

# The tamper-evident chain (0004_finance, ``services/wallet/chain.py``): one entry per batch,
# in commit order, insert-only.
ledger_chain = Table(
    "ledger_chain",
    metadata,
    Column("seq", _Id, primary_key=True, autoincrement=False),
    Column("batch_id", _Id, nullable=False, unique=True),
    Column("digest", String(64), nullable=False),
    Column("hash", String(64), nullable=False),
    Column("created_ms", BigInteger, nullable=False),
)

# One row: the chain's last entry, and the first instant not in a closed period. Batches lock
# it last, so appending to the chain and closing a period are serialised.
ledger_chain_head = Table(
    "ledger_chain_head",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("seq", BigInteger, nullable=False),
    Column("hash", String(64), nullable=False),
    Column("closed_until_ms", BigInteger, nullable=False),
    Column("created_ms", BigInteger, nullable=False),
)

# Closed months (0004_finance), insert-only: what was closed, by whom, and the chain head then.
closed_periods = Table(
    "closed_periods",
    metadata,
    Column("month", String(7), primary_key=True),
    Column("since_ms", BigInteger, nullable=False),
    Column("until_ms", BigInteger, nullable=False),
    Column("closed_ms", BigInteger, nullable=False),
    Column("closed_by", String(200), nullable=False),
    Column("request_id", String(200), nullable=False),
    Column("chain_seq", BigInteger, nullable=False),
    Column("chain_hash", String(64), nullable=False),
)
