"""A store's partitioner (`venice store create/update --partitioner-class --partitioner-param`): its class path and
params as JSON (NULL: the default partitioner, MD5). A version pins its own in its details.

Revision ID: 0012
Revises: 0011
"""

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("stores") as batch:
        batch.add_column(sa.Column("partitioner", sa.JSON, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("stores") as batch:
        batch.drop_column("partitioner")
