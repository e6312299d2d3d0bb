"""Node reservations, the way Ironic conductors lock nodes.

``UPDATE nodes SET reservation=<host> WHERE id=? AND reservation IS NULL`` in a transaction of
its own, committed at once so every other process (this service or an Ironic conductor) sees
it; cleared the same way when done. A node reserved by someone else raises
:class:`~inspection.errors.NodeLocked` at once: acquiring never waits for the holder.
"""

import logging
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.orm import Session

from inspection.db import retry
from inspection.db.models import Node
from inspection.errors import NodeLocked, NotFound

LOG = logging.getLogger(__name__)

#: Longest wait (seconds) for a row lock held by another open transaction on the node row:
#: a reservation attempt reports "busy" rather than hang behind a stuck transaction.
ROW_LOCK_TIMEOUT = 5.0

_nodes = Node.__table__
# Taking or dropping a reservation is no change of the node: keep updated_at as it was
# (the column's onupdate would otherwise bump it).
_KEEP_UPDATED_AT = {"updated_at": _nodes.c.updated_at}

# (host, node id) of the reservations some code of this process holds or is taking right
# now, and of those whose fate the database left uncertain: a release it refused, an acquire
# that failed with an error after which the commit may still have happened. release_unheld()
# clears the uncertain ones that the database shows held and nothing here holds.
_held: Counter[tuple[str, int]] = Counter()
_uncertain: set[tuple[str, int]] = set()
_held_lock = threading.Lock()


def _hold(host: str, node_id: int) -> None:
    with _held_lock:
        _held[(host, node_id)] += 1


def _unhold(host: str, node_id: int) -> None:
    with _held_lock:
        _held[(host, node_id)] -= 1
        if _held[(host, node_id)] <= 0:
            del _held[(host, node_id)]


def _limit_row_lock_wait(conn: Connection, seconds: float) -> None:
    # SQLite waits at most its busy_timeout; MariaDB/MySQL innodb_lock_wait_timeout (50 s
    # by default); PostgreSQL waits forever unless told otherwise.
    if conn.dialect.name == "postgresql":
        conn.execute(sa.text(f"SET LOCAL lock_timeout = {int(seconds * 1000)}"))


def acquire(engine: Engine, node_id: int, host: str,
            lock_timeout: float = ROW_LOCK_TIMEOUT) -> None:
    """Reserve node ``node_id`` for ``host``; :class:`NodeLocked` if someone else holds it."""
    _hold(host, node_id)  # before the UPDATE, so release_unheld() never sees it unheld
    try:
        acquired = _try_acquire(engine, node_id, host, lock_timeout)
    except NodeLocked:  # a lock conflict: the UPDATE did not happen
        _unhold(host, node_id)
        raise
    except BaseException:
        with _held_lock:
            _uncertain.add((host, node_id))  # the commit may have happened after all
        _unhold(host, node_id)
        raise
    if acquired:
        LOG.debug("Node %s reserved by %s", node_id, host)
        return
    _unhold(host, node_id)
    with engine.connect() as conn:
        row = conn.execute(sa.select(_nodes.c.uuid, _nodes.c.reservation)
                           .where(_nodes.c.id == node_id)).first()
    if row is None:
        raise NotFound(f"node {node_id} does not exist")
    LOG.info("Node %s is locked by %s", row.uuid, row.reservation)
    raise NodeLocked(node_id, row.reservation)


def _try_acquire(engine: Engine, node_id: int, host: str, lock_timeout: float) -> bool:
    try:
        with engine.begin() as conn:
            _limit_row_lock_wait(conn, lock_timeout)
            result = conn.execute(
                sa.update(_nodes)
                .where(_nodes.c.id == node_id, _nodes.c.reservation.is_(None))
                .values(reservation=host, **_KEEP_UPDATED_AT))
            return result.rowcount == 1
    except sa.exc.OperationalError as exc:
        if not retry.is_lock_conflict(exc):
            raise
        # Someone is busy with this row right now.
        LOG.info("Node %s: reservation attempt timed out (%s)", node_id,
                 str(exc.orig or exc).strip().splitlines()[0])
        raise NodeLocked(node_id) from None


def release(engine: Engine, node_id: int, host: str) -> bool:
    """Clear ``host``'s reservation of the node; False if ``host`` did not hold it.

    A transient database error is retried with backoff (:func:`inspection.db.retry.call`);
    if the database still refuses, the error is raised and the reservation is a leftover
    that the housekeeping of a processing process clears (:func:`release_unheld`).
    """
    try:
        cleared = retry.call(_clear, engine, node_id, host, what=f"releasing node {node_id}")
    except BaseException:
        with _held_lock:
            _uncertain.add((host, node_id))
        raise
    finally:
        _unhold(host, node_id)  # once, however many tries the release took
    if not cleared:
        LOG.warning("Node %s was not reserved by %s any more when releasing it", node_id, host)
        return False
    return True


def _clear(engine: Engine, node_id: int, host: str) -> bool:
    with engine.begin() as conn:
        return conn.execute(
            sa.update(_nodes).where(_nodes.c.id == node_id, _nodes.c.reservation == host)
            .values(reservation=None, **_KEEP_UPDATED_AT)).rowcount == 1


def still_held(session: Session, node_id: int, host: str) -> bool:
    """Re-assert ``host``'s reservation inside ``session``'s transaction before it commits.

    The conditional UPDATE takes the node row's write lock, so nothing can take the
    reservation away between this check and the commit; False means it is already gone
    (e.g. the inspect-wait timeout judged this holder dead) and the caller must roll back.
    """
    result = session.execute(
        sa.update(_nodes).where(_nodes.c.id == node_id, _nodes.c.reservation == host)
        .values(reservation=host, **_KEEP_UPDATED_AT))
    return result.rowcount == 1


@contextmanager
def reserved(engine: Engine, node_id: int, host: str,
             lock_timeout: float = ROW_LOCK_TIMEOUT) -> Iterator[None]:
    """Hold the node's reservation for the ``with`` block, released even on errors."""
    acquire(engine, node_id, host, lock_timeout)
    try:
        yield
    finally:
        release(engine, node_id, host)


def forget(node_id: int, host: str) -> None:
    """The node was deleted under ``host``'s reservation: nothing is left to release."""
    _unhold(host, node_id)


def release_unheld(engine: Engine, host: str, at_start: bool = False) -> list[str]:
    """Clear the leftover reservations of ``host``; returns the nodes' UUIDs.

    Leftovers: those a release or an acquire of this process left uncertain, and that it
    does not hold again; ``at_start``, every reservation of the host (a crashed process of
    this host left them). Every process that takes reservations needs a ``[DEFAULT]host``
    of its own.
    """
    with engine.connect() as conn:
        rows = conn.execute(sa.select(_nodes.c.id, _nodes.c.uuid)
                            .where(_nodes.c.reservation == host)).all()
    # Under the lock: an acquire that starts meanwhile waits, so it is never undone here.
    with _held_lock:
        stray = [row for row in rows if (host, row.id) not in _held
                 and (at_start or (host, row.id) in _uncertain)]
        if stray:  # a refusal here keeps what is known for the next call
            with engine.begin() as conn:
                _limit_row_lock_wait(conn, ROW_LOCK_TIMEOUT)
                conn.execute(sa.update(_nodes)
                             .where(_nodes.c.id.in_([row.id for row in stray]),
                                    _nodes.c.reservation == host)
                             .values(reservation=None, **_KEEP_UPDATED_AT))
        # Settled: cleared now, held again, or not reserved by this host after all.
        _uncertain.difference_update([entry for entry in _uncertain if entry[0] == host
                                      and entry not in _held])
    return [row.uuid for row in stray]
