"""Which processes are alive: the heartbeats.

Every process that processes callbacks (each worker; the API all-in-one) keeps a row in
``inspection_processes`` with its ``[DEFAULT]host`` and a heartbeat written every
``[processing]heartbeat_interval`` seconds, like Ironic's conductors, stamped with the
database's clock. :mod:`inspection.worker.recovery` decides from them who is dead.
"""

import logging
from datetime import datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from inspection.db.models import InspectionProcess, utcnow

LOG = logging.getLogger(__name__)

_procs = InspectionProcess.__table__


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
            conn.execute(sa.insert(_procs).values(host=host, heartbeat_at=now))
    except sa.exc.IntegrityError:  # registered by a process of the same name meanwhile
        return True
    return False


def leave(engine: Engine, host: str) -> None:
    """Remove ``host`` from the table (a clean stop)."""
    with engine.begin() as conn:
        conn.execute(sa.delete(_procs).where(_procs.c.host == host))


def is_fresh(engine: Engine, host: str, timeout: float, now: datetime | None = None) -> bool:
    """Whether ``host``'s own heartbeat is registered and younger than ``timeout`` s."""
    cutoff = (now or database_now(engine)) - timedelta(seconds=timeout)
    with engine.connect() as conn:
        at = conn.execute(sa.select(_procs.c.heartbeat_at)
                          .where(_procs.c.host == host)).scalar()
    return at is not None and at >= cutoff
