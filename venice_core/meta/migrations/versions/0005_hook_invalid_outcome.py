"""Hook invocations: the outcome a hook returned that its function may not return, kept apart from its answer.

Revision ID: 0005
Revises: 0004
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("hook_invocations") as batch:
        batch.add_column(sa.Column("invalid_outcome", sa.String(16), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("hook_invocations") as batch:
        batch.drop_column("invalid_outcome")
