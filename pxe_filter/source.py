"""Read-only view of the node/port database: only the five columns the filter needs.

SQLAlchemy Core on lightweight table stubs, never ORM objects and never writes, so the
daemon also runs against a database created and owned by Ironic.
"""

from collections.abc import Collection
from dataclasses import dataclass, field

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from inspection.db.engine import DatabaseError, describe_url
from pxe_filter.policy import INSPECTION_STATES, nodes_on_inspection

_nodes = sa.table("nodes", sa.column("id"), sa.column("provision_state"),
                  sa.column("inspect_interface"))
_ports = sa.table("ports", sa.column("address"), sa.column("node_id"))

_NODES_QUERY = sa.select(_nodes.c.id, _nodes.c.provision_state,
                         _nodes.c.inspect_interface).where(
    _nodes.c.provision_state.in_(sorted(INSPECTION_STATES)))
_PORTS_QUERY = sa.select(_ports.c.address, _ports.c.node_id)
#: Port rows fetched at a time: the rows are sorted into two sets as they come, never all
#: held as tuples (100k rows would be ~8 MB of tuples and ints at the peak).
_CHUNK = 5000


@dataclass
class Snapshot:
    """Rows read in one transaction: the ids of nodes on inspection (with a supported
    inspect interface) and the raw port addresses, split by whether their node is one."""

    inspecting: set[int]
    on_inspection: set[str | None] = field(default_factory=set)
    others: set[str | None] = field(default_factory=set)


def read_snapshot(engine: Engine, supported_interfaces: Collection[str]) -> Snapshot:
    """Nodes on inspection and every port's address; raises DatabaseError.

    Rows are fetched through the driver's cursor as plain tuples: SQLAlchemy's per-row
    processing would dominate a steady-state sync at 100k ports. On PostgreSQL and MariaDB
    both statements run in one REPEATABLE READ transaction and see the same moment; on
    SQLite they may not, which the next sync and the broadcast ordering make harmless.
    """
    options = {}
    if engine.dialect.name in ("postgresql", "mysql", "mariadb"):
        options["isolation_level"] = "REPEATABLE READ"
    try:
        with engine.connect() as raw_conn:
            conn = raw_conn.execution_options(**options) if options else raw_conn
            with conn.begin():
                cursor = conn.connection.cursor()
                try:
                    cursor.execute(_compiled(engine, _NODES_QUERY))
                    snap = Snapshot(nodes_on_inspection(cursor.fetchall(),
                                                        supported_interfaces))
                    cursor.execute(_compiled(engine, _PORTS_QUERY))
                    _split_ports(cursor, snap)
                finally:
                    cursor.close()
    except (sa.exc.SQLAlchemyError, engine.dialect.loaded_dbapi.Error) as exc:
        reason = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0]
        raise DatabaseError(f"cannot read nodes and ports from {describe_url(engine.url)}: "
                            f"{reason}") from None
    return snap


def _compiled(engine: Engine, query: sa.Select) -> str:
    # Literal binds: the only parameters are our own constant state names.
    return str(query.compile(dialect=engine.dialect, compile_kwargs={"literal_binds": True}))


def _split_ports(cursor, snap: Snapshot) -> None:
    inspecting = snap.inspecting
    while rows := cursor.fetchmany(_CHUNK):
        if inspecting:
            snap.on_inspection.update(address for address, node_id in rows
                                      if node_id in inspecting)
            snap.others.update(address for address, node_id in rows
                               if node_id not in inspecting)
        else:
            snap.others.update(address for address, _ in rows)
