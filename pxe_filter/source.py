"""Where the filter learns which nodes are on inspection and which ports exist.

A narrow source: one read of the few columns the policy needs. :class:`DatabaseSource` reads
them with SQLAlchemy Core on lightweight table stubs, never ORM objects and never writes, so
the daemon also runs against a database created and owned by Ironic; :class:`MemorySource`
holds them in memory for tests and tools.
"""

from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from typing import Protocol

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from pxe_filter.common.database import DatabaseError, describe_url, error_reason
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


class Source(Protocol):
    """What the filter reads its desired state from."""

    def read_snapshot(self, supported_interfaces: Collection[str]) -> Snapshot:
        """Nodes on inspection and every port's address; raises DatabaseError."""
        ...

    def describe(self) -> str:
        """Where the rows come from, for log lines (no secrets)."""
        ...


class DatabaseSource:
    """The node/port tables of a database (ours or Ironic's), read-only."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def read_snapshot(self, supported_interfaces: Collection[str]) -> Snapshot:
        """Nodes on inspection and every port's address; raises DatabaseError."""
        return read_snapshot(self.engine, supported_interfaces)

    def describe(self) -> str:
        """The database URL, password hidden."""
        return describe_url(self.engine.url)

    def close(self) -> None:
        """Release the engine's connections."""
        self.engine.dispose()


class MemorySource:
    """Nodes and ports held in memory: ``nodes`` maps id -> (provision_state,
    inspect_interface); ``ports`` lists (address, node_id)."""

    def __init__(self, nodes: dict[int, tuple[str | None, str | None]] | None = None,
                 ports: Iterable[tuple[str | None, int | None]] = ()) -> None:
        self.nodes = dict(nodes or {})
        self.ports = list(ports)

    def read_snapshot(self, supported_interfaces: Collection[str]) -> Snapshot:
        """The same split as the database source makes."""
        snap = Snapshot(nodes_on_inspection(((node_id, state, interface) for
                                             node_id, (state, interface) in
                                             self.nodes.items()), supported_interfaces))
        for address, node_id in self.ports:
            (snap.on_inspection if node_id in snap.inspecting else snap.others).add(address)
        return snap

    def describe(self) -> str:
        """A fixed name."""
        return "memory"


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
        raise DatabaseError(f"cannot read nodes and ports from {describe_url(engine.url)}: "
                            f"{error_reason(exc)}") from None
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
