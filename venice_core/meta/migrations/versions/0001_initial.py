"""Stores, value schemas, versions, per-region version status and current versions.

Revision ID: 0001
Revises:
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "stores",
        sa.Column("name", sa.String(128), primary_key=True),
        sa.Column("key_schema", sa.Text(), nullable=False),
        sa.Column("partition_count", sa.Integer(), nullable=False),
        sa.Column("compression", sa.String(32), nullable=False),
        sa.Column("rollout_order", sa.JSON(), nullable=False),
        sa.Column("auto_register_schemas", sa.Boolean(), nullable=False),
        sa.Column("versions_to_preserve", sa.Integer(), nullable=False),
        sa.Column("hook_configs", sa.JSON(), nullable=False),
        sa.Column("largest_used_version", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
    )
    op.create_table(
        "value_schemas",
        sa.Column("store_name", sa.String(128), sa.ForeignKey("stores.name", ondelete="CASCADE"), primary_key=True),
        sa.Column("schema_id", sa.Integer(), primary_key=True),
        sa.Column("schema", sa.Text(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
    )
    op.create_table(
        "versions",
        sa.Column("store_name", sa.String(128), sa.ForeignKey("stores.name", ondelete="CASCADE"), primary_key=True),
        sa.Column("number", sa.Integer(), primary_key=True),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("partition_count", sa.Integer(), nullable=False),
        sa.Column("compression", sa.String(32), nullable=False),
        sa.Column("push_job_id", sa.String(128), nullable=True),
        sa.Column("details", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
    )
    op.create_table(
        "version_region_status",
        sa.Column("store_name", sa.String(128), primary_key=True),
        sa.Column("number", sa.Integer(), primary_key=True),
        sa.Column("region", sa.String(64), primary_key=True),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("details", sa.Text(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
    )
    op.create_table(
        "region_current_version",
        sa.Column("store_name", sa.String(128), sa.ForeignKey("stores.name", ondelete="CASCADE"), primary_key=True),
        sa.Column("region", sa.String(64), primary_key=True),
        sa.Column("current_version", sa.Integer(), nullable=False),
        sa.Column("backup_version", sa.Integer(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
    )


def downgrade() -> None:
    for table in ("region_current_version", "version_region_status", "versions", "value_schemas", "stores"):
        op.drop_table(table)
