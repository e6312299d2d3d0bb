"""Nodes and ports held in memory, read as :class:`pxe_filter.source.DatabaseSource` reads
the database: for tests and tools."""

from collections.abc import Collection, Iterable, Iterator

from pxe_filter.policy import UNSCOPED, Scope, nodes_on_inspection, pxe_allowed
from pxe_filter.source import NodeRow, PortRow, Snapshot


class MemorySource:
    """``nodes`` maps id -> (provision_state, inspect_interface[, conductor_group[, shard]]);
    ``ports`` lists (address, node_id) or (address, node_id, port UUID); a node's UUID is
    ``f"node-{id}"``, a port's by default ``f"port-{address}"``."""

    def __init__(self, nodes: dict[int, tuple] | None = None,
                 ports: Iterable[tuple] = ()) -> None:
        self.nodes = dict(nodes or {})
        self.ports = list(ports)

    def _node(self, node_id: int | None) -> tuple[str | None, str | None, str | None,
                                                  str | None]:
        """(state, interface, conductor group, shard) of a node; all None if missing."""
        if node_id not in self.nodes:
            return None, None, None, None
        return (*self.nodes[node_id], "", None)[:4]

    def _port_rows(self) -> Iterator[tuple[str, str | None, int | None]]:
        """(port UUID, address, node id) of every port."""
        for address, node_id, *uuid in self.ports:
            yield (uuid[0] if uuid else f"port-{address}"), address, node_id

    def read_node(self, uuid: str, with_ports: bool = False,
                  scope: Scope = UNSCOPED) -> NodeRow | None:
        """One node, with its ports (UUIDs ``port-<address>``) if asked."""
        node_id = int(uuid.removeprefix("node-")) if uuid.startswith("node-") else None
        if node_id not in self.nodes:
            return None
        state, interface, group, shard = self._node(node_id)
        ports = tuple((p, a) for p, a, n in self._port_rows() if n == node_id and a)
        return NodeRow(uuid, state, interface, ports if with_ports else (), group, shard)

    def read_nodes(self, uuids: Collection[str],
                   scope: Scope = UNSCOPED) -> dict[str, NodeRow]:
        """The nodes of ``uuids`` that exist."""
        rows = {uuid: self.read_node(uuid) for uuid in uuids}
        return {uuid: row for uuid, row in rows.items() if row is not None}

    def read_ports(self, uuids: Collection[str],
                   scope: Scope = UNSCOPED) -> dict[str, PortRow]:
        """The ports of ``uuids`` (``port-<address>``) that exist, with their node."""
        found = {}
        for port, address, node_id in self._port_rows():
            if port in uuids:
                found[port] = PortRow(
                    address, f"node-{node_id}" if node_id in self.nodes else None,
                    *self._node(node_id))
        return found

    def port_owners(self, addresses: Collection[str]) -> dict[str, tuple[str | None,
                                                                          str | None]]:
        """(conductor group, shard) of the node of each port of ``addresses``."""
        return {address: self._node(node_id)[2:] for _port, address, node_id
                in self._port_rows() if address in addresses and node_id in self.nodes}

    def served_nodes(self, supported_interfaces: Collection[str],
                     scope: Scope = UNSCOPED) -> list[NodeRow]:
        """The nodes whose ports are served."""
        rows = (self.read_node(f"node-{node_id}", with_ports=True) for node_id in self.nodes)
        return [row for row in rows if row is not None
                and pxe_allowed(row.provision_state, row.inspect_interface,
                                supported_interfaces, scope=scope,
                                conductor_group=row.conductor_group, shard=row.shard)]

    def any_served(self, supported_interfaces: Collection[str],
                   scope: Scope = UNSCOPED) -> bool:
        """Whether any node's ports are served."""
        return bool(nodes_on_inspection(((node_id, *self._node(node_id))
                                         for node_id in self.nodes),
                                        supported_interfaces, scope))

    def read_snapshot(self, supported_interfaces: Collection[str],
                      scope: Scope = UNSCOPED) -> Snapshot:
        """The same split as the database source makes (out-of-scope ports left out under
        ``wildcard``)."""
        snap = Snapshot(nodes_on_inspection(((node_id, *self._node(node_id))
                                             for node_id in self.nodes),
                                            supported_interfaces, scope))
        for _port, address, node_id in self._port_rows():
            outside = node_id not in self.nodes or not scope.contains(*self._node(node_id)[2:])
            if scope.scoped and not scope.deny_outside and outside:
                continue
            (snap.on_inspection if node_id in snap.inspecting else snap.others).add(address)
        return snap

    def describe(self) -> str:
        """A fixed name."""
        return "memory"
