"""Nodes and ports written straight into the database the filter reads, as Ironic would."""

import io
import uuid

import sqlalchemy as sa

from inspection.db.models import Node, Port
from pxe_filter.common.database import create_engine


def add_node(url: str, state: str, macs: list[str], conductor_group: str = "",
             shard: str | None = None) -> int:
    """A node in ``state`` (agent inspection) with one port per MAC; its id."""
    engine = create_engine(url)
    with engine.begin() as conn:
        node = conn.execute(sa.insert(Node).values(
            uuid=str(uuid.uuid4()), provision_state=state, inspect_interface="agent",
            conductor_group=conductor_group, shard=shard)).inserted_primary_key[0]
        conn.execute(sa.insert(Port), [{"uuid": str(uuid.uuid4()), "address": mac,
                                        "node_id": node} for mac in macs])
    engine.dispose()
    return node


def set_state(url: str, node: int, state: str) -> None:
    """Move ``node`` to ``state``, as Ironic would."""
    engine = create_engine(url)
    with engine.begin() as conn:
        conn.execute(sa.update(Node).where(Node.id == node).values(provision_state=state))
    engine.dispose()


def bulk_mac(index: int) -> str:
    """The MAC of port number ``index`` of :func:`fill`."""
    raw = 0x525400000000 + index
    return ":".join(f"{(raw >> shift) & 0xFF:02x}" for shift in range(40, -8, -8))


def fill(url: str, ports: int) -> None:
    """``ports`` ports, two a node (ids 1..ports/2, all 'active'), in a migrated, empty
    PostgreSQL or MariaDB database: COPY or multi-row INSERTs (seconds, not minutes).
    Port ``p`` has MAC :func:`bulk_mac` (p) and belongs to node (p + 1) // 2."""
    engine = create_engine(url)
    created = "2026-01-01 00:00:00"
    nodes = [(n, str(uuid.UUID(int=n)), "active", "agent", "", created, False)
             for n in range(1, ports // 2 + 1)]
    rows = [(p, str(uuid.UUID(int=10**9 + p)), bulk_mac(p), (p + 1) // 2, created)
            for p in range(1, ports + 1)]
    node_sql = "nodes (id, uuid, provision_state, inspect_interface, conductor_group, " \
               "created_at, protected)"
    port_sql = "ports (id, uuid, address, node_id, created_at)"
    raw = engine.raw_connection()
    try:
        cursor = raw.cursor()
        if engine.dialect.name == "postgresql":
            for sql, values in ((node_sql, nodes), (port_sql, rows)):
                text = "".join("\t".join("f" if v is False else str(v) for v in row) + "\n"
                               for row in values)
                cursor.copy_expert(f"COPY {sql} FROM STDIN", io.StringIO(text))
            cursor.execute(f"SELECT setval('nodes_id_seq', {len(nodes)}), "
                           f"setval('ports_id_seq', {ports})")
        else:  # PyMySQL turns executemany of one INSERT ... VALUES into multi-row INSERTs
            for sql, values in ((node_sql, nodes), (port_sql, rows)):
                marks = ", ".join(["%s"] * len(values[0]))
                for start in range(0, len(values), 20000):
                    cursor.executemany(f"INSERT INTO {sql} VALUES ({marks})",
                                       values[start:start + 20000])
        raw.commit()
        cursor.execute("ANALYZE TABLE nodes, ports" if engine.dialect.name != "postgresql"
                       else "ANALYZE nodes, ports")
        raw.commit()
    finally:
        raw.close()
    engine.dispose()
