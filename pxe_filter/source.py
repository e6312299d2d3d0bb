"""Where the filter learns which nodes are on inspection and which ports exist.

A narrow, read-only source with two reads, in the spirit of a DHCP server's backend: a
snapshot of everything (:meth:`Source.read_snapshot`, the full sync) and a lookup of a few
MACs, nodes or ports (:meth:`Source.lookup`, what a broadcast, a notification, a lease or
``explain`` asks about). :class:`DatabaseSource` reads the few columns the policy needs with
SQLAlchemy Core on lightweight table stubs, never ORM objects and never writes, so the daemon
also runs against a database created and owned by Ironic. Every read is bounded in time
(:func:`pxe_filter.common.database.bounded_read`): a frozen server fails a read, it never
holds the daemon.
"""

import datetime
import os
import time
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from sys import intern
from typing import Protocol

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from pxe_filter.common import macs
from pxe_filter.common.database import DatabaseError, bounded_read, describe_url, error_reason
from pxe_filter.policy import (
    INSPECTION_STATES,
    UNSCOPED,
    Scope,
    nodes_on_inspection,
    pxe_allowed,
)


def _stamps() -> tuple[sa.ColumnClause, ...]:
    return sa.column("created_at", sa.DateTime), sa.column("updated_at", sa.DateTime)


_nodes = sa.table("nodes", sa.column("id"), sa.column("uuid"), sa.column("provision_state"),
                  sa.column("inspect_interface"), sa.column("conductor_group"),
                  sa.column("shard"), *_stamps())
_ports = sa.table("ports", sa.column("id"), sa.column("uuid"), sa.column("address"),
                  sa.column("node_id"), *_stamps())

#: Seconds one read may take before its connection is cut ([pxe_filter]database_read_timeout).
DEFAULT_READ_TIMEOUT = 10.0


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
    #: Raw addresses of each served node's ports, by node UUID (a few nodes, not all).
    served_by: dict[str, set[str]] = field(default_factory=dict)


@dataclass(frozen=True)
class PortView:
    """A port's node as the policy sees it (node fields None for a port without a node)."""

    node_uuid: str | None
    provision_state: str | None
    inspect_interface: str | None
    conductor_group: str | None = ""
    shard: str | None = None


@dataclass
class Lookup:
    """What one :meth:`Source.lookup` found, read in one transaction."""

    #: Canonical MAC -> its port's node, for every port found (by MAC, port or node).
    ports: dict[str, PortView] = field(default_factory=dict)
    #: Node UUIDs asked for that no node has (deleted: their MACs are unknown here).
    missing_nodes: set[str] = field(default_factory=set)
    #: Whether any in-scope node's ports are served (unknown MACs then are too).
    any_served: bool = False
    #: Nodes asked for whose ports are served now, with their MACs (all their ports read).
    served_nodes: dict[str, set[str]] = field(default_factory=dict)
    #: Nodes asked for whose ports are not served now (their ports were not read).
    unserved_nodes: set[str] = field(default_factory=set)
    #: Every MAC looked up by address (those asked, and those held for unserved nodes).
    asked: set[str] = field(default_factory=set)


@dataclass
class Changes:
    """UUIDs of ``nodes`` and ``ports`` created or updated since a time (:meth:`changes`),
    and each table's (rows, highest id, rows above the id given)."""

    nodes: set[str] = field(default_factory=set)
    ports: set[str] = field(default_factory=set)
    counts: dict[str, tuple[int, int, int]] = field(default_factory=dict)


#: A MariaDB table changed this recently (its UPDATE_TIME keeps whole seconds) may change
#: again within the same second unseen: read its rows until it is older.
_UNSETTLED = datetime.timedelta(seconds=2)

#: UUIDs or MACs per ``IN (...)`` read: a flood of hints is read a batch at a time.
BATCH = 500


class Source(Protocol):
    """What the filter reads its desired state from."""

    def read_snapshot(self, supported_interfaces: Collection[str],
                      scope: Scope = UNSCOPED) -> Snapshot:
        """Served nodes and the ports' addresses (every port's unless the scope leaves
        out-of-scope ports to the wildcard); raises DatabaseError."""
        ...

    def lookup(self, addresses: Collection[str] = (), nodes: Collection[str] = (),
               ports: Collection[str] = (), *, supported_interfaces: Collection[str],
               scope: Scope = UNSCOPED, held: Mapping[str, Collection[str]] = {}) -> Lookup:
        """The ports of these canonical MACs, of these port UUIDs and of these nodes (all
        its ports for a node served now; for another, the MACs ``held`` says were served for
        it), with their nodes, and whether any node is served; raises DatabaseError."""
        ...


class DatabaseSource:
    """The node/port tables of a database (ours or Ironic's), read-only, bounded in time."""

    def __init__(self, engine: Engine, read_timeout: float = DEFAULT_READ_TIMEOUT) -> None:
        self.engine = engine
        self.read_timeout = read_timeout
        #: Monotonic time of the oldest read not followed by a successful one (None: the
        #: last read succeeded). The outage rule counts from it, on its own clock.
        self.unanswered_since: float | None = None

    def _read(self, read):
        """Run ``read(connection)`` bounded in time; driver errors become DatabaseError."""
        if self.unanswered_since is None:
            self.unanswered_since = time.monotonic()
        try:
            result = bounded_read(self.engine, self.read_timeout, read)
        except (sa.exc.SQLAlchemyError, self.engine.dialect.loaded_dbapi.Error) as exc:
            raise DatabaseError(f"cannot read nodes and ports from "
                                f"{describe_url(self.engine.url)}: {error_reason(exc)}") \
                from None
        self.unanswered_since = None
        return result

    def unanswered_for(self) -> float:
        """Seconds the database has not answered a read (0 if the last read succeeded)."""
        since = self.unanswered_since
        return 0.0 if since is None else time.monotonic() - since

    def read_snapshot(self, supported_interfaces: Collection[str],
                      scope: Scope = UNSCOPED) -> Snapshot:
        """Served nodes and the ports' addresses (see :func:`read_snapshot`)."""
        return self._read(lambda conn: _read_snapshot(conn, supported_interfaces, scope))

    def lookup(self, addresses: Collection[str] = (), nodes: Collection[str] = (),
               ports: Collection[str] = (), *, supported_interfaces: Collection[str],
               scope: Scope = UNSCOPED, held: Mapping[str, Collection[str]] = {}) -> Lookup:
        """By the unique, indexed ``ports.address``, ``ports.uuid`` and ``nodes.uuid``, a
        batch per query. Ironic's schema has no index on ``ports.node_id``: the ports of a
        node are read (one scan of the port table per batch) only when it is served now."""
        return self._read(lambda conn: _lookup(
            conn, wanted_macs=addresses, nodes=nodes, ports=ports,
            supported_interfaces=supported_interfaces, scope=scope, held=held))

    def change_signal(self) -> dict[str, object] | None:
        """For ``nodes`` and ``ports``, a cheap value that differs whenever the table may
        have changed (a new object every time while unsure); None if the database offers
        none (read rows).

        PostgreSQL: the table's insert, update and delete counters (``pg_stat_user_tables``;
        a server process publishes them when it goes idle, at most once a second, else up
        to 10 s later) and its highest id (an index probe: a new row shows at once).
        MariaDB/MySQL: the table's ``UPDATE_TIME``, whole seconds. SQLite: the database and
        WAL files' size and modification time, the same for both tables.
        """
        name = self.engine.dialect.name
        if name == "sqlite":
            files = _file_signal(self.engine.url.database)
            return None if files is None else {"nodes": files, "ports": files}
        if name == "postgresql":
            return self._read(_pg_signal)
        if name in ("mysql", "mariadb"):
            return self._read(_mysql_signal)
        return None

    def changes(self, since: Mapping[str, datetime.datetime],
                above: Mapping[str, int]) -> Changes:
        """Rows of each table in ``since`` (``nodes``, ``ports``) whose ``updated_at`` or
        ``created_at`` is at or after its time (naive UTC, as Ironic stores them), and the
        table's counts with the rows whose id is above ``above[table]``: scans of that
        table only."""
        return self._read(lambda conn: _changes(conn, since, above))

    def describe(self) -> str:
        """The database URL, password hidden."""
        return describe_url(self.engine.url)

    def close(self) -> None:
        """Release the engine's connections."""
        self.engine.dispose()


def _pg_signal(conn: sa.Connection) -> dict[str, object] | None:
    rows = conn.execute(sa.text(
        "SELECT current_setting('track_counts'), relname, n_tup_ins, n_tup_upd, n_tup_del, "
        "CASE relname WHEN 'nodes' THEN (SELECT max(id) FROM nodes) "
        "ELSE (SELECT max(id) FROM ports) END "
        "FROM pg_stat_user_tables WHERE relid IN ('nodes'::regclass, 'ports'::regclass)"
    )).all()
    if not rows or rows[0][0] != "on":
        return None
    return {table: tuple(values) for _, table, *values in rows}


def _mysql_signal(conn: sa.Connection) -> dict[str, object]:
    rows = conn.execute(sa.text(
        "SELECT TABLE_NAME, UPDATE_TIME, NOW() FROM information_schema.TABLES "
        "WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME IN ('nodes', 'ports')")).all()
    return {table: object() if updated is not None and updated >= now - _UNSETTLED
            else updated for table, updated, now in rows}


def _file_signal(path: str | None) -> object:
    if not path or path == ":memory:":
        return None
    try:
        return tuple((st.st_mtime_ns, st.st_size) for st in
                     (os.stat(name) if os.path.exists(name) else os.stat_result((0,) * 10)
                      for name in (path, f"{path}-wal")))
    except OSError:
        return None


def _changes(conn: sa.Connection, since: Mapping[str, datetime.datetime],
             above: Mapping[str, int]) -> Changes:
    found = Changes()
    with _transaction(conn):
        for name, table, uuids in (("nodes", _nodes, found.nodes),
                                   ("ports", _ports, found.ports)):
            if name not in since:
                continue
            rows, top, new = conn.execute(sa.select(
                sa.func.count(), sa.func.max(table.c.id),
                sa.func.sum(sa.case((table.c.id > above.get(name, 0), 1), else_=0)))).one()
            found.counts[name] = (rows, top or 0, int(new or 0))
            uuids.update(conn.execute(sa.select(table.c.uuid).where(sa.or_(
                table.c.updated_at >= since[name], table.c.created_at >= since[name]))).scalars())
    return found


def _lookup(conn: sa.Connection, *, wanted_macs: Collection[str], nodes: Collection[str],
            ports: Collection[str], supported_interfaces: Collection[str],
            scope: Scope, held: Mapping[str, Collection[str]]) -> Lookup:
    found = Lookup()
    columns = (_ports.c.address, _nodes.c.uuid, *_policy_columns(scope))
    joined = _ports.outerjoin(_nodes, _nodes.c.id == _ports.c.node_id)
    wanted = set(wanted_macs)
    with _transaction(conn):
        served_ids = []
        for chunk in _batches(nodes):
            rows = conn.execute(sa.select(_nodes.c.id, _nodes.c.uuid, *_policy_columns(scope))
                                .where(_nodes.c.uuid.in_(chunk))).all()
            found.missing_nodes.update(set(chunk) - {row[1] for row in rows})
            for node_id, uuid, *rest in rows:
                state, interface, group, shard = _policy(rest, scope)
                if pxe_allowed(state, interface, supported_interfaces, scope=scope,
                               conductor_group=group, shard=shard):
                    served_ids.append(node_id)
                    found.served_nodes[uuid] = set()
                else:  # its ports are not read: only the MACs served for it can change
                    wanted.update(held.get(uuid, ()))
                    found.unserved_nodes.add(uuid)
        for column, keys in ((_ports.c.address, wanted), (_ports.c.uuid, ports),
                             (_ports.c.node_id, served_ids)):
            for chunk in _batches(keys):
                for address, node, *rest in conn.execute(
                        sa.select(*columns).select_from(joined).where(column.in_(chunk))):
                    try:  # invalid stored addresses are skipped: the full sync reports them
                        mac = macs.normalize_mac(address)
                    except macs.InvalidMAC:
                        continue
                    found.ports[mac] = PortView(node, *_policy(rest, scope))
                    if node in found.served_nodes:
                        found.served_nodes[node].add(mac)
        served = snapshot_queries(scope)[0].where(  # the full sync's candidates
            _nodes.c.inspect_interface.in_(sorted(supported_interfaces)))
        found.any_served = conn.execute(served.limit(1)).first() is not None
    found.asked = wanted
    return found


def _batches(keys: Collection[str]) -> Iterator[list[str]]:
    ordered = sorted(keys)
    for start in range(0, len(ordered), BATCH):
        yield ordered[start:start + BATCH]


@contextmanager
def _transaction(conn: sa.Connection) -> Iterator[None]:
    """One transaction that sees one moment: REPEATABLE READ on PostgreSQL and MariaDB
    (SQLite's reads within a transaction already do)."""
    if conn.dialect.name in ("postgresql", "mysql", "mariadb"):
        conn.execution_options(isolation_level="REPEATABLE READ")
    with conn.begin():
        yield


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


def snapshot_queries(scope: Scope) -> tuple[sa.Select, sa.Select]:
    """The two statements of a full sync: served nodes' candidates, then the ports to read.

    A scoped filter reads only in-scope nodes, so out-of-scope ports land in the denied set;
    with ``wildcard`` it reads only in-scope nodes' ports too (a join on the node).
    """
    nodes = sa.select(_nodes.c.id, _nodes.c.uuid, *_policy_columns(scope)).where(
        _nodes.c.provision_state.in_(sorted(INSPECTION_STATES)), *scope_clauses(scope))
    ports = sa.select(_ports.c.address, _ports.c.node_id)
    if scope.scoped and not scope.deny_outside:
        ports = ports.select_from(_ports.join(_nodes, _nodes.c.id == _ports.c.node_id)).where(
            *scope_clauses(scope))
    return nodes, ports


def _read_snapshot(conn: sa.Connection, supported_interfaces: Collection[str],
                   scope: Scope) -> Snapshot:
    """Served nodes and the ports' addresses (:func:`snapshot_queries`).

    Rows are fetched through the driver's cursor as plain tuples: SQLAlchemy's per-row
    processing would dominate a steady-state sync at 100k ports. Both statements run in one
    transaction (:func:`_transaction`) and see the same moment.
    """
    nodes_query, ports_query = snapshot_queries(scope)
    with _transaction(conn):
        cursor = conn.connection.cursor()
        try:
            cursor.execute(_compiled(conn.engine, nodes_query))
            nodes = cursor.fetchall()
            snap = Snapshot(nodes_on_inspection(
                ((row[0], *_policy(row[2:], scope)) for row in nodes),
                supported_interfaces, scope))
            cursor.execute(_compiled(conn.engine, ports_query))
            _split_ports(cursor, snap, {row[0]: row[1] for row in nodes
                                        if row[0] in snap.inspecting})
        finally:
            cursor.close()
    return snap


def _compiled(engine: Engine, query: sa.Select) -> str:
    # Literal binds: the parameters are our constant state names and the configured scope
    # names, whose option type refuses quotes and backslashes.
    return str(query.compile(dialect=engine.dialect, compile_kwargs={"literal_binds": True}))


def _split_ports(cursor, snap: Snapshot, uuids: dict[int, str]) -> None:
    """Sort the port rows into the snapshot's two sets, a chunk at a time (``uuids``: the
    UUID of each served node id).

    Addresses are interned: the driver makes a new string per row and per sync, and the
    policy held until the next sync, the hostsdir cache and this snapshot would otherwise
    each keep their own copy of every MAC (~64 MB per copy at 1M ports). A None address is
    left out (the policy ignores it anyway).
    """
    inspecting = snap.inspecting
    while rows := cursor.fetchmany(_CHUNK):
        if inspecting:
            served = [(address, node_id) for address, node_id in rows if node_id in inspecting]
            snap.on_inspection.update(_interned([address for address, _ in served]))
            for address, node_id in served:
                snap.served_by.setdefault(uuids[node_id], set()).add(address)
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
