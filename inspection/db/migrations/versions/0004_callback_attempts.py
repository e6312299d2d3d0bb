"""Accepted callbacks belong to an inspection attempt, and a node has at most one pending.

``inspection_callbacks.attempt`` holds the node's inspection attempt when the data was
accepted (see :mod:`inspection.attempts`); ``node_uuid`` becomes unique (the newest data
wins, as in Ironic), keeping the newest row of each node on upgrade. The columns nothing
reads are dropped: ``inspection_callbacks.claimed_at`` and ``inspection_processes.started_at``.

Revision ID: 0004_callback_attempts
Revises: 0003_ironic_node_fields
Create Date: 2026-11-25
"""

import logging

import sqlalchemy as sa
from alembic import op

LOG = logging.getLogger("alembic.runtime.migration")

revision = "0004_callback_attempts"
down_revision = "0003_ironic_node_fields"

_rows = sa.table("inspection_callbacks", sa.column("id", sa.Integer),
                 sa.column("node_uuid", sa.String))


def upgrade() -> None:
    # Older rows of a node lose to its newest one (MariaDB refuses a subquery on the table
    # it deletes from, hence the ids read first).
    conn = op.get_bind()
    newest = sa.select(sa.func.max(_rows.c.id)).group_by(_rows.c.node_uuid)
    keep = set(conn.execute(newest).scalars())
    stale = [row_id for row_id in conn.execute(sa.select(_rows.c.id)).scalars()
             if row_id not in keep]
    if stale:
        conn.execute(sa.delete(_rows).where(_rows.c.id.in_(stale)))
        LOG.warning("Deleted %d accepted inspection callback(s) that newer data of the same "
                    "node had replaced (a node keeps only its newest, as in Ironic); their "
                    "nodes are processed from the newest data", len(stale))
    op.drop_index("inspection_callbacks_node_uuid_idx", "inspection_callbacks")
    with op.batch_alter_table("inspection_callbacks") as batch:
        batch.add_column(sa.Column("attempt", sa.String(36)))
        batch.drop_column("claimed_at")
    op.create_index("inspection_callbacks_node_uuid_idx", "inspection_callbacks",
                    ["node_uuid"], unique=True)
    with op.batch_alter_table("inspection_processes") as batch:
        batch.drop_column("started_at")


def downgrade() -> None:
    with op.batch_alter_table("inspection_processes") as batch:
        batch.add_column(sa.Column("started_at", sa.DateTime, nullable=False,
                                   server_default=sa.func.current_timestamp()))
    op.drop_index("inspection_callbacks_node_uuid_idx", "inspection_callbacks")
    with op.batch_alter_table("inspection_callbacks") as batch:
        batch.drop_column("attempt")
        batch.add_column(sa.Column("claimed_at", sa.DateTime))
    op.create_index("inspection_callbacks_node_uuid_idx", "inspection_callbacks",
                    ["node_uuid"])
