"""Read-only view of the node/port database: only the five columns the filter needs.

SQLAlchemy Core on lightweight table stubs, never ORM objects and never writes, so the
daemon also runs against a database created and owned by Ironic.
"""

from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from inspection.db.engine import DatabaseError, describe_url
from pxe_filter.policy import INSPECTION_STATES

_nodes = sa.table("nodes", sa.column("id"), sa.column("provision_state"),
                  sa.column("inspect_interface"))
_ports = sa.table("ports", sa.column("address"), sa.column("node_id"))

_NODES_QUERY = sa.select(_nodes.c.id, _nodes.c.provision_state,
                         _nodes.c.inspect_interface).where(
    _nodes.c.provision_state.in_(sorted(INSPECTION_STATES)))
_PORTS_QUERY = sa.select(_ports.c.address, _ports.c.node_id)


@dataclass
class Snapshot:
    """Rows read in one transaction."""

    nodes: list[tuple[int, str | None, str | None]]
    ports: list[tuple[str | None, int | None]]


def read_snapshot(engine: Engine) -> Snapshot:
    """Nodes on inspection and every port; raises DatabaseError.

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
                    nodes = _fetch(cursor, _compiled(engine, _NODES_QUERY))
                    ports = _fetch(cursor, _compiled(engine, _PORTS_QUERY))
                finally:
                    cursor.close()
    except (sa.exc.SQLAlchemyError, engine.dialect.loaded_dbapi.Error) as exc:
        reason = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0]
        raise DatabaseError(f"cannot read nodes and ports from {describe_url(engine.url)}: "
                            f"{reason}") from None
    return Snapshot(nodes=nodes, ports=ports)


def _compiled(engine: Engine, query: sa.Select) -> str:
    # Literal binds: the only parameters are our own constant state names.
    return str(query.compile(dialect=engine.dialect, compile_kwargs={"literal_binds": True}))


def _fetch(cursor, sql: str) -> list:
    cursor.execute(sql)
    return cursor.fetchall()
