"""A store's scheduled push (`venice store update --push-schedule --push-input`): cron or `daily`, the input
template and the working-hours calendar, as JSON (NULL: no scheduled push).

Revision ID: 0010
Revises: 0009
"""

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("stores") as batch:
        batch.add_column(sa.Column("push_schedule", sa.JSON, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("stores") as batch:
        batch.drop_column("push_schedule")
