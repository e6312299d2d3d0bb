"""Initial schema: Ironic's nodes, ports, portgroups, node_traits, node_inventory,
inspection_rules, plus nodes.auto_discovered.

Revision ID: 0001_initial
Revises:
Create Date: 2026-11-21
"""

import sqlalchemy as sa
from alembic import op

from inspection.db.types import JsonEncodedDict, JsonEncodedList

revision = "0001_initial"
down_revision = None


def _timestamps() -> list[sa.Column]:
    return [sa.Column("created_at", sa.DateTime), sa.Column("updated_at", sa.DateTime)]


def upgrade() -> None:
    op.create_table(
        "nodes",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("uuid", sa.String(36), nullable=False),
        sa.Column("name", sa.String(255)),
        sa.Column("driver", sa.String(255)),
        sa.Column("driver_info", JsonEncodedDict()),
        sa.Column("driver_internal_info", JsonEncodedDict()),
        sa.Column("properties", JsonEncodedDict()),
        sa.Column("extra", JsonEncodedDict()),
        sa.Column("instance_info", JsonEncodedDict(mysql_as_long=True)),
        sa.Column("provision_state", sa.String(15)),
        sa.Column("target_provision_state", sa.String(15)),
        sa.Column("inspect_interface", sa.String(255)),
        sa.Column("reservation", sa.String(255)),
        sa.Column("last_error", sa.Text),
        sa.Column("maintenance", sa.Boolean),
        sa.Column("inspection_started_at", sa.DateTime),
        sa.Column("inspection_finished_at", sa.DateTime),
        sa.Column("conductor_group", sa.String(255), nullable=False, server_default=""),
        sa.Column("resource_class", sa.String(80)),
        sa.Column("auto_discovered", sa.Boolean, server_default=sa.false()),
        *_timestamps(),
        sa.UniqueConstraint("uuid", name="uniq_nodes0uuid"),
        sa.UniqueConstraint("name", name="uniq_nodes0name"),
    )
    op.create_index("provision_state_idx", "nodes", ["provision_state"])
    op.create_index("reservation_idx", "nodes", ["reservation"])

    op.create_table(
        "portgroups",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("uuid", sa.String(36), nullable=False),
        sa.Column("name", sa.String(255)),
        sa.Column("node_id", sa.Integer, sa.ForeignKey("nodes.id", ondelete="CASCADE")),
        sa.Column("address", sa.String(18)),
        sa.Column("extra", JsonEncodedDict()),
        sa.Column("internal_info", JsonEncodedDict()),
        sa.Column("properties", JsonEncodedDict()),
        sa.Column("mode", sa.String(255)),
        sa.Column("standalone_ports_supported", sa.Boolean),
        *_timestamps(),
        sa.UniqueConstraint("uuid", name="uniq_portgroups0uuid"),
        sa.UniqueConstraint("address", name="uniq_portgroups0address"),
        sa.UniqueConstraint("node_id", "name", name="uniq_portgroups0nodeid0name"),
    )

    op.create_table(
        "ports",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("uuid", sa.String(36), nullable=False),
        sa.Column("address", sa.String(18)),
        sa.Column("node_id", sa.Integer, sa.ForeignKey("nodes.id", ondelete="CASCADE")),
        sa.Column("pxe_enabled", sa.Boolean),
        sa.Column("extra", JsonEncodedDict()),
        sa.Column("local_link_connection", JsonEncodedDict()),
        sa.Column("physical_network", sa.String(64)),
        sa.Column("portgroup_id", sa.Integer, sa.ForeignKey("portgroups.id")),
        sa.Column("internal_info", JsonEncodedDict()),
        *_timestamps(),
        sa.UniqueConstraint("address", name="uniq_ports0address"),
        sa.UniqueConstraint("uuid", name="uniq_ports0uuid"),
    )
    op.create_index("ports_node_id_idx", "ports", ["node_id"])

    op.create_table(
        "node_traits",
        sa.Column("node_id", sa.Integer, sa.ForeignKey("nodes.id", ondelete="CASCADE"),
                  primary_key=True),
        sa.Column("trait", sa.String(255), primary_key=True),
        *_timestamps(),
    )
    op.create_index("node_traits_idx", "node_traits", ["trait"])

    op.create_table(
        "node_inventory",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("inventory_data", JsonEncodedDict(mysql_as_long=True)),
        sa.Column("plugin_data", JsonEncodedDict(mysql_as_long=True)),
        sa.Column("node_id", sa.Integer, sa.ForeignKey("nodes.id", ondelete="CASCADE")),
        *_timestamps(),
    )
    op.create_index("inventory_node_id_idx", "node_inventory", ["node_id"])

    op.create_table(
        "inspection_rules",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("uuid", sa.String(36), nullable=False),
        sa.Column("priority", sa.Integer, nullable=False, server_default="0"),
        sa.Column("description", sa.String(255)),
        sa.Column("scope", sa.String(255)),
        sa.Column("sensitive", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("phase", sa.String(16), nullable=False, server_default="main"),
        sa.Column("conditions", JsonEncodedList()),
        sa.Column("actions", JsonEncodedList()),
        *_timestamps(),
        sa.UniqueConstraint("uuid", name="uniq_inspection_rules0uuid"),
    )
    op.create_index("inspection_rules_scope_idx", "inspection_rules", ["scope"])
    op.create_index("inspection_rules_phase_idx", "inspection_rules", ["phase"])
