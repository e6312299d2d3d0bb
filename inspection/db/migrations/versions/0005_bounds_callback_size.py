"""The size of each accepted callback, so that the total stored can be capped without
reading the data ([processing]max_pending_bytes).

Revision ID: 0005_bounds_callback_size
Revises: 0004_callback_attempts
Create Date: 2026-11-25
"""

import sqlalchemy as sa
from alembic import op

revision = "0005_bounds_callback_size"
down_revision = "0004_callback_attempts"


def upgrade() -> None:
    """Add ``inspection_callbacks.data_size`` (bytes of JSON; 0 for older rows)."""
    with op.batch_alter_table("inspection_callbacks") as batch:
        batch.add_column(sa.Column("data_size", sa.Integer, nullable=False,
                                   server_default=sa.text("0")))


def downgrade() -> None:
    """Drop the column."""
    with op.batch_alter_table("inspection_callbacks") as batch:
        batch.drop_column("data_size")
