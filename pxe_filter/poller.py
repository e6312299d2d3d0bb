"""Follow the database by what changed, with no message at all (Ironic with JSON-RPC).

Every ``[pxe_filter]poll_interval`` the main loop asks the source for a cheap change signal
per table (the database's own per-table statistics, see
:meth:`DatabaseSource.change_signal`); only for a table whose signal moved, and for a few
seconds after, are its rows created or updated since that table's last read (less
``poll_margin`` for clock skew and whole-second timestamps) read and handed to the sync as
hints, which it confirms with its usual lookup: a node's state change scans ``nodes``, not
``ports``. Rows that went away show in a table's count and highest id; then a full sync is
asked for. The periodic full sync stays.
"""

import datetime
import logging
import time
from collections.abc import Callable
from typing import Any

from pxe_filter.common.database import DatabaseError
from pxe_filter.source import DatabaseSource
from pxe_filter.sync import POLL, FilterSync

LOG = logging.getLogger(__name__)

_UNREAD = object()
#: Seconds between polls while they fail: each failing read may hold the main loop for up to
#: [pxe_filter]database_read_timeout, and the full sync retries anyway.
FAILING_INTERVAL = 10.0
#: Seconds a table's rows are still read after a change to it was seen. PostgreSQL holds
#: back a process's counters for up to 10 s when it wrote less than a second after it last
#: published them, so a write right after a seen one (a conductor's second save) shows only
#: in the rows (a new row shows at once anyway, in the table's highest id).
SETTLE = 2.5
TABLES = ("nodes", "ports")


def _utcnow() -> datetime.datetime:
    """Naive UTC, as Ironic's ORM writes ``updated_at``."""
    return datetime.datetime.now(datetime.UTC).replace(tzinfo=None)


class Poller:
    """Hints the sync with the rows changed since the last poll; run from the main loop."""

    def __init__(self, source: DatabaseSource, sync: FilterSync,
                 options: Callable[[], Any]) -> None:
        self.source = source
        self.sync = sync
        # The daemon's options as last read (poll_interval, poll_margin): a SIGHUP that
        # brings an invalid value is refused whole, never read here.
        self.options = options
        # per table: its signal, the start of its last read less the margin, its counts
        # then (rows, highest id, new rows) and until when its rows are read anyway
        self._signal: dict[str, object] = {}
        since = _utcnow() - datetime.timedelta(seconds=options().poll_margin)
        self._since = dict.fromkeys(TABLES, since)
        self._counts: dict[str, tuple[int, int, int]] = {}
        self._settle_until = dict.fromkeys(TABLES, 0.0)
        self._next = 0.0
        self._failing = False

    def wait(self) -> float | None:
        """Seconds until the next poll is due (None: polling is off)."""
        interval = self.options().poll_interval
        return max(self._next - time.monotonic(), 0.0) if interval else None

    def poll(self) -> None:
        """Poll if due; a database error is logged and the next poll tries again."""
        interval = self.options().poll_interval
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
        signal = self.source.change_signal() or {}  # none: every table's rows, every poll
        now = time.monotonic()
        moved = {table: value for table in TABLES
                 if (value := signal.get(table, _UNREAD)) is _UNREAD
                 or value != self._signal.get(table, _UNREAD)}
        for table in moved:
            self._settle_until[table] = now + SETTLE
        tables = [table for table in TABLES
                  if table in moved or now < self._settle_until[table]]
        if not tables:
            return
        started = _utcnow() - datetime.timedelta(seconds=self.options().poll_margin)
        found = self.source.changes(
            {table: self._since[table] for table in tables},
            {table: self._counts[table][1] for table in tables if table in self._counts})
        gone = [table for table, (rows, _, new) in found.counts.items()
                if table in self._counts and self._counts[table][0] + new > rows]
        self._since.update(dict.fromkeys(tables, started))
        self._signal.update(moved)
        self._counts.update(found.counts)
        if gone:
            LOG.info("Rows deleted from %s since the last poll: a full sync follows",
                     " and ".join(gone))
            self.sync.full_sync_due = True
        if found.nodes or found.ports:
            self.sync.hint(nodes=found.nodes, ports=found.ports, origin=POLL)
