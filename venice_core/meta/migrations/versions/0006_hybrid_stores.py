"""Hybrid stores: the rewind time and offset-lag threshold of a store that takes nearline writes (NULL: batch-only).

Revision ID: 0006
Revises: 0005
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("stores") as batch:
        batch.add_column(sa.Column("hybrid_rewind_seconds", sa.Integer, nullable=True))
        batch.add_column(sa.Column("hybrid_offset_lag_threshold", sa.Integer, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("stores") as batch:
        batch.drop_column("hybrid_offset_lag_threshold")
        batch.drop_column("hybrid_rewind_seconds")
