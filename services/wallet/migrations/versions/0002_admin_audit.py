"""The append-only audit log of operators' actions (AdminService).

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

_Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

_POSTGRES_GUARD = (
    """
    CREATE FUNCTION admin_audit_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      RAISE EXCEPTION 'admin_audit is append-only: % refused', TG_OP;
    END $$
    """,
    """
    CREATE TRIGGER admin_audit_no_update BEFORE UPDATE OR DELETE ON admin_audit
      FOR EACH ROW EXECUTE FUNCTION admin_audit_append_only()
    """,
    """
    CREATE TRIGGER admin_audit_no_truncate BEFORE TRUNCATE ON admin_audit
      FOR EACH STATEMENT EXECUTE FUNCTION admin_audit_append_only()
    """,
)


def upgrade() -> None:
    """Create ``admin_audit`` and make it refuse UPDATE and DELETE."""
    op.create_table(
        "admin_audit",
        sa.Column("id", _Id, primary_key=True, autoincrement=True),
        sa.Column("created_ms", sa.BigInteger, nullable=False),
        sa.Column("admin_id", sa.String(120), nullable=False),
        sa.Column("action", sa.String(16), nullable=False),
        sa.Column("player_id", sa.String(100), nullable=True),
        sa.Column("table_id", sa.String(100), nullable=True),
        sa.Column("amount", sa.BigInteger, nullable=False, server_default="0"),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("ticket", sa.String(100), nullable=False),
        sa.Column("request_id", sa.String(200), nullable=False),
        sa.Column("batch_id", _Id, sa.ForeignKey("batches.id"), nullable=True),
        sa.Column("details", sa.Text, nullable=False, server_default="{}"),
    )
    op.create_index("ix_admin_audit_request", "admin_audit", ["request_id", "action"], unique=True)
    op.create_index("ix_admin_audit_player", "admin_audit", ["player_id", "id"])
    op.create_index("ix_admin_audit_table", "admin_audit", ["table_id", "id"])
    if op.get_bind().dialect.name == "postgresql":
        for statement in _POSTGRES_GUARD:
            op.execute(statement)
    else:
        for verb in ("UPDATE", "DELETE"):
            op.execute(
                f"CREATE TRIGGER admin_audit_no_{verb.lower()} BEFORE {verb} ON admin_audit "
                f"BEGIN SELECT RAISE(ABORT, 'admin_audit is append-only: {verb} refused'); END"
            )


def downgrade() -> None:
    """Drop the audit log (development only)."""
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TABLE admin_audit")
        op.execute("DROP FUNCTION admin_audit_append_only()")
    else:
        op.drop_table("admin_audit")
