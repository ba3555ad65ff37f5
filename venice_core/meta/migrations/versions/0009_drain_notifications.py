"""Drain (issue 13): drain notifications per pipeline, and each pipeline's last drain.

Revision ID: 0009
Revises: 0008
"""

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "drain_notifications",
        sa.Column("uuid", sa.String(36), primary_key=True),
        sa.Column("pipeline", sa.String(128), nullable=False),
        sa.Column("payload", sa.Text(), nullable=False),
        sa.Column("timeout_seconds", sa.Float(), nullable=True),
        sa.Column("created_at", sa.Float(), nullable=False),
    )
    op.create_index("ix_drain_notifications_pipeline", "drain_notifications", ["pipeline"])
    with op.batch_alter_table("stream_pipelines") as batch:
        batch.add_column(sa.Column("drain", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("stream_pipelines") as batch:
        batch.drop_column("drain")
    op.drop_index("ix_drain_notifications_pipeline", "drain_notifications")
    op.drop_table("drain_notifications")
