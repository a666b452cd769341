"""Finance: the reconciliation run records, and the indexes exports and reports read by.

Revision ID: 0003_i24
Revises: 0002
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003_i24"
down_revision = "0002"
branch_labels = None
depends_on = None

_Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    """Create ``reconciliation_runs``; index postings by commit time (exports, as-of reads)."""
    op.create_table(
        "reconciliation_runs",
        sa.Column("id", _Id, primary_key=True, autoincrement=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("scope", sa.String(200), nullable=False),
        sa.Column("source", sa.String(40), nullable=False),
        sa.Column("started_ms", sa.BigInteger, nullable=False),
        sa.Column("duration_ms", sa.BigInteger, nullable=False),
        sa.Column("ok", sa.Boolean, nullable=False),
        sa.Column("discrepancies", sa.BigInteger, nullable=False),
        sa.Column("result", sa.Text, nullable=False),
    )
    op.create_index("ix_reconciliation_runs_kind", "reconciliation_runs", ["kind", "id"])
    # Exports walk a period in (created_ms, id) order; as-of and period reports range on it.
    op.create_index("ix_postings_created", "postings", ["created_ms", "id"])


def downgrade() -> None:
    """Drop them again (development only)."""
    op.drop_index("ix_postings_created", table_name="postings")
    op.drop_table("reconciliation_runs")
