"""A store's scheduled repush (`venice store update --repush-schedule --repush-ttl`): cron or `daily`, the
threshold in seconds and the working-hours calendar, as JSON (NULL: no scheduled repush).

Revision ID: 0008
Revises: 0007
"""

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("stores") as batch:
        batch.add_column(sa.Column("repush_schedule", sa.JSON, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("stores") as batch:
        batch.drop_column("repush_schedule")
