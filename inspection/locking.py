"""Node reservations, the way Ironic conductors lock nodes.

``UPDATE nodes SET reservation=<host> WHERE id=? AND reservation IS NULL`` in a transaction of
its own, committed at once so every other process (this service or an Ironic conductor) sees
it; cleared the same way when done. A node reserved by someone else raises
:class:`~inspection.errors.NodeLocked` at once: acquiring never waits for the holder.
"""

import logging
from collections.abc import Iterator
from contextlib import contextmanager

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.orm import Session

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


def _limit_row_lock_wait(conn: Connection, seconds: float) -> None:
    # SQLite waits at most its busy_timeout; MariaDB/MySQL innodb_lock_wait_timeout (50 s
    # by default); PostgreSQL waits forever unless told otherwise.
    if conn.dialect.name == "postgresql":
        conn.execute(sa.text(f"SET LOCAL lock_timeout = {int(seconds * 1000)}"))


def is_lock_conflict(exc: sa.exc.DBAPIError) -> bool:
    """True for a lock wait timeout or a deadlock (retrying later may succeed)."""
    orig = exc.orig
    code = getattr(orig, "pgcode", None)
    if code is not None:
        return code in ("55P03", "40P01")  # lock_not_available, deadlock_detected
    args = getattr(orig, "args", ())
    if args and args[0] in (1205, 1213):  # MySQL lock wait timeout, deadlock
        return True
    return "database is locked" in str(orig)


def acquire(engine: Engine, node_id: int, host: str,
            lock_timeout: float = ROW_LOCK_TIMEOUT) -> None:
    """Reserve node ``node_id`` for ``host``; :class:`NodeLocked` if someone else holds it."""
    try:
        with engine.begin() as conn:
            _limit_row_lock_wait(conn, lock_timeout)
            result = conn.execute(
                sa.update(_nodes)
                .where(_nodes.c.id == node_id, _nodes.c.reservation.is_(None))
                .values(reservation=host, **_KEEP_UPDATED_AT))
            acquired = result.rowcount == 1
    except sa.exc.OperationalError as exc:
        if not is_lock_conflict(exc):
            raise
        # Someone is busy with this row right now.
        LOG.info("Node %s: reservation attempt timed out (%s)", node_id,
                 str(exc.orig or exc).strip().splitlines()[0])
        raise NodeLocked(node_id) from None
    if acquired:
        LOG.debug("Node %s reserved by %s", node_id, host)
        return
    with engine.connect() as conn:
        row = conn.execute(sa.select(_nodes.c.uuid, _nodes.c.reservation)
                           .where(_nodes.c.id == node_id)).first()
    if row is None:
        raise NotFound(f"node {node_id} does not exist")
    LOG.info("Node %s is locked by %s", row.uuid, row.reservation)
    raise NodeLocked(node_id, row.reservation)


def release(engine: Engine, node_id: int, host: str) -> bool:
    """Clear ``host``'s reservation of the node; False if ``host`` did not hold it."""
    with engine.begin() as conn:
        result = conn.execute(
            sa.update(_nodes).where(_nodes.c.id == node_id, _nodes.c.reservation == host)
            .values(reservation=None, **_KEEP_UPDATED_AT))
    if result.rowcount != 1:
        LOG.warning("Node %s was not reserved by %s any more when releasing it", node_id, host)
        return False
    return True


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


def clear_stale(engine: Engine, host: str) -> int:
    """Drop every reservation held by ``host`` (call at start-up: a crash left them behind)."""
    with engine.begin() as conn:
        count = conn.execute(sa.update(_nodes).where(_nodes.c.reservation == host)
                             .values(reservation=None, **_KEEP_UPDATED_AT)).rowcount
    if count:
        LOG.warning("Cleared %d stale node reservation(s) held by this host (%s): left by a "
                    "process of this host that died; every API and worker process needs its "
                    "own [DEFAULT]host", count, host)
    return count
