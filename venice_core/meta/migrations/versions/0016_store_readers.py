"""Each store's readers: the principals the region servers answer its reads (issue 45).

Revision ID: 0016
Revises: 0015
"""

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "store_readers",
        sa.Column("store_name", sa.String(128), sa.ForeignKey("stores.name", ondelete="CASCADE"), primary_key=True),
        sa.Column("principal", sa.String(255), primary_key=True),
        sa.Column("granted_at", sa.Float, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("store_readers")
