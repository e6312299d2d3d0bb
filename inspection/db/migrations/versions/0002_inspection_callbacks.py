"""Accepted callbacks and the heartbeats of the processes that process them (tables of this
service only; Ironic's schema is unchanged).

Revision ID: 0002_inspection_callbacks
Revises: 0001_initial
Create Date: 2026-11-25
"""

import sqlalchemy as sa
from alembic import op

from inspection.db.types import JsonEncodedDict

revision = "0002_inspection_callbacks"
down_revision = "0001_initial"


def upgrade() -> None:
    op.create_table(
        "inspection_callbacks",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("node_uuid", sa.String(36), nullable=False),
        sa.Column("data", JsonEncodedDict(mysql_as_long=True), nullable=False),
        sa.Column("created_at", sa.DateTime, nullable=False),
        sa.Column("owner", sa.String(255)),
        sa.Column("claim", sa.String(36)),
        sa.Column("claimed_at", sa.DateTime),
        sa.Column("retry_at", sa.DateTime),
        sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),
    )
    op.create_index("inspection_callbacks_owner_idx", "inspection_callbacks", ["owner"])
    op.create_index("inspection_callbacks_node_uuid_idx", "inspection_callbacks",
                    ["node_uuid"])
    op.create_table(
        "inspection_processes",
        sa.Column("host", sa.String(255), primary_key=True),
        sa.Column("started_at", sa.DateTime, nullable=False),
        sa.Column("heartbeat_at", sa.DateTime, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("inspection_processes")
    op.drop_index("inspection_callbacks_node_uuid_idx", "inspection_callbacks")
    op.drop_index("inspection_callbacks_owner_idx", "inspection_callbacks")
    op.drop_table("inspection_callbacks")
