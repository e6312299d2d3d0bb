"""Follow Ironic in real time: each notification is decided with the full sync's policy.

A notification names a node (and, for a port event, the port and its address). The node's
state and inspect interface are read from the database by its unique UUID and decided by
:func:`pxe_filter.policy.pxe_allowed`, the function of the full sync. The follower remembers
which MACs it serves for which node and port, so it reads a node's ports only when the node
starts being served: Ironic's schema has no index on ``ports.node_id``, and on PostgreSQL
that read scans the whole table. A port event carries its address; an update carries only
the new one, and the remembered old one is closed. Results are applied like a broadcast (a
sequence number keeps an older sync snapshot from undoing them), then the unknown-MAC
wildcard is re-checked with one indexed probe. The periodic full sync stays the source of
truth: a lost notification is repaired by it.
"""

import collections
import logging
import threading
from collections.abc import Callable, Collection

from pxe_filter import notifications, policy
from pxe_filter.common import macs
from pxe_filter.common.database import DatabaseError
from pxe_filter.source import NodeRow, Source
from pxe_filter.sync import FilterSync

LOG = logging.getLogger(__name__)


class NotificationFollower:
    """Applies Ironic's notifications to the hostsdir; thread-safe. ``counts`` for status."""

    def __init__(self, source: Source, sync: FilterSync,
                 supported_interfaces: Callable[[], Collection[str]]) -> None:
        self.source = source
        self.sync = sync
        self.supported_interfaces = supported_interfaces
        self.counts: collections.Counter[str] = collections.Counter()
        self._lock = threading.Lock()
        # Served nodes: node UUID -> {port UUID: canonical MAC} (a node without ports too).
        self._served: dict[str, dict[str, str]] = {}
        self._last: dict[str, str] = {}  # node UUID -> timestamp of the last one applied
        self._reported: set[str] = set()

    def reload(self) -> None:
        """Learn which MACs are served for which node (after a full sync); DatabaseError."""
        rows = self.source.served_nodes(self.supported_interfaces())
        served = {row.uuid: _port_macs(row) for row in rows}
        with self._lock:
            self._served = served

    def handle(self, body: object) -> None:
        """One message from the bus; never raises (counted and logged instead)."""
        self.counts["received"] += 1
        try:
            event = notifications.parse(body)
        except notifications.Malformed as exc:
            self._ignore("malformed", str(exc), warn=True)
            return
        if event is None:
            self.counts["not relevant"] += 1
            return
        try:
            self.apply(event)
        except DatabaseError as exc:
            self._ignore("database error", str(exc), warn=True)

    def apply(self, event: notifications.NodeChanged) -> bool:
        """Decide and apply one event; False if it was older than one applied (ignored)."""
        with self._lock:
            last = self._last.get(event.node_uuid)
            if last is not None and event.timestamp < last:
                self._ignore("older than one already applied",
                             f"{event.event_type} for node {event.node_uuid}")
                return False
            self._last[event.node_uuid] = event.timestamp
            interfaces = self.supported_interfaces()
            if event.port_uuid is not None:
                allow, deny = self._port_event(event, interfaces)
            else:
                allow, deny = self._node_event(event, interfaces)
            any_served = bool(self._served) or self.source.any_served(interfaces)
        if allow or deny:
            self.sync.apply_broadcast(allow=sorted(allow), deny=sorted(deny - allow),
                                      origin=f"Notification {event.event_type}")
        self.sync.follow_unknown(any_served)
        self.counts["applied"] += 1
        LOG.debug("%s for node %s: allowed %s, denied %s", event.event_type, event.node_uuid,
                  sorted(allow), sorted(deny))
        return True

    def _node_event(self, event: notifications.NodeChanged,
                    interfaces: Collection[str]) -> tuple[set[str], set[str]]:
        node = self.source.read_node(event.node_uuid)
        served = node is not None and policy.pxe_allowed(
            node.provision_state, node.inspect_interface, interfaces)
        known = event.node_uuid in self._served
        if node is None:
            self._last.pop(event.node_uuid, None)
        if served and not known:
            # The only read of a node's ports: when it starts being served.
            ports = _port_macs(self.source.read_node(event.node_uuid, with_ports=True)
                               or NodeRow(event.node_uuid, None, None))
            for owned in self._served.values():  # a MAC moved here from another node
                for port in [p for p, mac in owned.items() if mac in ports.values()]:
                    del owned[port]
            self._served[event.node_uuid] = ports
            return set(ports.values()), set()
        if not served and known:
            return set(), set(self._served.pop(event.node_uuid).values())
        return set(), set()

    def _port_event(self, event: notifications.NodeChanged,
                    interfaces: Collection[str]) -> tuple[set[str], set[str]]:
        try:
            address = macs.normalize_mac(event.address)
        except macs.InvalidMAC:
            self._ignore("invalid MAC", f"{event.event_type} for node {event.node_uuid}",
                         warn=True)
            return set(), set()
        old = None
        for owned in self._served.values():
            old = owned.pop(event.port_uuid, None) or old
        deny = {old} if old and old != address else set()
        if event.deleted:
            return set(), deny | {address}
        node = self.source.read_node(event.node_uuid)
        if node is None or not policy.pxe_allowed(node.provision_state,
                                                  node.inspect_interface, interfaces):
            return set(), deny | {address}
        if event.node_uuid not in self._served:  # served, but not known here yet
            allow, _ = self._node_event(event, interfaces)
            return allow | {address}, deny
        self._served[event.node_uuid][event.port_uuid] = address
        return {address}, deny

    def _ignore(self, reason: str, detail: str, warn: bool = False) -> None:
        self.counts[f"ignored: {reason}"] += 1
        # One line per reason; the counts in the status say how many followed.
        if reason not in self._reported:
            self._reported.add(reason)
            LOG.log(logging.WARNING if warn else logging.INFO,
                    "Ironic notification ignored (%s): %s; further ones are only counted "
                    "(ironic-pxe-filter status)", reason, detail[:300])
        else:
            LOG.debug("Ironic notification ignored (%s): %s", reason, detail[:300])


def _port_macs(row: NodeRow) -> dict[str, str]:
    """{port UUID: canonical MAC} of a row's ports; invalid stored addresses are skipped."""
    result = {}
    for port, address in row.ports:
        try:
            result[port] = macs.normalize_mac(address)
        except macs.InvalidMAC:
            continue
    return result
