"""Nodes and ports held in memory, read as :class:`pxe_filter.source.DatabaseSource` reads
the database: for tests and tools."""

from collections.abc import Collection, Iterable, Mapping

from pxe_filter.common import macs
from pxe_filter.policy import UNSCOPED, Scope, nodes_on_inspection
from pxe_filter.source import Lookup, PortView, Snapshot


def node_uuid(node_id: object) -> str:
    """The UUID a :class:`MemorySource` gives node ``node_id`` (an int)."""
    return f"00000000-0000-4000-8000-{node_id:012d}"


class MemorySource:
    """``nodes`` maps id -> (provision_state, inspect_interface[, conductor_group[, shard]]);
    ``ports`` lists (address, node_id) or (address, node_id, port UUID); a node's UUID is
    :func:`node_uuid` of its id, a port's by default ``f"port-{address}"``."""

    def __init__(self, nodes: dict[int, tuple] | None = None,
                 ports: Iterable[tuple] = ()) -> None:
        self.nodes = dict(nodes or {})
        self.ports = list(ports)

    def _node(self, node_id: int | None) -> tuple:
        """(state, interface, conductor group, shard) of a node; all None if missing."""
        if node_id not in self.nodes:
            return None, None, None, None
        return (*self.nodes[node_id], "", None)[:4]

    def lookup(self, addresses: Collection[str] = (), nodes: Collection[str] = (),
               ports: Collection[str] = (), *, supported_interfaces: Collection[str],
               scope: Scope = UNSCOPED, held: Mapping[str, Collection[str]] = {}) -> Lookup:
        """The ports of these MACs, port UUIDs and nodes, as the database source reads."""
        served = self._served(supported_interfaces, scope)
        found = Lookup(any_served=bool(served), asked=set(addresses))
        by_uuid = {node_uuid(node_id): node_id for node_id in self.nodes}
        found.missing_nodes = set(nodes) - set(by_uuid)
        for uuid in set(nodes) & set(by_uuid):
            if by_uuid[uuid] in served:
                found.served_nodes[uuid] = set()
            else:
                found.unserved_nodes.add(uuid)
                found.asked.update(held.get(uuid, ()))
        for address, node_id, *uuid in self.ports:
            port = uuid[0] if uuid else f"port-{address}"
            try:
                mac = macs.normalize_mac(address)
            except macs.InvalidMAC:
                continue
            owner = node_uuid(node_id) if node_id in self.nodes else None
            if mac in found.asked or port in ports or owner in found.served_nodes:
                found.ports[mac] = PortView(owner, *self._node(node_id))
                if owner in found.served_nodes:
                    found.served_nodes[owner].add(mac)
        return found

    def _served(self, supported_interfaces: Collection[str], scope: Scope) -> set[int]:
        return nodes_on_inspection(((node_id, *self._node(node_id)) for node_id in self.nodes),
                                   supported_interfaces, scope)

    def read_snapshot(self, supported_interfaces: Collection[str],
                      scope: Scope = UNSCOPED) -> Snapshot:
        """The same split as the database source makes (out-of-scope ports left out under
        ``wildcard``)."""
        snap = Snapshot(self._served(supported_interfaces, scope))
        for address, node_id, *_ in self.ports:
            if node_id in snap.inspecting:
                snap.served_by.setdefault(node_uuid(node_id), set()).add(address)
            outside = node_id not in self.nodes or not scope.contains(*self._node(node_id)[2:])
            if scope.scoped and not scope.deny_outside and outside:
                continue
            (snap.on_inspection if node_id in snap.inspecting else snap.others).add(address)
        return snap
