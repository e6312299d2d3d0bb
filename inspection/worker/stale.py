"""Recovering nodes whose reservation outlived the worker that took it.

A worker that dies while processing a node leaves the node in 'inspect wait' with its
reservation set; the inspect-wait timeout skips reserved nodes, so without help such a node
would wait forever. Two remedies, both run by every worker:

* At start-up a worker drops the reservations held under its own ``[DEFAULT]host``
  (:func:`inspection.locking.clear_stale`): they can only be left over from a crash.
  So every worker process needs a host name of its own.
* For holders that never come back (a host gone for good), a reservation on a node that has
  been in 'inspect wait' for TWICE the inspect-wait timeout is treated as stale: the timeout
  task fails unreserved nodes after one timeout, processing takes seconds, so a reservation
  still held a whole timeout later belongs to a dead (or hung) process. It is cleared with a
  conditional UPDATE (same holder, still 'inspect wait'), then the ordinary timeout pass fails
  the node with its usual error. Ironic records no time with a reservation, hence the
  inspection start time as the clock.
"""

import logging
from datetime import datetime, timedelta

import sqlalchemy as sa
from oslo_config import cfg
from sqlalchemy.engine import Engine

from inspection.db.models import INSPECT_WAIT, Node, utcnow
from inspection.timeouts import TimeoutTask, _timed_out_filter
from pxe_filter.broadcast import FilterNotifier

LOG = logging.getLogger(__name__)

_nodes = Node.__table__


def release_dead_reservations(engine: Engine, conf: cfg.ConfigOpts,
                              now: datetime | None = None) -> list[str]:
    """Clear reservations of nodes waiting for twice the timeout; returns their UUIDs."""
    timeout = conf.inspector.inspect_wait_timeout
    if not timeout:
        return []
    cutoff = (now or utcnow()) - timedelta(seconds=2 * timeout)
    with engine.connect() as conn:
        rows = conn.execute(sa.select(_nodes.c.id, _nodes.c.uuid, _nodes.c.reservation)
                            .where(_timed_out_filter(cutoff),
                                   _nodes.c.reservation.is_not(None))).all()
    released = []
    for row in rows:
        with engine.begin() as conn:
            # Only if nothing changed since the query: same holder, still waiting.
            count = conn.execute(
                sa.update(_nodes)
                .where(_nodes.c.id == row.id, _nodes.c.reservation == row.reservation,
                       _nodes.c.provision_state == INSPECT_WAIT)
                .values(reservation=None, updated_at=_nodes.c.updated_at)).rowcount
        if count == 1:
            LOG.warning("Node %s: cleared the reservation of %s, held while the node waited "
                        "for more than twice the inspect-wait timeout (%s s); its holder is "
                        "considered dead", row.uuid, row.reservation, timeout)
            released.append(row.uuid)
    return released


class WorkerTimeoutTask(TimeoutTask):
    """The inspect-wait timeout, preceded by the release of dead holders' reservations."""

    def run_once(self) -> list[str]:
        """Release dead reservations, then fail every node past its timeout."""
        try:
            release_dead_reservations(self.engine, self.conf)
        except Exception:
            LOG.exception("Could not look for dead reservations; retrying in %s s",
                          self.interval)
        return super().run_once()


def timeout_interval(conf: cfg.ConfigOpts) -> float:
    """Seconds between timeout passes: a tenth of the timeout, between 1 s and 60 s."""
    timeout = conf.inspector.inspect_wait_timeout or 600
    return float(min(60, max(1, timeout // 10)))


def make_timeout_task(engine: Engine, conf: cfg.ConfigOpts,
                      notifier: FilterNotifier) -> WorkerTimeoutTask:
    """The worker's timeout task, run every :func:`timeout_interval` seconds."""
    return WorkerTimeoutTask(engine, conf, notifier, interval=timeout_interval(conf))
