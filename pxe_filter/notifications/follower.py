"""Follow Ironic in real time: each notification is a hint of what to read again.

A notification only says which node or port may have changed. The payload is untrusted: a
node event makes the filter re-read that node and its ports, a port event that port and the
address the payload names (a deleted port's MAC must be looked at too), and
:func:`pxe_filter.policy.pxe_allowed`, the function of the full sync, decides from the rows.
No state or timestamp from a payload is ever used, so a forged or reordered notification can
at worst cause a read of the truth. Reads and writes are the sync's
(:meth:`pxe_filter.sync.FilterSync.hint`): one writer, whatever told it to look.
"""

import collections
import logging

from pxe_filter.notifications import payloads as notifications
from pxe_filter.sync import FilterSync

LOG = logging.getLogger(__name__)


class NotificationFollower:
    """Turns Ironic's notifications into hints for the sync; ``counts`` for the status."""

    def __init__(self, sync: FilterSync) -> None:
        self.sync = sync
        self.counts: collections.Counter[str] = collections.Counter()
        self._reported: set[str] = set()

    def handle(self, body: object) -> None:
        """One message from the bus: parsed and handed over as a hint; never raises."""
        self.counts["received"] += 1
        try:
            hint = notifications.parse(body)
        except notifications.Malformed as exc:
            self._ignore("malformed", str(exc))
            return
        if hint is None:
            self.counts["not relevant"] += 1
            return
        try:
            if hint.addresses and self.sync.desired is not None and self.sync.desired.allow:
                # The payload names a port's new address only: an old one that is served
                # is found by a full read (asked for, at most every few seconds).
                self.sync.full_sync_due = True
            self.sync.hint(hint.addresses, nodes=hint.nodes, ports=hint.ports,
                           origin="Ironic notification")
        except Exception as exc:  # the bus thread must live on; the next sync catches up
            self._ignore("error", repr(exc))
            return
        self.counts["applied"] += 1

    def _ignore(self, reason: str, detail: str) -> None:
        self.counts[f"ignored: {reason}"] += 1
        # One line per reason; the counts in the status say how many followed.
        if reason not in self._reported:
            self._reported.add(reason)
            LOG.warning("Ironic notification ignored (%s): %s; further ones are only counted "
                        "(ironic-pxe-filter status)", reason, detail[:300])
        else:
            LOG.debug("Ironic notification ignored (%s): %s", reason, detail[:300])
