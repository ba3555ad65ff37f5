"""Da Vinci instances: the clients the rollout waits for in each region.

Revision ID: 0004
Revises: 0003
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "da_vinci_instances",
        sa.Column("store_name", sa.String(128), sa.ForeignKey("stores.name", ondelete="CASCADE"), primary_key=True),
        sa.Column("region", sa.String(64), primary_key=True),
        sa.Column("instance_id", sa.String(128), primary_key=True),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("heartbeat_at", sa.Float(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("da_vinci_instances")
