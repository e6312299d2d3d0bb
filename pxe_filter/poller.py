"""Follow the database by what changed, with no message at all (Ironic with JSON-RPC).

Every ``[pxe_filter]poll_interval`` the main loop asks the source for a cheap change signal
(the database's own per-table statistics, see :meth:`DatabaseSource.change_signal`); only
when it moved, and for a few seconds after, are the ``nodes`` and ``ports`` rows created or
updated since the last read
(less ``poll_margin`` for clock skew and whole-second timestamps) read and handed to the
sync as hints, which it confirms with its usual lookup. Rows that went away show in the
tables' counts and highest ids; then a full sync is asked for. The periodic full sync stays.
"""

import datetime
import logging
import time

from oslo_config import cfg

from pxe_filter.common.database import DatabaseError
from pxe_filter.source import DatabaseSource
from pxe_filter.sync import POLL, FilterSync

LOG = logging.getLogger(__name__)

_UNREAD = object()
#: Seconds between polls while they fail: each failing read may hold the main loop for up to
#: [pxe_filter]database_read_timeout, and the full sync retries anyway.
FAILING_INTERVAL = 10.0
#: Seconds rows are still read after a change was seen. PostgreSQL holds back a process's
#: counters for up to 10 s when it wrote less than a second after it last published them, so
#: a write right after a seen one (a conductor's second save) shows only in its rows.
SETTLE = 2.5


def _utcnow() -> datetime.datetime:
    """Naive UTC, as Ironic's ORM writes ``updated_at``."""
    return datetime.datetime.now(datetime.UTC).replace(tzinfo=None)


class Poller:
    """Hints the sync with the rows changed since the last poll; run from the main loop."""

    def __init__(self, source: DatabaseSource, sync: FilterSync, conf: cfg.ConfigOpts) -> None:
        self.source = source
        self.sync = sync
        self.opts = conf.pxe_filter
        self._signal: object = _UNREAD
        self._since = _utcnow() - datetime.timedelta(seconds=self.opts.poll_margin)
        self._counts: dict[str, tuple[int, int, int]] | None = None
        self._next = 0.0
        self._settle_until = 0.0
        self._failing = False

    def wait(self) -> float | None:
        """Seconds until the next poll is due (None: polling is off)."""
        interval = self.opts.poll_interval
        return max(self._next - time.monotonic(), 0.0) if interval else None

    def poll(self) -> None:
        """Poll if due; a database error is logged and the next poll tries again."""
        interval = self.opts.poll_interval
        if not interval or time.monotonic() < self._next:
            return
        self._next = time.monotonic() + interval
        try:
            self._poll()
        except DatabaseError as exc:
            if not self._failing:
                LOG.warning("Poll for changed nodes and ports failed: %s; changes wait for "
                            "the next poll or full sync (check the database server); "
                            "polling every %.0f s until it answers", exc, FAILING_INTERVAL)
            self._failing = True
            self._next = time.monotonic() + max(interval, FAILING_INTERVAL)
            return
        if self._failing:
            LOG.info("Poll for changed nodes and ports works again")
        self._failing = False

    def _poll(self) -> None:
        signal = self.source.change_signal()
        if signal is not None and signal == self._signal \
                and time.monotonic() >= self._settle_until:
            return
        if signal != self._signal:
            self._settle_until = time.monotonic() + SETTLE
        started = _utcnow()
        previous = self._counts
        found = self.source.changes(
            self._since, {table: top for table, (_, top, _) in (previous or {}).items()})
        self._since = started - datetime.timedelta(seconds=self.opts.poll_margin)
        self._signal, self._counts = signal, found.counts
        gone = previous is not None and [
            table for table, (rows, _, new) in found.counts.items()
            if previous[table][0] + new > rows]
        if gone:
            LOG.info("Rows deleted from %s since the last poll: a full sync follows",
                     " and ".join(gone))
            self.sync.full_sync_due = True
        if found.nodes or found.ports:
            self.sync.hint(allow=sorted(found.addresses), nodes=found.nodes,
                           ports=found.ports, origin=POLL)
