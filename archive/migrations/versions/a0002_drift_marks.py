"""The drift check's watermark, and the index its window is read by.

Revision ID: a0002
Revises: a0001
Create Date: 2026-12-07

``archive_drift_marks`` holds, per check, the end of the window its last clean run read
(workers/drift_archive.py); ``archive_phases_archived`` lets a run read only the phases
archived after it.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "a0002"
down_revision = "a0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create the watermark table and the index on when each phase was archived."""
    op.create_table(
        "archive_drift_marks",
        sa.Column("name", sa.String(32), nullable=False),
        sa.Column("until_ms", sa.BigInteger, nullable=False),
        sa.Column("updated_ms", sa.BigInteger, nullable=False),
        sa.PrimaryKeyConstraint("name", name="archive_drift_marks_pkey"),
    )
    op.create_index("archive_phases_archived", "archive_phases", ["archived_ms"])


def downgrade() -> None:
    op.drop_index("archive_phases_archived", table_name="archive_phases")
    op.drop_table("archive_drift_marks")
