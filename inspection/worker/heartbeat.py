"""Which processes are alive, and taking over the work of those that are not.

Every process that processes callbacks (each worker; the API all-in-one) keeps a row in
``inspection_processes`` with its ``[DEFAULT]host`` and a heartbeat written every
``[processing]heartbeat_interval`` seconds, like Ironic's conductors. A host whose heartbeat
is older than ``[processing]heartbeat_timeout`` is dead: any live process releases the node
reservations it held, gives its claimed callbacks back to be claimed again, and removes its
row. Each step is a conditional UPDATE/DELETE, so several live processes may do it at once.
A dead process that comes back fails its commits (its claim tokens are gone) and registers
again.
"""

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from inspection import locking
from inspection.db.models import InspectionCallback, InspectionProcess, Node, utcnow
from inspection.processing import callbacks

LOG = logging.getLogger(__name__)

_procs = InspectionProcess.__table__
_nodes = Node.__table__
_rows = InspectionCallback.__table__


#: The database server's current UTC time, per backend.
_DB_UTC_NOW = {"postgresql": "SELECT timezone('utc', clock_timestamp())",
               "mysql": "SELECT UTC_TIMESTAMP(6)",
               "sqlite": "SELECT strftime('%Y-%m-%d %H:%M:%f', 'now')"}


def database_now(engine: Engine) -> datetime:
    """Naive UTC time of the database server: heartbeats are stamped and compared with one
    clock, so a host whose clock is off is neither judged dead nor blind to the dead."""
    query = _DB_UTC_NOW.get(engine.dialect.name)
    if query is None:
        return utcnow()
    with engine.connect() as conn:
        value = conn.execute(sa.text(query)).scalar()
    if isinstance(value, str):  # SQLite
        value = datetime.fromisoformat(value)
    return value.replace(tzinfo=None)


def beat(engine: Engine, host: str, now: datetime | None = None) -> bool:
    """Write ``host``'s heartbeat; False if its row was gone (others judged it dead)."""
    now = now or database_now(engine)
    with engine.begin() as conn:
        if conn.execute(sa.update(_procs).where(_procs.c.host == host)
                        .values(heartbeat_at=now)).rowcount == 1:
            return True
    try:
        with engine.begin() as conn:
            conn.execute(sa.insert(_procs).values(host=host, started_at=now, heartbeat_at=now))
    except sa.exc.IntegrityError:  # registered by a process of the same name meanwhile
        return True
    return False


def register(engine: Engine, host: str) -> int:
    """Start-up: heartbeat, and give back callbacks this host claimed before it crashed."""
    beat(engine, host)
    released = callbacks.release_owner(engine, host)
    if released:
        LOG.warning("Gave back %d accepted callback(s) claimed by this host (%s) before it "
                    "stopped without finishing them; they are processed again now. Every "
                    "worker and API process needs its own [DEFAULT]host", released, host)
    return released


def deregister(engine: Engine, host: str) -> None:
    """Clean stop: hand back anything still claimed, then leave the table."""
    callbacks.release_owner(engine, host)
    with engine.begin() as conn:
        conn.execute(sa.delete(_procs).where(_procs.c.host == host))


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
    is older than ``timeout`` seconds, then forget the host."""
    cutoff = (now or database_now(engine)) - timedelta(seconds=timeout)
    with engine.connect() as conn:
        dead = conn.execute(sa.select(_procs.c.host, _procs.c.heartbeat_at)
                            .where(_procs.c.heartbeat_at < cutoff, _procs.c.host != host)
                            ).all()
    done = []
    with engine.begin() as conn:
        # Claims of hosts that left the table (a clean stop that could not finish them).
        orphans = conn.execute(
            sa.update(_rows).where(_rows.c.owner.is_not(None),
                                   _rows.c.owner.not_in(sa.select(_procs.c.host)))
            .values(owner=None, claim=None)).rowcount
    if orphans:
        LOG.warning("Took over %d accepted callback(s) claimed by processes that are no "
                    "longer registered", orphans)
    for row in dead:
        # Reservations first: a callback claimed again must find its node free.
        try:
            with engine.begin() as conn:
                reservations = conn.execute(
                    sa.update(_nodes).where(_nodes.c.reservation == row.host)
                    .values(reservation=None, updated_at=_nodes.c.updated_at)).rowcount
        except sa.exc.OperationalError as exc:
            if not locking.is_lock_conflict(exc):
                raise
            # A frozen (not dead) process still holds a node row in an open transaction.
            LOG.warning("Process %s is dead but a node it reserved is locked by its open "
                        "transaction; its reservations are released at the next pass",
                        row.host)
            reservations = None
        released = callbacks.release_owner(engine, row.host)
        if reservations is None:
            continue  # forget the host only once its reservations are gone
        with engine.begin() as conn:
            # Only if it did not come back meanwhile.
            conn.execute(sa.delete(_procs).where(_procs.c.host == row.host,
                                                 _procs.c.heartbeat_at == row.heartbeat_at))
        LOG.warning("Process %s is dead (last heartbeat %s UTC, more than "
                    "[processing]heartbeat_timeout = %s s ago): took over %d accepted "
                    "callback(s) and released %d node reservation(s) it held", row.host,
                    row.heartbeat_at.isoformat(sep=" ", timespec="seconds"), timeout,
                    released, reservations)
        done.append(Takeover(row.host, row.heartbeat_at, reservations, released))
    return done
