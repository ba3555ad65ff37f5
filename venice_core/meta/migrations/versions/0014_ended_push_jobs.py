"""Push jobs that have ended, whatever became of them (a version or none): a rollout run an operator clears in
Airflow afterwards runs nothing of its push again.

Revision ID: 0014
Revises: 0013
"""

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "ended_push_jobs",
        sa.Column("push_job_id", sa.String(128), primary_key=True),
        sa.Column("store_name", sa.String(128), nullable=False, index=True),
        sa.Column("reason", sa.Text, nullable=False, server_default=""),
        sa.Column("ended_at", sa.Float, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("ended_push_jobs")
