"""Ironic's node fields that operators set and clients show: owner and lessee (project
scoping), description, the hardware interfaces, power state, protection, retirement, shard and
parent node. Names, types and indexes are Ironic's, so an Ironic database already has them.

Revision ID: 0003_ironic_node_fields
Revises: 0002_inspection_callbacks
Create Date: 2026-11-25
"""

import sqlalchemy as sa
from alembic import op

from inspection.db.types import JsonEncodedDict

revision = "0003_ironic_node_fields"
down_revision = "0002_inspection_callbacks"

_INTERFACES = ("bios", "boot", "console", "deploy", "firmware", "management", "network",
               "power", "raid", "rescue", "storage", "vendor")


def _columns() -> list[sa.Column]:
    return [
        sa.Column("instance_uuid", sa.String(36)),
        sa.Column("power_state", sa.String(15)),
        sa.Column("target_power_state", sa.String(15)),
        sa.Column("maintenance_reason", sa.Text),
        sa.Column("fault", sa.String(255)),
        sa.Column("protected", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("protected_reason", sa.Text),
        sa.Column("retired", sa.Boolean, server_default=sa.false()),
        sa.Column("retired_reason", sa.Text),
        sa.Column("owner", sa.String(255)),
        sa.Column("lessee", sa.String(255)),
        sa.Column("description", sa.Text),
        sa.Column("shard", sa.String(255)),
        sa.Column("parent_node", sa.String(36)),
        sa.Column("network_data", JsonEncodedDict()),
        sa.Column("boot_mode", sa.String(16)),
        sa.Column("secure_boot", sa.Boolean),
        sa.Column("automated_clean", sa.Boolean),
        sa.Column("disable_power_off", sa.Boolean, server_default=sa.false()),
        *(sa.Column(f"{name}_interface", sa.String(255)) for name in _INTERFACES),
    ]


_INDEXES = {"owner_idx": "owner", "lessee_idx": "lessee",
            "conductor_group_idx": "conductor_group", "shard_idx": "shard",
            "parent_node_idx": "parent_node"}


def upgrade() -> None:
    # batch mode: SQLite cannot add a NOT NULL column with a default otherwise.
    with op.batch_alter_table("nodes") as batch:
        for column in _columns():
            batch.add_column(column)
    for name, column in _INDEXES.items():
        op.create_index(name, "nodes", [column])


def downgrade() -> None:
    for name in _INDEXES:
        op.drop_index(name, "nodes")
    with op.batch_alter_table("nodes") as batch:
        for column in reversed(_columns()):
            batch.drop_column(column.name)
