"""The ledger: accounts, batches, postings, and the bank account.

Revision ID: 0001
Revises:
Create Date: 2026-11-29
"""

from __future__ import annotations

import time

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

_Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    """Create the three tables and open the bank."""
    accounts = op.create_table(
        "accounts",
        sa.Column("id", sa.String(120), primary_key=True),
        sa.Column("kind", sa.String(8), nullable=False),
        sa.Column("balance", sa.BigInteger, nullable=False, server_default="0"),
        sa.Column("created_ms", sa.BigInteger, nullable=False),
        sa.CheckConstraint("kind = 'bank' OR balance >= 0", name="ck_accounts_not_negative"),
        sa.CheckConstraint("kind IN ('player', 'bowl', 'pot', 'bank')", name="ck_accounts_kind"),
    )
    op.create_table(
        "batches",
        sa.Column("id", _Id, primary_key=True, autoincrement=True),
        sa.Column("idempotency_key", sa.String(200), nullable=False, unique=True),
        sa.Column("body_hash", sa.String(64), nullable=False),
        sa.Column("result", sa.Text, nullable=False),
        sa.Column("created_ms", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "postings",
        sa.Column("id", _Id, primary_key=True, autoincrement=True),
        sa.Column("batch_id", _Id, sa.ForeignKey("batches.id"), nullable=False),
        sa.Column("seq", sa.Integer, nullable=False),
        sa.Column("from_account", sa.String(120), sa.ForeignKey("accounts.id"), nullable=False),
        sa.Column("to_account", sa.String(120), sa.ForeignKey("accounts.id"), nullable=False),
        sa.Column("amount", sa.BigInteger, nullable=False),
        sa.Column("reason", sa.String(32), nullable=False),
        sa.Column("table_id", sa.String(100), nullable=True),
        sa.Column("round", sa.Integer, nullable=True),
        sa.Column("phase", sa.String(16), nullable=True),
        sa.Column("created_ms", sa.BigInteger, nullable=False),
        sa.CheckConstraint("amount > 0", name="ck_postings_amount_positive"),
        sa.CheckConstraint("from_account <> to_account", name="ck_postings_distinct_accounts"),
    )
    op.create_index("ix_postings_batch", "postings", ["batch_id", "seq"], unique=True)
    op.create_index("ix_postings_from", "postings", ["from_account", "id"])
    op.create_index("ix_postings_to", "postings", ["to_account", "id"])
    op.create_index("ix_postings_table_round", "postings", ["table_id", "round"])
    op.bulk_insert(
        accounts,
        [{"id": "bank", "kind": "bank", "balance": 0, "created_ms": int(time.time() * 1000)}],
    )


def downgrade() -> None:
    """Drop the ledger (destroys every balance: for development only)."""
    op.drop_table("postings")
    op.drop_table("batches")
    op.drop_table("accounts")
