"""Indexes on the hardware identity stored in ``nodes.extra`` (see inspection.identity), so
that finding a machine by its serial number, system UUID or BMC MAC is an index lookup.

Expression indexes only: no column of Ironic's schema changes, and Ironic ignores them.
SQLite and PostgreSQL index JSON expressions; MariaDB cannot without adding a column to
``nodes``, so there the lookup reads the nodes table (never the stored inventories).

Revision ID: 0006_hardware_identity_index
Revises: 0005_bounds_callback_size
Create Date: 2026-11-27
"""

from alembic import op

from inspection.identity import KEYS, key_expression

revision = "0006_hardware_identity_index"
down_revision = "0005_bounds_callback_size"

_DIALECTS = ("sqlite", "postgresql")


def _name(key: str) -> str:
    return f"nodes_hardware_{key}_idx"


def upgrade() -> None:
    """Create one index per identity key where the backend indexes expressions."""
    dialect = op.get_bind().dialect.name
    if dialect not in _DIALECTS:
        return
    for key in KEYS:
        expression = str(key_expression(dialect, key)).replace("nodes.extra", "extra")
        op.execute(f"CREATE INDEX {_name(key)} ON nodes (({expression}))")


def downgrade() -> None:
    """Drop them."""
    if op.get_bind().dialect.name not in _DIALECTS:
        return
    for key in KEYS:
        op.execute(f"DROP INDEX {_name(key)}")
