"""Ironic's chassis: the ``chassis`` table and ``nodes.chassis_id``, with Ironic's names, so
that tempest's fixtures (and operators) can group nodes as in Ironic.

Revision ID: 0006_chassis
Revises: 0005_bounds_callback_size
Create Date: 2026-11-27
"""

import sqlalchemy as sa
from alembic import op

from inspection.db.types import JsonEncodedDict

revision = "0006_chassis"
down_revision = "0005_bounds_callback_size"


def upgrade() -> None:
    """Create ``chassis`` and add ``nodes.chassis_id`` referring to it."""
    op.create_table(
        "chassis",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("uuid", sa.String(36), nullable=False),
        sa.Column("extra", JsonEncodedDict()),
        sa.Column("description", sa.String(255)),
        sa.Column("created_at", sa.DateTime),
        sa.Column("updated_at", sa.DateTime),
        sa.UniqueConstraint("uuid", name="uniq_chassis0uuid"),
    )
    with op.batch_alter_table("nodes") as batch:
        batch.add_column(sa.Column("chassis_id", sa.Integer))
        batch.create_foreign_key("nodes_chassis_id_fkey", "chassis", ["chassis_id"], ["id"])


def downgrade() -> None:
    """Drop ``nodes.chassis_id`` and ``chassis``."""
    with op.batch_alter_table("nodes") as batch:
        batch.drop_constraint("nodes_chassis_id_fkey", type_="foreignkey")
        batch.drop_column("chassis_id")
    op.drop_table("chassis")
