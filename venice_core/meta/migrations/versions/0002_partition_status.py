"""Per-partition ingestion status, reported by region servers.

Revision ID: 0002
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "partition_status",
        sa.Column("store_name", sa.String(128), primary_key=True),
        sa.Column("number", sa.Integer(), primary_key=True),
        sa.Column("region", sa.String(64), primary_key=True),
        sa.Column("partition", sa.Integer(), primary_key=True),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("offset", sa.Integer(), nullable=False),
        sa.Column("records", sa.Integer(), nullable=False),
        sa.Column("details", sa.Text(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("partition_status")
