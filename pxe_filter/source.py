"""Where the filter learns which nodes are on inspection and which ports exist.

A narrow source: one read of the few columns the policy needs. :class:`DatabaseSource` reads
them with SQLAlchemy Core on lightweight table stubs, never ORM objects and never writes, so
the daemon also runs against a database created and owned by Ironic;
:class:`pxe_filter.memory_source.MemorySource` holds them in memory for tests and tools.
"""

from collections.abc import Collection, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from sys import intern
from typing import Protocol

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from pxe_filter.common.database import DatabaseError, describe_url, error_reason
from pxe_filter.policy import INSPECTION_STATES, UNSCOPED, Scope, nodes_on_inspection, pxe_allowed

_nodes = sa.table("nodes", sa.column("id"), sa.column("uuid"), sa.column("provision_state"),
                  sa.column("inspect_interface"), sa.column("conductor_group"),
                  sa.column("shard"))
_ports = sa.table("ports", sa.column("uuid"), sa.column("address"), sa.column("node_id"))

def _policy_columns(scope: Scope) -> tuple:
    """(state, interface), and (conductor group, shard) for a scoped filter only: an unscoped
    one keeps needing SELECT on the few columns it always read."""
    base = (_nodes.c.provision_state, _nodes.c.inspect_interface)
    return (*base, _nodes.c.conductor_group, _nodes.c.shard) if scope.scoped else base


def _policy(values: Sequence, scope: Scope) -> tuple:
    """(state, interface, conductor group, shard) from :func:`_policy_columns`' values."""
    return tuple(values) if scope.scoped else (*values, "", None)


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
    conductor_group: str | None = ""
    shard: str | None = None


@dataclass(frozen=True)
class PortRow:
    """One port as the follower sees it: its address and its node as the policy sees it
    (node fields None for a port without a node)."""

    address: str | None
    node_uuid: str | None
    provision_state: str | None
    inspect_interface: str | None
    conductor_group: str | None = ""
    shard: str | None = None


#: UUIDs per ``IN (...)`` read: a flood of notifications is read a batch at a time.
BATCH = 500


class Source(Protocol):
    """What the filter reads its desired state from."""

    def read_snapshot(self, supported_interfaces: Collection[str],
                      scope: Scope = UNSCOPED) -> Snapshot:
        """Served nodes and the ports' addresses (every port's unless the scope leaves
        out-of-scope ports to the wildcard); raises DatabaseError."""
        ...

    def read_node(self, uuid: str, with_ports: bool = False,
                  scope: Scope = UNSCOPED) -> NodeRow | None:
        """One node (None if it does not exist), with its ports if asked; DatabaseError.
        Its conductor group and shard are read for a scoped filter only."""
        ...

    def served_nodes(self, supported_interfaces: Collection[str],
                     scope: Scope = UNSCOPED) -> list[NodeRow]:
        """The nodes whose ports are served, with their ports; DatabaseError."""
        ...

    def read_nodes(self, uuids: Collection[str],
                   scope: Scope = UNSCOPED) -> dict[str, NodeRow]:
        """The nodes of ``uuids`` that exist (no ports); DatabaseError."""
        ...

    def read_ports(self, uuids: Collection[str],
                   scope: Scope = UNSCOPED) -> dict[str, PortRow]:
        """The ports of ``uuids`` that exist, with their node; DatabaseError."""
        ...

    def any_served(self, supported_interfaces: Collection[str],
                   scope: Scope = UNSCOPED) -> bool:
        """Whether any node's ports are served (unknown MACs then are); DatabaseError."""
        ...

    def port_owners(self, addresses: Collection[str]) -> dict[str, tuple[str | None,
                                                                          str | None]]:
        """(conductor group, shard) of the node of each port of ``addresses`` (canonical
        MACs) that exists; DatabaseError."""
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
        self._served: tuple[frozenset[str], Scope, list[NodeRow]] | None = None
        self._keep_served = False

    def read_snapshot(self, supported_interfaces: Collection[str],
                      scope: Scope = UNSCOPED) -> Snapshot:
        """Served nodes and the ports' addresses (see :func:`read_snapshot`)."""
        self._served = None
        if not self._keep_served:
            return read_snapshot(self.engine, supported_interfaces, scope)
        snap, nodes = read_snapshot(self.engine, supported_interfaces, scope, with_served=True)
        self._served = (frozenset(supported_interfaces), scope, [
            NodeRow(uuid, state, interface, tuple(snap.served_ports.get(node_id, ())),
                    group, shard)
            for node_id, uuid, *rest in nodes if node_id in snap.inspecting
            for state, interface, group, shard in [_policy(rest, scope)]])
        snap.served_ports = {}
        return snap

    def describe(self) -> str:
        """The database URL, password hidden."""
        return describe_url(self.engine.url)

    def read_node(self, uuid: str, with_ports: bool = False,
                  scope: Scope = UNSCOPED) -> NodeRow | None:
        """One node by its unique UUID; its ports only ``with_ports``, because Ironic's
        schema has no index on ``ports.node_id`` (PostgreSQL then reads the whole table)."""
        with _reading(self.engine) as conn:
            row = conn.execute(sa.select(_nodes.c.id, *_policy_columns(scope))
                               .where(_nodes.c.uuid == uuid)).first()
            if row is None:
                return None
            ports = conn.execute(sa.select(_ports.c.uuid, _ports.c.address)
                                 .where(_ports.c.node_id == row[0])).all() if with_ports else ()
        state, interface, group, shard = _policy(row[1:], scope)
        return NodeRow(uuid, state, interface, tuple((p, a) for p, a in ports if a), group,
                       shard)

    def read_nodes(self, uuids: Collection[str],
                   scope: Scope = UNSCOPED) -> dict[str, NodeRow]:
        """The nodes of ``uuids`` that exist, by their unique UUID, a batch per query."""
        found: dict[str, NodeRow] = {}
        query = sa.select(_nodes.c.uuid, *_policy_columns(scope))
        with _reading(self.engine) as conn:
            for chunk in _batches(uuids):
                for uuid, *rest in conn.execute(query.where(_nodes.c.uuid.in_(chunk))):
                    state, interface, group, shard = _policy(rest, scope)
                    found[uuid] = NodeRow(uuid, state, interface, (), group, shard)
        return found

    def read_ports(self, uuids: Collection[str],
                   scope: Scope = UNSCOPED) -> dict[str, PortRow]:
        """The ports of ``uuids`` that exist, with their node, a batch per query."""
        found: dict[str, PortRow] = {}
        query = (sa.select(_ports.c.uuid, _ports.c.address, _nodes.c.uuid,
                           *_policy_columns(scope))
                 .select_from(_ports.outerjoin(_nodes, _nodes.c.id == _ports.c.node_id)))
        with _reading(self.engine) as conn:
            for chunk in _batches(uuids):
                for port, address, node, *rest in conn.execute(
                        query.where(_ports.c.uuid.in_(chunk))):
                    found[port] = PortRow(address, node, *_policy(rest, scope))
        return found

    def port_owners(self, addresses: Collection[str]) -> dict[str, tuple[str | None,
                                                                          str | None]]:
        """Looked up by the unique ``ports.address``, a batch per query; ports without a
        node are left out."""
        found: dict[str, tuple[str | None, str | None]] = {}
        query = (sa.select(_ports.c.address, _nodes.c.conductor_group, _nodes.c.shard)
                 .select_from(_ports.join(_nodes, _nodes.c.id == _ports.c.node_id)))
        with _reading(self.engine) as conn:
            for chunk in _batches(addresses):
                for address, group, shard in conn.execute(
                        query.where(_ports.c.address.in_(chunk))):
                    found[address] = (group, shard)
        return found

    def served_nodes(self, supported_interfaces: Collection[str],
                     scope: Scope = UNSCOPED) -> list[NodeRow]:
        """Nodes on inspection with a supported interface, and their ports; DatabaseError.

        The first call after :meth:`read_snapshot` answers from that snapshot (the state
        just synced) without a query; later calls read the database.
        """
        served, self._served = self._served, None
        self._keep_served = True
        if served is not None and served[:2] == (frozenset(supported_interfaces), scope):
            return served[2]
        query = (sa.select(_nodes.c.uuid, _ports.c.uuid, _ports.c.address,
                           *_policy_columns(scope))
                 .select_from(_nodes.outerjoin(_ports, _ports.c.node_id == _nodes.c.id))
                 .where(_nodes.c.provision_state.in_(sorted(INSPECTION_STATES)),
                        *scope_clauses(scope)))
        found: dict[str, NodeRow] = {}
        with _reading(self.engine) as conn:
            for uuid, port, address, *rest in conn.execute(query):
                state, interface, group, shard = _policy(rest, scope)
                if not pxe_allowed(state, interface, supported_interfaces, scope=scope,
                                   conductor_group=group, shard=shard):
                    continue
                row = found.get(uuid) or NodeRow(uuid, state, interface)
                found[uuid] = NodeRow(uuid, state, interface,
                                      row.ports + (((port, address),) if address else ()),
                                      group, shard)
        return list(found.values())

    def any_served(self, supported_interfaces: Collection[str],
                   scope: Scope = UNSCOPED) -> bool:
        """One indexed probe: an in-scope node on inspection with a supported interface."""
        query = (sa.select(_nodes.c.id)
                 .where(_nodes.c.provision_state.in_(sorted(INSPECTION_STATES)),
                        _nodes.c.inspect_interface.in_(sorted(supported_interfaces)),
                        *scope_clauses(scope))
                 .limit(1))
        with _reading(self.engine) as conn:
            return conn.execute(query).first() is not None

    def close(self) -> None:
        """Release the engine's connections."""
        self.engine.dispose()


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


def scope_clauses(scope: Scope) -> list[sa.ColumnElement[bool]]:
    """WHERE clauses on ``nodes`` (both columns indexed) that keep only ``scope``'s nodes."""
    clauses: list[sa.ColumnElement[bool]] = []
    if scope.conductor_groups is not None:
        clauses.append(_nodes.c.conductor_group.in_(sorted(scope.conductor_groups)))
    if scope.shards is not None:
        named = sorted(shard for shard in scope.shards if shard is not None)
        clause = _nodes.c.shard.in_(named) if named else sa.false()
        if None in scope.shards:
            clause = sa.or_(_nodes.c.shard.is_(None), clause)
        clauses.append(clause)
    return clauses


def snapshot_queries(scope: Scope, with_served: bool = False) -> tuple[sa.Select, sa.Select]:
    """The two statements of a full sync: served nodes' candidates, then the ports to read.

    A scoped filter reads only in-scope nodes, so out-of-scope ports land in the denied set;
    with ``wildcard`` it reads only in-scope nodes' ports too (a join on the node).
    """
    nodes = sa.select(_nodes.c.id, *([_nodes.c.uuid] if with_served else []),
                      *_policy_columns(scope)).where(
        _nodes.c.provision_state.in_(sorted(INSPECTION_STATES)), *scope_clauses(scope))
    ports = sa.select(_ports.c.address, _ports.c.node_id)
    if scope.scoped and not scope.deny_outside:
        ports = ports.select_from(_ports.join(_nodes, _nodes.c.id == _ports.c.node_id)).where(
            *scope_clauses(scope))
    if with_served:
        # With the UUIDs only once served_nodes() has been asked for (notifications): a
        # plain filter keeps needing SELECT on the few policy columns only.
        ports = ports.add_columns(_ports.c.uuid)
    return nodes, ports


def read_snapshot(engine: Engine, supported_interfaces: Collection[str],
                  scope: Scope = UNSCOPED, *,
                  with_served: bool = False) -> Snapshot | tuple[Snapshot, list[tuple]]:
    """Served nodes and the ports' addresses (:func:`snapshot_queries`); DatabaseError.

    ``with_served``: also fill ``served_ports`` and return the node rows (id, uuid, then
    :func:`_policy_columns`) with the snapshot.

    Rows are fetched through the driver's cursor as plain tuples: SQLAlchemy's per-row
    processing would dominate a steady-state sync at 100k ports. On PostgreSQL and MariaDB
    both statements run in one REPEATABLE READ transaction and see the same moment; on
    SQLite they may not, which the next sync and the broadcast ordering make harmless.
    """
    nodes_query, ports_query = snapshot_queries(scope, with_served)
    options = {}
    if engine.dialect.name in ("postgresql", "mysql", "mariadb"):
        options["isolation_level"] = "REPEATABLE READ"
    try:
        with engine.connect() as raw_conn:
            conn = raw_conn.execution_options(**options) if options else raw_conn
            with conn.begin():
                cursor = conn.connection.cursor()
                try:
                    cursor.execute(_compiled(engine, nodes_query))
                    nodes = cursor.fetchall()
                    skip = 2 if with_served else 1
                    snap = Snapshot(nodes_on_inspection(
                        ((row[0], *_policy(row[skip:], scope)) for row in nodes),
                        supported_interfaces, scope))
                    cursor.execute(_compiled(engine, ports_query))
                    _split_ports(cursor, snap, with_served)
                finally:
                    cursor.close()
    except (sa.exc.SQLAlchemyError, engine.dialect.loaded_dbapi.Error) as exc:
        raise DatabaseError(f"cannot read nodes and ports from {describe_url(engine.url)}: "
                            f"{error_reason(exc)}") from None
    return (snap, nodes) if with_served else snap


def _compiled(engine: Engine, query: sa.Select) -> str:
    # Literal binds: the parameters are our constant state names and the configured scope
    # names, whose option type refuses quotes and backslashes.
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
