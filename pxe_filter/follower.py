"""Follow Ironic in real time: each notification re-reads one node and applies the policy.

A notification only names the node; its state, inspect interface and ports are read from the
database with two indexed queries and decided by :func:`pxe_filter.policy.pxe_allowed`, the
function of the full sync. The result is applied like a broadcast (a sequence number keeps an
older sync snapshot from undoing it), and the unknown-MAC wildcard is re-checked with one probe.
MACs this follower served for a node and that the node no longer has (an address changed, a
port deleted or moved, the node deleted) are denied at once. The periodic full sync stays the
source of truth: a lost notification is repaired by it.
"""

import collections
import logging
import threading
from collections.abc import Callable, Collection

from pxe_filter import notifications, policy
from pxe_filter.common import macs
from pxe_filter.common.database import DatabaseError
from pxe_filter.source import Source
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
        self._served: dict[str, set[str]] = {}  # node UUID -> MACs served for it
        self._last: dict[str, str] = {}  # node UUID -> timestamp of the last one applied
        self._reported: set[str] = set()

    def reload(self) -> None:
        """Learn which MACs are served for which node (after a full sync); DatabaseError."""
        rows = self.source.served_nodes(self.supported_interfaces())
        served = {row.uuid: set(macs.split_valid(list(row.addresses))[0]) for row in rows}
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
        """Re-read the node and apply the policy; False if the event was older (ignored)."""
        with self._lock:
            last = self._last.get(event.node_uuid)
            if last is not None and event.timestamp < last:
                self._ignore("older than one already applied",
                             f"{event.event_type} for node {event.node_uuid}")
                return False
            self._last[event.node_uuid] = event.timestamp
            interfaces = self.supported_interfaces()
            row = self.source.read_node(event.node_uuid)
            now = set(macs.split_valid(list(row.addresses))[0]) if row else set()
            served = row is not None and policy.pxe_allowed(
                row.provision_state, row.inspect_interface, interfaces)
            allow = now if served else set()
            deny = (self._served.get(event.node_uuid, set()) | now) - allow
            if allow:
                for other, owned in self._served.items():
                    if other != event.node_uuid:
                        owned.difference_update(allow)  # a port moved here from there
                self._served[event.node_uuid] = allow
            else:
                self._served.pop(event.node_uuid, None)
            if row is None:
                self._last.pop(event.node_uuid, None)
            any_served = bool(self._served) or self.source.any_served(interfaces)
        if allow or deny:
            self.sync.apply_broadcast(allow=sorted(allow), deny=sorted(deny),
                                      origin=f"Notification {event.event_type}")
        self.sync.follow_unknown(any_served)
        self.counts["applied"] += 1
        LOG.debug("%s for node %s: allowed %s, denied %s", event.event_type, event.node_uuid,
                  sorted(allow), sorted(deny))
        return True

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
