"""The round archive: rounds, their settled phases, and each player's games.

Revision ID: a0001
Revises:
Create Date: 2026-12-06

On PostgreSQL the three tables are partitioned by month (range of their time column) and
this month's partitions and the next three's are created; SQLite gets plain tables.
"""

from __future__ import annotations

import time

import sqlalchemy as sa
from alembic import op

from archive import partitions

revision = "a0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create the tables (partitioned on PostgreSQL) and the months ahead."""
    op.create_table(
        "archive_rounds",
        sa.Column("table_id", sa.String(64), nullable=False),
        sa.Column("round_no", sa.Integer, nullable=False),
        sa.Column("ended_ms", sa.BigInteger, nullable=False),
        sa.Column("game", sa.String(16), nullable=False),
        sa.Column("settled_round", sa.Integer, nullable=False),
        sa.Column("stake", sa.BigInteger, nullable=False),
        sa.Column("players", sa.Text, nullable=False),
        sa.Column("record", sa.LargeBinary, nullable=True),
        sa.Column("results", sa.Text, nullable=False),
        sa.Column("batch_ids", sa.Text, nullable=False),
        sa.Column("archived_ms", sa.BigInteger, nullable=False),
        sa.PrimaryKeyConstraint("table_id", "round_no", "ended_ms", name="archive_rounds_pkey"),
        postgresql_partition_by="RANGE (ended_ms)",
    )
    op.create_table(
        "archive_phases",
        sa.Column("table_id", sa.String(64), nullable=False),
        sa.Column("round_no", sa.Integer, nullable=False),
        sa.Column("phase", sa.String(16), nullable=False),
        sa.Column("created_ms", sa.BigInteger, nullable=False),
        sa.Column("game", sa.String(16), nullable=False),
        sa.Column("batch_id", sa.String(64), nullable=False),
        sa.Column("postings", sa.Text, nullable=False),
        sa.Column("archived_ms", sa.BigInteger, nullable=False),
        sa.PrimaryKeyConstraint(
            "table_id", "round_no", "phase", "created_ms", name="archive_phases_pkey"
        ),
        postgresql_partition_by="RANGE (created_ms)",
    )
    op.create_index("archive_phases_batch", "archive_phases", ["batch_id"])
    op.create_table(
        "archive_player_games",
        sa.Column("player_id", sa.String(120), nullable=False),
        sa.Column("ended_ms", sa.BigInteger, nullable=False),
        sa.Column("table_id", sa.String(64), nullable=False),
        sa.Column("round_no", sa.Integer, nullable=False),
        sa.Column("game", sa.String(16), nullable=False),
        sa.Column("stake", sa.BigInteger, nullable=False),
        sa.Column("seat", sa.Integer, nullable=False),
        sa.Column("seats", sa.Integer, nullable=False),
        sa.Column("net_tokens", sa.BigInteger, nullable=False),
        sa.Column("result", sa.String(8), nullable=False),
        sa.PrimaryKeyConstraint(
            "player_id", "ended_ms", "table_id", "round_no", name="archive_player_games_pkey"
        ),
        postgresql_partition_by="RANGE (ended_ms)",
    )
    partitions.ensure_ahead(op.get_bind(), time.time_ns() // 1_000_000)


def downgrade() -> None:
    op.drop_table("archive_player_games")
    op.drop_index("archive_phases_batch", table_name="archive_phases")
    op.drop_table("archive_phases")
    op.drop_table("archive_rounds")
