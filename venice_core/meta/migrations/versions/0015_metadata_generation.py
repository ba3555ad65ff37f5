"""The metadata store's generation: one row whose number each committed change bumps (but a lease's renewal), so that
a region server reads the rest only when it moved.

Revision ID: 0015
Revises: 0014
"""

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    table = op.create_table(
        "metadata_generation",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("generation", sa.BigInteger, nullable=False),
    )
    op.bulk_insert(table, [{"id": 1, "generation": 0}])


def downgrade() -> None:
    op.drop_table("metadata_generation")
