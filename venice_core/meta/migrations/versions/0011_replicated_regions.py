"""Replicated regions: region-server instances and their leases, replicas of each partition and their status, the
leader of each partition and its epoch, the region coordinator's lease, and a store's replication factor.

Revision ID: 0011
Revises: 0010
"""

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("stores") as batch:
        batch.add_column(sa.Column("replication_factor", sa.Integer, nullable=True))
    op.create_table(
        "region_instances",
        sa.Column("region", sa.String(64), primary_key=True),
        sa.Column("instance", sa.Integer, primary_key=True),
        sa.Column("host", sa.String(255), nullable=False),
        sa.Column("port", sa.Integer, nullable=False),
        sa.Column("owner", sa.String(255), nullable=False),
        sa.Column("pid", sa.Integer, nullable=False),
        sa.Column("started_at", sa.Float, nullable=False),
        sa.Column("heartbeat_at", sa.Float, nullable=False),
        sa.Column("spare", sa.JSON, nullable=False),
    )
    op.create_table(
        "replicas",
        sa.Column("store_name", sa.String(128), primary_key=True),
        sa.Column("number", sa.Integer, primary_key=True),
        sa.Column("region", sa.String(64), primary_key=True),
        sa.Column("partition", sa.Integer, primary_key=True),
        sa.Column("instance", sa.Integer, primary_key=True),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("offset", sa.Integer, nullable=False),
        sa.Column("records", sa.Integer, nullable=False),
        sa.Column("details", sa.Text, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("updated_at", sa.Float, nullable=False),
    )
    op.create_index("ix_replicas_region_instance", "replicas", ["region", "instance"])
    op.create_table(
        "partition_leaders",
        sa.Column("store_name", sa.String(128), primary_key=True),
        sa.Column("number", sa.Integer, primary_key=True),
        sa.Column("region", sa.String(64), primary_key=True),
        sa.Column("partition", sa.Integer, primary_key=True),
        sa.Column("instance", sa.Integer, nullable=False),
        sa.Column("epoch", sa.Integer, nullable=False),
        sa.Column("progress", sa.Integer, nullable=False),
        sa.Column("replicated", sa.Boolean, nullable=False),
        sa.Column("updated_at", sa.Float, nullable=False),
    )
    op.create_table(
        "region_coordinators",
        sa.Column("region", sa.String(64), primary_key=True),
        sa.Column("owner", sa.String(255), nullable=False),
        sa.Column("instance", sa.Integer, nullable=False),
        sa.Column("expires_at", sa.Float, nullable=False),
    )


def downgrade() -> None:
    for table in ("region_coordinators", "partition_leaders", "replicas", "region_instances"):
        op.drop_table(table)
    with op.batch_alter_table("stores") as batch:
        batch.drop_column("replication_factor")
