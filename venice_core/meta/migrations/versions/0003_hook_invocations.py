"""Hook invocations, persisted one row per call.

Revision ID: 0003
Revises: 0002
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "hook_invocations",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("store_name", sa.String(128), nullable=False),
        sa.Column("version", sa.Integer(), nullable=True),
        sa.Column("push_job_id", sa.String(128), nullable=True),
        sa.Column("hook_class", sa.String(256), nullable=False),
        sa.Column("function", sa.String(64), nullable=False),
        sa.Column("region", sa.String(64), nullable=True),
        sa.Column("outcome", sa.String(16), nullable=True),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("timed_out", sa.Boolean(), nullable=False),
        sa.Column("queue_wait_seconds", sa.Float(), nullable=False),
        sa.Column("duration_seconds", sa.Float(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
    )
    op.create_index("ix_hook_invocations_store_name", "hook_invocations", ["store_name"])


def downgrade() -> None:
    op.drop_index("ix_hook_invocations_store_name", "hook_invocations")
    op.drop_table("hook_invocations")
