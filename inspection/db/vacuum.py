"""Vacuuming a table whose large rows are replaced often, on PostgreSQL.

PostgreSQL never updates in place: each replacement of a pending callback leaves a dead copy
of its payload (TOAST chunks) that only VACUUM makes reusable, and autovacuum may come
minutes later (or never, behind a busy server): a flood of replacements grew the table by
hundreds of MB. So the writers count the bytes they write and, every ``every_bytes``, a
background thread vacuums the table; the space is then reused and the table stays within
about that much dead data. MariaDB (InnoDB purge) and SQLite (free pages) reuse space
themselves: nothing runs there.
"""

import logging
import threading

import sqlalchemy as sa
from sqlalchemy.engine import Engine

LOG = logging.getLogger(__name__)


class Vacuum:
    """Counts bytes written to ``table`` and vacuums it every ``every_bytes``; thread-safe."""

    def __init__(self, table: str, every_bytes: int) -> None:
        self.table = table
        self.every_bytes = every_bytes
        self._lock = threading.Lock()
        self._written = 0
        self._running: threading.Thread | None = None
        self._failed = False

    def written(self, engine: Engine, size: int) -> None:
        """Note ``size`` bytes written (each becomes dead data once replaced or deleted)."""
        if engine.dialect.name != "postgresql" or self._failed:
            return
        with self._lock:
            self._written += size
            if self._written < self.every_bytes or self._running is not None:
                return
            self._running = threading.Thread(target=self._run, args=(engine,), daemon=True,
                                             name=f"vacuum-{self.table}")
            self._running.start()

    def _run(self, engine: Engine) -> None:
        while True:
            with self._lock:
                if self._written < self.every_bytes or self._failed:
                    self._running = None
                    return
                self._written = 0
            try:
                with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
                    conn.execute(sa.text(f"VACUUM {self.table}"))
            except sa.exc.SQLAlchemyError as exc:
                with self._lock:
                    self._failed = "must be owner" in str(exc) or "permission" in str(exc)
                LOG.warning("Could not vacuum table %s (%s): replaced inspection data "
                            "stays on disk until autovacuum runs. Let the service's "
                            "database user own the table (run ironic-inspection dbsync as "
                            "it)", self.table, str(exc).splitlines()[0][:200])

    def wait_idle(self, timeout: float) -> bool:
        """Wait for a vacuum under way (tests); False if it is still running."""
        with self._lock:
            running = self._running
        if running is not None:
            running.join(timeout)
            return not running.is_alive()
        return True
