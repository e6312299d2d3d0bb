"""Recovery: who is dead, and repairing what dead processes and failed commits left behind.

The one place that takes reservations and claimed callbacks away from their holders. Every
process that processes callbacks (each worker, the API all-in-one) runs :func:`at_start`
once and a pass of its housekeeping every ``[processing]heartbeat_interval`` seconds:

* **Its own leftovers** (:func:`own_leftovers`): reservations of its host that a release
  the database refused or an acquire whose commit failed after all left behind,
  and callbacks claimed under its host with a token none of its threads knows (a claim whose
  commit failed after all). They never ran: given back without counting an attempt.
* **Dead processes** (:func:`take_over_dead`): heartbeats and claims alone decide. A
  registered process whose heartbeat is older than ``[processing]heartbeat_timeout`` is dead:
  its reservations are released, its callbacks given back (the takeover counts no attempt;
  the dead process's own claim did), its row removed. Only by a process whose own heartbeat
  is fresh: after a database outage everyone's heartbeat is old, and nobody is dead.
* **Holders that never registered a heartbeat** (:func:`release_unregistered`, an Ironic
  conductor, an API that hands its data to workers): nothing says whether they live, so a
  reservation on a node that has been in ``inspect wait`` for twice
  ``[inspector]inspect_wait_timeout`` is taken as stale; the timeout task then fails the node.

Each step is a conditional UPDATE/DELETE, so several live processes may run it at once. A
process judged dead that comes back fails its commits (its claim tokens are gone) and
registers again.
"""

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from inspection import locking
from inspection.common.periodic import PeriodicTask
from inspection.db import retry
from inspection.db.models import (
    INSPECT_WAIT,
    InspectionCallback,
    InspectionProcess,
    Node,
    utcnow,
)
from inspection.processing import callbacks
from inspection.timeouts import _timed_out_filter
from inspection.worker import heartbeat
from pxe_filter.common.database import error_reason

LOG = logging.getLogger(__name__)

_procs = InspectionProcess.__table__
_nodes = Node.__table__
_rows = InspectionCallback.__table__


def at_start(engine: Engine, host: str) -> tuple[int, int]:
    """Register ``host`` and take back what a crashed process of this host left: its
    reservations and its claims (their attempt counts: the process died with them).

    Returns (reservations, callbacks) taken back.
    """
    heartbeat.beat(engine, host)
    # ``host`` is this process's own identity (inspection.process_identity), new at every start:
    # only what carries it is taken back, never the work of another live process of the
    # same machine. What a crashed predecessor left is taken over once its heartbeat is
    # stale (take_over_dead).
    reservations = len(locking.release_unheld(engine, host, at_start=True))
    released = callbacks.release_owner(engine, host)
    if reservations or released:
        LOG.warning("Took back %d node reservation(s) and %d accepted callback(s) held by "
                    "this process's identity (%s) before it started", reservations,
                    released, host)
    return reservations, released


def at_stop(engine: Engine, host: str) -> None:
    """Clean stop: give back what ``host`` still has claimed, then leave the table."""
    callbacks.release_owner(engine, host)
    heartbeat.leave(engine, host)


def own_leftovers(engine: Engine, host: str,
                  tokens: set[str] | None) -> tuple[list[str], int]:
    """Clear ``host``'s reservations that no thread of this process holds, and give back its
    claims whose token is not in ``tokens`` (the caller holds its claim lock meanwhile;
    None: this process claims nothing, its host's claims are none of its business).

    Returns (UUIDs of the nodes released, callbacks given back).
    """
    nodes = locking.release_unheld(engine, host)
    if nodes:
        LOG.warning("Released %d reservation(s) of this host (%s) that nothing here held any "
                    "more (a release or a commit that failed while the database was "
                    "unavailable): %s", len(nodes), host, ", ".join(nodes))
    given = 0 if tokens is None else callbacks.release_unknown(engine, host, tokens)
    if given:
        LOG.warning("Gave back %d accepted callback(s) claimed by this host (%s) by a commit "
                    "that failed after all; they are processed now", given, host)
    return nodes, given


@dataclass(frozen=True)
class Takeover:
    """What was taken over from one dead host."""

    host: str
    heartbeat_at: datetime
    reservations: int
    callbacks: int


def take_over_dead(engine: Engine, host: str, timeout: float,
                   now: datetime | None = None) -> list[Takeover]:
    """Release the reservations and callbacks of every host (but ``host``) whose heartbeat
    is older than ``timeout`` seconds, then forget the host.

    Nothing is taken while ``host``'s own heartbeat is missing or as old: the database was
    unreachable, and the others may be as alive as this process.
    """
    now = now or heartbeat.database_now(engine)
    if not heartbeat.is_fresh(engine, host, timeout, now):
        LOG.info("Not looking for dead processes: the heartbeat of this process (%s) is not "
                 "fresh yet", host)
        return []
    cutoff = now - timedelta(seconds=timeout)
    with engine.connect() as conn:
        dead = conn.execute(sa.select(_procs.c.host, _procs.c.heartbeat_at)
                            .where(_procs.c.heartbeat_at < cutoff, _procs.c.host != host)
                            ).all()
    done = []
    with engine.begin() as conn:
        # Claims of hosts that left the table (judged dead while claiming, or a clean stop
        # that could not finish them).
        orphans = conn.execute(
            sa.update(_rows).where(_rows.c.owner.is_not(None),
                                   _rows.c.owner.not_in(sa.select(_procs.c.host)))
            .values(owner=None, claim=None)).rowcount
    if orphans:
        LOG.warning("Took over %d accepted callback(s) claimed by processes that are no "
                    "longer registered", orphans)
    for row in dead:
        taken = _take_over(engine, row, timeout)
        if taken is not None:
            done.append(taken)
    return done


def _take_over(engine: Engine, row, timeout: float) -> Takeover | None:
    # One transaction: the process's row goes only if its heartbeat is still the stale one
    # read above (a process that came back meanwhile keeps its reservations), and its
    # reservations go with it. Reservations first, so a callback claimed again finds its
    # node free.
    try:
        with engine.begin() as conn:
            if conn.execute(sa.delete(_procs).where(
                    _procs.c.host == row.host,
                    _procs.c.heartbeat_at == row.heartbeat_at)).rowcount != 1:
                LOG.info("Process %s wrote its heartbeat again: it is alive, nothing taken "
                         "over", row.host)
                return None
            reservations = conn.execute(
                sa.update(_nodes).where(_nodes.c.reservation == row.host)
                .values(reservation=None, updated_at=_nodes.c.updated_at)).rowcount
    except sa.exc.OperationalError as exc:
        if not retry.is_lock_conflict(exc):
            raise
        # A frozen (not dead) process still holds a node row in an open transaction.
        LOG.warning("Process %s is dead but a node it reserved is locked by its open "
                    "transaction; its reservations are released at the next pass", row.host)
        if _heartbeat_of(engine, row.host) == row.heartbeat_at:
            # Its claims are fenced by their tokens: they can go at once.
            callbacks.release_owner(engine, row.host)
        return None
    released = callbacks.release_owner(engine, row.host)
    LOG.warning("Process %s is dead (last heartbeat %s UTC, more than "
                "[processing]heartbeat_timeout = %s s ago): took over %d accepted "
                "callback(s) and released %d node reservation(s) it held", row.host,
                row.heartbeat_at.isoformat(sep=" ", timespec="seconds"), timeout,
                released, reservations)
    return Takeover(row.host, row.heartbeat_at, reservations, released)


def _heartbeat_of(engine: Engine, host: str) -> datetime | None:
    with engine.connect() as conn:
        return conn.execute(sa.select(_procs.c.heartbeat_at)
                            .where(_procs.c.host == host)).scalar()


def release_unregistered(engine: Engine, inspect_wait_timeout: int,
                         now: datetime | None = None) -> list[str]:
    """Clear reservations held by hosts that never registered a heartbeat on nodes waiting
    for twice ``inspect_wait_timeout``; returns the nodes' UUIDs.

    The timeout fails unreserved nodes after one timeout and processing takes seconds, so
    such a reservation belongs to a dead (or hung) process. Ironic records no time with a
    reservation, hence the inspection start time as the clock.
    """
    if not inspect_wait_timeout:
        return []
    # The clock that stamps inspection_started_at (as the timeout task does).
    cutoff = (now or utcnow()) - timedelta(seconds=2 * inspect_wait_timeout)
    registered = sa.select(_procs.c.host)
    with engine.connect() as conn:
        rows = conn.execute(sa.select(_nodes.c.id, _nodes.c.uuid, _nodes.c.reservation)
                            .where(_timed_out_filter(cutoff),
                                   _nodes.c.reservation.is_not(None),
                                   _nodes.c.reservation.not_in(registered))).all()
    released = []
    for row in rows:
        with engine.begin() as conn:
            # Only if nothing changed since the query: same holder, still unregistered and
            # the node still waiting.
            count = conn.execute(
                sa.update(_nodes)
                .where(_nodes.c.id == row.id, _nodes.c.reservation == row.reservation,
                       _nodes.c.provision_state == INSPECT_WAIT,
                       _nodes.c.reservation.not_in(registered))
                .values(reservation=None, updated_at=_nodes.c.updated_at)).rowcount
        if count == 1:
            LOG.warning("Node %s: cleared the reservation of %s, held while the node waited "
                        "for more than twice the inspect-wait timeout (%s s); the holder "
                        "never registered a heartbeat and is considered dead", row.uuid,
                        row.reservation, inspect_wait_timeout)
            released.append(row.uuid)
    return released


class ReservationRepair(PeriodicTask):
    """Clears this host's leftover reservations every ``interval`` seconds, for a process
    that takes reservations but processes no callbacks (an API that hands its data to
    workers: its aborts and inspects reserve nodes too)."""

    thread_name = "reservation-repair"

    def __init__(self, engine: Engine, host: str, interval: float) -> None:
        super().__init__(interval)
        self.engine, self.host = engine, host

    def stop(self, timeout: float | None = None) -> None:
        """Stop, and leave the process table (a clean stop is no death to take over)."""
        super().stop(timeout)
        try:
            heartbeat.leave(self.engine, self.host)
        except sa.exc.SQLAlchemyError as exc:
            LOG.warning("Could not leave the process table (%s): the workers forget this "
                        "process after [processing]heartbeat_timeout", error_reason(exc))

    def run_once(self) -> list[str]:
        """One pass (a heartbeat, then the leftovers); database errors are logged."""
        try:
            # Registered like the workers: if this process dies, they take over what it
            # reserved once its heartbeat is stale.
            heartbeat.beat(self.engine, self.host)
            return own_leftovers(self.engine, self.host, tokens=None)[0]
        except sa.exc.SQLAlchemyError as exc:
            LOG.warning("Cannot look for leftover node reservations of %s: %s; retrying in "
                        "%s s", self.host, error_reason(exc), self.interval)
            return []
