"""Where the filter learns which nodes are on inspection and which ports exist.

A narrow source: one read of the few columns the policy needs. :class:`DatabaseSource` reads
them with SQLAlchemy Core on lightweight table stubs, never ORM objects and never writes, so
the daemon also runs against a database created and owned by Ironic; :class:`MemorySource`
holds them in memory for tests and tools.
"""

from collections.abc import Collection, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from sys import intern
from typing import Protocol

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from pxe_filter.common.database import DatabaseError, describe_url, error_reason
from pxe_filter.policy import INSPECTION_STATES, nodes_on_inspection, pxe_allowed

_nodes = sa.table("nodes", sa.column("id"), sa.column("uuid"), sa.column("provision_state"),
                  sa.column("inspect_interface"))
_ports = sa.table("ports", sa.column("uuid"), sa.column("address"), sa.column("node_id"))

_NODES_QUERY = sa.select(_nodes.c.id, _nodes.c.provision_state,
                         _nodes.c.inspect_interface).where(
    _nodes.c.provision_state.in_(sorted(INSPECTION_STATES)))
_PORTS_QUERY = sa.select(_ports.c.address, _ports.c.node_id)
# With the UUIDs, once served_nodes() has been asked for (notifications): a plain filter
# keeps needing SELECT on five columns only.
_NODES_SERVED_QUERY = _NODES_QUERY.add_columns(_nodes.c.uuid)
_PORTS_SERVED_QUERY = _PORTS_QUERY.add_columns(_ports.c.uuid)
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
    #: (port UUID, raw address) of each served node's ports, by node id (database reads)
    served_ports: dict[int, list[tuple[str, str]]] = field(default_factory=dict)


@dataclass(frozen=True)
class NodeRow:
    """One node as the policy sees it; ``ports`` (port UUID, raw address) when read."""

    uuid: str
    provision_state: str | None
    inspect_interface: str | None
    ports: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class PortRow:
    """One port as the follower sees it: its address and its node as the policy sees it
    (node fields None for a port without a node)."""

    address: str | None
    node_uuid: str | None
    provision_state: str | None
    inspect_interface: str | None


#: UUIDs per ``IN (...)`` read: a flood of notifications is read a batch at a time.
BATCH = 500


class Source(Protocol):
    """What the filter reads its desired state from."""

    def read_snapshot(self, supported_interfaces: Collection[str]) -> Snapshot:
        """Nodes on inspection and every port's address; raises DatabaseError."""
        ...

    def read_node(self, uuid: str, with_ports: bool = False) -> NodeRow | None:
        """One node (None if it does not exist), with its ports if asked; DatabaseError."""
        ...

    def served_nodes(self, supported_interfaces: Collection[str]) -> list[NodeRow]:
        """The nodes whose ports are served, with their ports; DatabaseError."""
        ...

    def read_nodes(self, uuids: Collection[str]) -> dict[str, NodeRow]:
        """The nodes of ``uuids`` that exist (no ports); DatabaseError."""
        ...

    def read_ports(self, uuids: Collection[str]) -> dict[str, PortRow]:
        """The ports of ``uuids`` that exist, with their node; DatabaseError."""
        ...

    def any_served(self, supported_interfaces: Collection[str]) -> bool:
        """Whether any node's ports are served (unknown MACs then are); DatabaseError."""
        ...

    def describe(self) -> str:
        """Where the rows come from, for log lines (no secrets)."""
        ...


class DatabaseSource:
    """The node/port tables of a database (ours or Ironic's), read-only."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        # The served nodes seen by the last snapshot, for the served_nodes() call that
        # follows a full sync: Ironic's ports table has no node_id index, so reading them
        # again would scan every port a second time per sync.
        self._served: tuple[frozenset[str], list[NodeRow]] | None = None
        self._keep_served = False

    def read_snapshot(self, supported_interfaces: Collection[str]) -> Snapshot:
        """Nodes on inspection and every port's address; raises DatabaseError."""
        self._served = None
        if not self._keep_served:
            return read_snapshot(self.engine, supported_interfaces)
        snap, nodes = read_snapshot(self.engine, supported_interfaces, with_served=True)
        self._served = (frozenset(supported_interfaces), [
            NodeRow(uuid, state, interface, tuple(snap.served_ports.get(node_id, ())))
            for node_id, state, interface, uuid in nodes if node_id in snap.inspecting])
        snap.served_ports = {}
        return snap

    def describe(self) -> str:
        """The database URL, password hidden."""
        return describe_url(self.engine.url)

    def read_node(self, uuid: str, with_ports: bool = False) -> NodeRow | None:
        """One node by its unique UUID; its ports only ``with_ports``, because Ironic's
        schema has no index on ``ports.node_id`` (PostgreSQL then reads the whole table)."""
        with _reading(self.engine) as conn:
            row = conn.execute(sa.select(_nodes.c.id, _nodes.c.provision_state,
                                         _nodes.c.inspect_interface)
                               .where(_nodes.c.uuid == uuid)).first()
            if row is None:
                return None
            ports = conn.execute(sa.select(_ports.c.uuid, _ports.c.address)
                                 .where(_ports.c.node_id == row[0])).all() if with_ports else ()
        return NodeRow(uuid, row[1], row[2], tuple((p, a) for p, a in ports if a))

    def read_nodes(self, uuids: Collection[str]) -> dict[str, NodeRow]:
        """The nodes of ``uuids`` that exist, by their unique UUID, a batch per query."""
        found: dict[str, NodeRow] = {}
        query = sa.select(_nodes.c.uuid, _nodes.c.provision_state, _nodes.c.inspect_interface)
        with _reading(self.engine) as conn:
            for chunk in _batches(uuids):
                for uuid, state, interface in conn.execute(
                        query.where(_nodes.c.uuid.in_(chunk))):
                    found[uuid] = NodeRow(uuid, state, interface)
        return found

    def read_ports(self, uuids: Collection[str]) -> dict[str, PortRow]:
        """The ports of ``uuids`` that exist, with their node, a batch per query."""
        found: dict[str, PortRow] = {}
        query = (sa.select(_ports.c.uuid, _ports.c.address, _nodes.c.uuid,
                           _nodes.c.provision_state, _nodes.c.inspect_interface)
                 .select_from(_ports.outerjoin(_nodes, _nodes.c.id == _ports.c.node_id)))
        with _reading(self.engine) as conn:
            for chunk in _batches(uuids):
                for port, address, node, state, interface in conn.execute(
                        query.where(_ports.c.uuid.in_(chunk))):
                    found[port] = PortRow(address, node, state, interface)
        return found

    def served_nodes(self, supported_interfaces: Collection[str]) -> list[NodeRow]:
        """Nodes on inspection with a supported interface, and their ports; DatabaseError.

        The first call after :meth:`read_snapshot` answers from that snapshot (the state
        just synced) without a query; later calls read the database.
        """
        served, self._served = self._served, None
        self._keep_served = True
        if served is not None and served[0] == frozenset(supported_interfaces):
            return served[1]
        query = (sa.select(_nodes.c.uuid, _nodes.c.provision_state, _nodes.c.inspect_interface,
                           _ports.c.uuid, _ports.c.address)
                 .select_from(_nodes.outerjoin(_ports, _ports.c.node_id == _nodes.c.id))
                 .where(_nodes.c.provision_state.in_(sorted(INSPECTION_STATES))))
        found: dict[str, NodeRow] = {}
        with _reading(self.engine) as conn:
            for uuid, state, interface, port, address in conn.execute(query):
                if not pxe_allowed(state, interface, supported_interfaces):
                    continue
                row = found.get(uuid) or NodeRow(uuid, state, interface)
                found[uuid] = NodeRow(uuid, state, interface,
                                      row.ports + (((port, address),) if address else ()))
        return list(found.values())

    def any_served(self, supported_interfaces: Collection[str]) -> bool:
        """One indexed probe: a node on inspection with a supported interface exists."""
        query = (sa.select(_nodes.c.id)
                 .where(_nodes.c.provision_state.in_(sorted(INSPECTION_STATES)),
                        _nodes.c.inspect_interface.in_(sorted(supported_interfaces)))
                 .limit(1))
        with _reading(self.engine) as conn:
            return conn.execute(query).first() is not None

    def close(self) -> None:
        """Release the engine's connections."""
        self.engine.dispose()


class MemorySource:
    """Nodes and ports held in memory: ``nodes`` maps id -> (provision_state,
    inspect_interface); ``ports`` lists (address, node_id) or (address, node_id, port UUID);
    a node's UUID is ``f"node-{id}"``, a port's by default ``f"port-{address}"``."""

    def __init__(self, nodes: dict[int, tuple[str | None, str | None]] | None = None,
                 ports: Iterable[tuple] = ()) -> None:
        self.nodes = dict(nodes or {})
        self.ports = list(ports)

    def _port_rows(self) -> Iterator[tuple[str, str | None, int | None]]:
        """(port UUID, address, node id) of every port."""
        for address, node_id, *uuid in self.ports:
            yield (uuid[0] if uuid else f"port-{address}"), address, node_id

    def read_node(self, uuid: str, with_ports: bool = False) -> NodeRow | None:
        """One node, with its ports (UUIDs ``port-<address>``) if asked."""
        node_id = int(uuid.removeprefix("node-")) if uuid.startswith("node-") else None
        if node_id not in self.nodes:
            return None
        state, interface = self.nodes[node_id]
        ports = tuple((p, a) for p, a, n in self._port_rows() if n == node_id and a)
        return NodeRow(uuid, state, interface, ports if with_ports else ())

    def read_nodes(self, uuids: Collection[str]) -> dict[str, NodeRow]:
        """The nodes of ``uuids`` that exist."""
        rows = {uuid: self.read_node(uuid) for uuid in uuids}
        return {uuid: row for uuid, row in rows.items() if row is not None}

    def read_ports(self, uuids: Collection[str]) -> dict[str, PortRow]:
        """The ports of ``uuids`` (``port-<address>``) that exist, with their node."""
        found = {}
        for port, address, node_id in self._port_rows():
            if port in uuids:
                state, interface = self.nodes.get(node_id, (None, None))
                found[port] = PortRow(
                    address, f"node-{node_id}" if node_id in self.nodes else None,
                    state, interface)
        return found

    def served_nodes(self, supported_interfaces: Collection[str]) -> list[NodeRow]:
        """The nodes whose ports are served."""
        rows = (self.read_node(f"node-{node_id}", with_ports=True) for node_id in self.nodes)
        return [row for row in rows if row is not None
                and pxe_allowed(row.provision_state, row.inspect_interface,
                                supported_interfaces)]

    def any_served(self, supported_interfaces: Collection[str]) -> bool:
        """Whether any node's ports are served."""
        return any(pxe_allowed(state, interface, supported_interfaces)
                   for state, interface in self.nodes.values())

    def read_snapshot(self, supported_interfaces: Collection[str]) -> Snapshot:
        """The same split as the database source makes."""
        snap = Snapshot(nodes_on_inspection(((node_id, state, interface) for
                                             node_id, (state, interface) in
                                             self.nodes.items()), supported_interfaces))
        for _port, address, node_id in self._port_rows():
            (snap.on_inspection if node_id in snap.inspecting else snap.others).add(address)
        return snap

    def describe(self) -> str:
        """A fixed name."""
        return "memory"


def _batches(uuids: Collection[str]) -> Iterator[list[str]]:
    ordered = sorted(uuids)
    for start in range(0, len(ordered), BATCH):
        yield ordered[start:start + BATCH]


@contextmanager
def _reading(engine: Engine) -> Iterator[sa.Connection]:
    """A connection for a narrow read; driver errors become one-line DatabaseErrors."""
    try:
        with engine.connect() as conn:
            yield conn
    except (sa.exc.SQLAlchemyError, engine.dialect.loaded_dbapi.Error) as exc:
        raise DatabaseError(f"cannot read nodes and ports from {describe_url(engine.url)}: "
                            f"{error_reason(exc)}") from None


def read_snapshot(engine: Engine, supported_interfaces: Collection[str], *,
                  with_served: bool = False) -> Snapshot | tuple[Snapshot, list[tuple]]:
    """Nodes on inspection and every port's address; raises DatabaseError.

    ``with_served``: also fill ``served_ports`` and return the node rows (id, state,
    interface, uuid) with the snapshot.

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
                    cursor.execute(_compiled(engine, _NODES_SERVED_QUERY if with_served
                                             else _NODES_QUERY))
                    nodes = cursor.fetchall()
                    snap = Snapshot(nodes_on_inspection(
                        (row[:3] for row in nodes) if with_served else nodes,
                        supported_interfaces))
                    cursor.execute(_compiled(engine, _PORTS_SERVED_QUERY if with_served
                                             else _PORTS_QUERY))
                    _split_ports(cursor, snap, with_served)
                finally:
                    cursor.close()
    except (sa.exc.SQLAlchemyError, engine.dialect.loaded_dbapi.Error) as exc:
        raise DatabaseError(f"cannot read nodes and ports from {describe_url(engine.url)}: "
                            f"{error_reason(exc)}") from None
    return (snap, nodes) if with_served else snap


def _compiled(engine: Engine, query: sa.Select) -> str:
    # Literal binds: the only parameters are our own constant state names.
    return str(query.compile(dialect=engine.dialect, compile_kwargs={"literal_binds": True}))


def _split_ports(cursor, snap: Snapshot, with_served: bool) -> None:
    """Sort the port rows into the snapshot's two sets, a chunk at a time.

    Addresses are interned: the driver makes a new string per row and per sync, and the
    policy held until the next sync, the hostsdir cache and this snapshot would otherwise
    each keep their own copy of every MAC (~64 MB per copy at 1M ports). A None address is
    left out (the policy ignores it anyway).
    """
    inspecting = snap.inspecting
    served = snap.served_ports
    while rows := cursor.fetchmany(_CHUNK):
        if with_served:
            if inspecting:
                for address, node_id, port in rows:
                    if node_id in inspecting and address:
                        served.setdefault(node_id, []).append((port, address))
            rows = [row[:2] for row in rows]
        if inspecting:
            snap.on_inspection.update(_interned([address for address, node_id in rows
                                                 if node_id in inspecting]))
            snap.others.update(_interned([address for address, node_id in rows
                                          if node_id not in inspecting]))
        else:
            snap.others.update(_interned([address for address, _ in rows]))


def _interned(addresses: list[str | None]) -> Iterable[str]:
    """``addresses`` interned, in C when all are strings (the rule); else one by one:
    None (which the policy ignores) left out, a non-string passed on for it to reject."""
    try:
        return list(map(intern, addresses))
    except TypeError:
        return [intern(address) if type(address) is str else address
                for address in addresses if address is not None]
