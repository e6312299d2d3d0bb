"""Follow Ironic in real time: each notification is decided from the database alone.

A notification only says which node or port may have changed. The payload is untrusted: a
node event makes the follower re-read that node by its UUID, a port event that port by its
UUID (address, node, and the node's conductor group and shard), and
:func:`pxe_filter.policy.pxe_allowed`, the function of the full sync, decides with the
filter's scope: a node outside it is never opened. No address, state or timestamp from a
payload is ever used, so a forged or reordered notification can at worst cause a re-read of
the truth.

Messages are queued as they come (the bus thread only parses them) and applied by a thread
of the follower's own, in batches: every node and port named since the last batch is read
with one ``IN (...)`` query per few hundred UUIDs, so a flood of notifications for unknown
nodes costs a few queries, not one each, and cannot hold up a relevant one. A batch that
cannot be read (the database briefly away) stays queued and is retried every second, never
dropped. The follower remembers which MACs it serves for which node and port, so it reads a
node's ports only when the node starts being served: Ironic's schema has no index on
``ports.node_id``. Results are applied like a broadcast (a sequence number keeps an older sync
snapshot from undoing them), then the unknown-MAC wildcard is re-checked with one indexed
probe. The periodic full sync stays the source of truth.
"""

import collections
import logging
import threading
from collections.abc import Callable, Collection

from pxe_filter import policy
from pxe_filter.common import macs
from pxe_filter.common.database import DatabaseError
from pxe_filter.notifications import payloads as notifications
from pxe_filter.source import NodeRow, Source
from pxe_filter.sync import FilterSync

LOG = logging.getLogger(__name__)

#: Seconds between attempts to apply queued notifications while the database fails.
RETRY_INTERVAL = 1.0


class NotificationFollower:
    """Applies Ironic's notifications to the hostsdir; thread-safe. ``counts`` for status."""

    def __init__(self, source: Source, sync: FilterSync,
                 supported_interfaces: Callable[[], Collection[str]],
                 scope: Callable[[], policy.Scope] = lambda: policy.UNSCOPED) -> None:
        self.source = source
        self.sync = sync
        self.supported_interfaces = supported_interfaces
        self.scope = scope
        self.counts: collections.Counter[str] = collections.Counter()
        self._lock = threading.Lock()  # the served map, and one batch at a time
        # Served nodes: node UUID -> {port UUID: canonical MAC} (a node without ports too).
        self._served: dict[str, dict[str, str]] = {}
        self._reported: set[str] = set()
        self._queue = threading.Condition()
        self._nodes: set[str] = set()  # queued node UUIDs
        self._ports: set[str] = set()  # queued port UUIDs
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._failing = False

    def reload(self) -> None:
        """Learn which MACs are served for which node (after a full sync); DatabaseError.

        Read and swapped under the lock: a batch applied meanwhile is not forgotten.
        """
        with self._lock:
            rows = self.source.served_nodes(self.supported_interfaces(), self.scope())
            self._served = {row.uuid: _port_macs(row) for row in rows}

    # -- intake (the message bus thread) -----------------------------------------------
    def handle(self, body: object) -> None:
        """One message from the bus: parsed and queued; never raises."""
        self.counts["received"] += 1
        try:
            event = notifications.parse(body)
        except notifications.Malformed as exc:
            self._ignore("malformed", str(exc), warn=True)
            return
        if event is None:
            self.counts["not relevant"] += 1
            return
        with self._queue:
            if event.port_uuid is not None:
                self._ports.add(event.port_uuid)
            else:
                self._nodes.add(event.node_uuid)
            self._queue.notify()

    def start(self) -> None:
        """Apply queued notifications in the background."""
        self._thread = threading.Thread(target=self._run, name="ironic-notifications-apply",
                                        daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop applying (what is queued is left to the next start's first sync)."""
        with self._queue:
            self._stopping = True
            self._queue.notify()
        if self._thread is not None:
            self._thread.join(10)

    def _run(self) -> None:
        while True:
            with self._queue:
                while not (self._nodes or self._ports or self._stopping):
                    self._queue.wait()
                if self._stopping:
                    return
            if not self.flush():
                with self._queue:
                    self._queue.wait_for(lambda: self._stopping, RETRY_INTERVAL)

    def flush(self) -> bool:
        """Apply everything queued; False (kept queued, logged) if the database failed."""
        with self._queue:
            nodes, ports = self._nodes, self._ports
            self._nodes, self._ports = set(), set()
        if not nodes and not ports:
            return True
        try:
            self.apply(nodes, ports)
        except Exception as exc:  # the thread must live on: kept queued, retried
            with self._queue:
                self._nodes |= nodes
                self._ports |= ports
            database = isinstance(exc, DatabaseError)
            self.counts[f"retried: {'database error' if database else 'error'}"] += 1
            if not self._failing:
                LOG.log(logging.WARNING if database else logging.ERROR,
                        "Ironic notifications not applied yet: %s; retrying every %.0f s "
                        "(nothing is dropped)", exc if database else repr(exc),
                        RETRY_INTERVAL)
            self._failing = True
            return False
        if self._failing:
            LOG.info("Queued Ironic notifications applied: the database answers again")
        self._failing = False
        return True

    # -- decisions ---------------------------------------------------------------------
    def apply(self, nodes: Collection[str] = (), ports: Collection[str] = ()) -> None:
        """Re-read the named nodes and ports and apply what the database says now;
        raises DatabaseError (nothing applied then)."""
        allow: set[str] = set()
        deny: set[str] = set()
        with self._lock:
            interfaces, scope = self.supported_interfaces(), self.scope()
            before = set(self._served)
            starting = self._port_changes(ports, interfaces, scope, allow, deny)
            self._node_changes({*nodes, *starting}, interfaces, scope, allow, deny)
            held = {mac for owned in self._served.values() for mac in owned.values()}
            deny -= allow | held  # a MAC a served port still has stays allowed
            # Only a node starting or ceasing to be served changes the unknown-MAC policy:
            # a batch of irrelevant notifications costs no probe.
            changed = before != set(self._served)
            any_served = changed and (bool(self._served)
                                      or self.source.any_served(interfaces, scope))
        if allow or deny:
            # Decided from database rows with the scope: no second check.
            self.sync.apply_broadcast(allow=sorted(allow), deny=sorted(deny),
                                      origin="Ironic notifications", in_scope=True)
        if changed:
            self.sync.follow_unknown(any_served)
        self.counts["applied"] += len(nodes) + len(ports)
        LOG.debug("Notifications for %d node(s) %s, %d port(s) %s applied: allowed %s, "
                  "denied %s", len(nodes), sorted(nodes)[:5], len(ports), sorted(ports)[:5],
                  sorted(allow), sorted(deny))

    def _port_changes(self, ports: Collection[str], interfaces: Collection[str],
                      scope: policy.Scope, allow: set[str], deny: set[str]) -> set[str]:
        """Decide each port from its row; the nodes that start being served."""
        starting: set[str] = set()
        if not ports:
            return starting
        rows = self.source.read_ports(ports, scope)
        for port in ports:
            old = None
            for owned in self._served.values():
                old = owned.pop(port, None) or old
            row = rows.get(port)
            address = _canonical(row.address) if row is not None else None
            if old is not None and old != address:
                deny.add(old)  # the port lost this address, or is gone
            if row is None or address is None:
                continue
            if not policy.pxe_allowed(row.provision_state, row.inspect_interface, interfaces,
                                      scope=scope, conductor_group=row.conductor_group,
                                      shard=row.shard):
                # Under ``wildcard`` an out-of-scope port gets no file, unless it was served.
                if old is not None or scope.deny_outside \
                        or scope.contains(row.conductor_group, row.shard):
                    deny.add(address)
                continue
            self._forget_address(address)  # moved here from another port
            owned = self._served.get(row.node_uuid) if row.node_uuid else None
            if owned is None:
                starting.add(row.node_uuid)  # served, not known here yet: all its ports
            else:
                owned[port] = address
                allow.add(address)
        return starting

    def _node_changes(self, nodes: Collection[str], interfaces: Collection[str],
                      scope: policy.Scope, allow: set[str], deny: set[str]) -> None:
        if not nodes:
            return
        rows = self.source.read_nodes(nodes, scope)
        for uuid in nodes:
            node = rows.get(uuid)
            served = node is not None and policy.pxe_allowed(
                node.provision_state, node.inspect_interface, interfaces, scope=scope,
                conductor_group=node.conductor_group, shard=node.shard)
            known = uuid in self._served
            if served and not known:
                # The only read of a node's ports: when it starts being served.
                ports = _port_macs(self.source.read_node(uuid, with_ports=True, scope=scope)
                                   or NodeRow(uuid, None, None))
                for address in ports.values():
                    self._forget_address(address)
                self._served[uuid] = ports
                allow.update(ports.values())
            elif not served and known:
                deny.update(self._served.pop(uuid).values())

    def _forget_address(self, address: str) -> None:
        """No other remembered port holds ``address`` any more (addresses are unique)."""
        for owned in self._served.values():
            for port in [p for p, mac in owned.items() if mac == address]:
                del owned[port]

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


def _canonical(address: str | None) -> str | None:
    try:
        return macs.normalize_mac(address) if address else None
    except macs.InvalidMAC:
        return None


def _port_macs(row: NodeRow) -> dict[str, str]:
    """{port UUID: canonical MAC} of a row's ports; invalid stored addresses are skipped."""
    result = {}
    for port, address in row.ports:
        mac = _canonical(address)
        if mac is not None:
            result[port] = mac
    return result
