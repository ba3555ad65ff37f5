"""Da Vinci instances: the version each one serves, which the rollout waits on before a region's server swap
(VIP-4: the region's clients swap first).

Revision ID: 0013
Revises: 0012
"""

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("da_vinci_instances") as batch:
        batch.add_column(sa.Column("serving", sa.Integer(), nullable=False, server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("da_vinci_instances") as batch:
        batch.drop_column("serving")
