"""Indexes on the hardware identity stored in ``nodes.extra`` (see inspection.identity), so
that finding a machine by its serial number, system UUID or BMC MAC is an index lookup.

SQLite and PostgreSQL: a partial expression index per key; no column changes. MariaDB indexes no
expression: an INVISIBLE virtual column per key (its first 255 characters) with an index;
``SELECT *`` does not show it and nothing writes it, so Ironic's code is unaffected. (This
migration never runs on a database that ironic-dbsync created: see inspection.db.migration.)

Revision ID: 0007_hardware_identity_index
Revises: 0006_chassis
Create Date: 2026-11-27
"""

from alembic import op

from inspection.identity import COLUMN_LENGTH, EXTRA_KEY, KEYS, column_name, key_expression

revision = "0007_hardware_identity_index"
down_revision = "0006_chassis"


def _index(key: str) -> str:
    return f"nodes_hardware_{key}_idx"


def upgrade() -> None:
    """One index per identity key."""
    dialect = op.get_bind().dialect.name
    for key in KEYS:
        if dialect == "mysql":
            op.execute(f"ALTER TABLE nodes ADD COLUMN {column_name(key)} "
                       f"VARCHAR({COLUMN_LENGTH}) AS (LEFT(JSON_VALUE(extra, "
                       f"'$.{EXTRA_KEY}.{key}'), {COLUMN_LENGTH})) VIRTUAL INVISIBLE")
            op.execute(f"CREATE INDEX {_index(key)} ON nodes ({column_name(key)})")
        else:
            # Partial: most nodes lack some key, and statistics that count their NULLs
            # would make SQLite's planner prefer a scan.
            expression = str(key_expression(dialect, key)).replace("nodes.extra", "extra")
            op.execute(f"CREATE INDEX {_index(key)} ON nodes (({expression})) "
                       f"WHERE {expression} IS NOT NULL")


def downgrade() -> None:
    """Drop them."""
    dialect = op.get_bind().dialect.name
    for key in KEYS:
        if dialect == "mysql":
            op.execute(f"DROP INDEX {_index(key)} ON nodes")
            op.execute(f"ALTER TABLE nodes DROP COLUMN {column_name(key)}")
        else:
            op.execute(f"DROP INDEX {_index(key)}")
