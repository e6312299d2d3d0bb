"""Which database errors are worth retrying, and retrying a transaction with backoff.

A *transient* error says nothing about the data: the connection dropped (a restart, a
failover, ``pg_terminate_backend``), the transaction lost a deadlock or a serialization
check, or a lock timeout fired. Running the same transaction again may
succeed. A *data* error (``DataError``, ``IntegrityError``) fails the same way every time.
This is the project's one classifier of database errors (:func:`is_transient`, and
:func:`is_lock_conflict` for its subset "someone holds the row"): SQLAlchemy's own disconnect
detection (``connection_invalidated``) first, then each backend's codes, then the
connect-time failures that carry no code. oslo.db's ``exc_filters`` are not used: they turn
SQLAlchemy's errors into ``oslo_db.exception.DBError`` (not a ``SQLAlchemyError``) on the
engine, so every ``except SQLAlchemyError`` of the project (and the pxe_filter's, which
shares the engine code) would have to change, and they too class PostgreSQL's refused
connection by its message. tenacity would replace only :func:`call`'s dozen lines, not the
classifier, and adds a dependency: the loop stays.
"""

import logging
import random
import time
from collections.abc import Callable
from typing import TypeVar

import sqlalchemy as sa

from pxe_filter.common.database import error_reason

LOG = logging.getLogger(__name__)

T = TypeVar("T")

#: Tries of one transaction (the first one included) before the error is raised.
ATTEMPTS = 6
#: Upper bound of the first backoff (seconds); each later one doubles, up to MAX_DELAY.
#: Each wait is random below its bound ("full jitter"), so the losers of a deadlock do
#: not collide again at the same instant.
BASE_DELAY = 0.05
MAX_DELAY = 1.0

# A statement timeout is not among them: a statement that is slow because of its data
# would be retried for ever without counting an attempt.
# PostgreSQL SQLSTATE classes and codes: connection exception (08), transaction rollback
# (40: serialization failure 40001, deadlock 40P01), insufficient resources (53: too many
# connections), lock not available (55P03, lock_timeout), administrator shutdown / crash
# shutdown / cannot connect now (57P0x).
_PG_CLASSES = ("08", "40", "53")
_PG_CODES = {"55P03", "57P01", "57P02", "57P03"}
# MySQL/MariaDB error numbers: 1205 lock wait timeout, 1213 deadlock, 1020 record changed
# since last read, 1040 too many connections, 1053 server shutdown, 1077 normal shutdown,
# 1158-1161 network read/write errors, 1317 query killed, 1927 connection killed
# (MariaDB), 2002/2003 cannot connect, 2006 server has gone away, 2013 lost connection,
# 2055 lost connection (system error), 4031 disconnected for inactivity.
_MYSQL_CODES = {1020, 1040, 1053, 1077, 1158, 1159, 1160, 1161, 1205, 1213, 1317, 1927,
                2002, 2003, 2006, 2013, 2055, 4031,
                # read-only after a failover (the old primary): 1290 --read-only,
                # 1792 read-only transaction, 1836 read-only mode
                1290, 1792, 1836}
# PostgreSQL 25006: read_only_sql_transaction (a standby, or the old primary after a
# failover); 57P04 database_dropped is not transient.
_PG_CODES.add("25006")
# psycopg2 raises connect-time failures (refused while the server restarts, a timeout, a
# server starting up or shutting down) with no SQLSTATE, and SQLAlchemy's disconnect
# detection only looks at errors of open connections: libpq's words are all there is.
_PG_CONNECT_WORDS = ("connection refused", "could not connect to server",
                     "connection timed out", "timeout expired",
                     "the database system is starting up",
                     "the database system is shutting down",
                     "the database system is in recovery mode",
                     "server closed the connection unexpectedly",
                     "terminating connection")
_SQLITE_WORDS = ("database is locked", "database table is locked", "database is busy")


def is_transient(exc: BaseException) -> bool:
    """True for an error that running the transaction again may not repeat."""
    if isinstance(exc, (sa.exc.DisconnectionError, sa.exc.TimeoutError)):
        return True  # a connection that died in the pool, or a pool with none free
    if not isinstance(exc, sa.exc.DBAPIError):
        return False
    if exc.connection_invalidated:
        return True  # SQLAlchemy recognised a disconnect
    if is_data_error(exc):
        return False
    orig = exc.orig
    code = getattr(orig, "pgcode", None) or getattr(orig, "sqlstate", None)
    if isinstance(code, str):
        return code[:2] in _PG_CLASSES or code in _PG_CODES
    args = getattr(orig, "args", ())
    if args and isinstance(args[0], int):
        return args[0] in _MYSQL_CODES
    text = str(orig).lower()
    return any(word in text for word in (*_PG_CONNECT_WORDS, *_SQLITE_WORDS))


def is_lock_conflict(exc: sa.exc.DBAPIError) -> bool:
    """True for a lock wait timeout or a deadlock: someone else holds the row right now."""
    orig = exc.orig
    code = getattr(orig, "pgcode", None)
    if code is not None:
        return code in ("55P03", "40P01")  # lock_not_available, deadlock_detected
    args = getattr(orig, "args", ())
    if args and args[0] in (1205, 1213):  # MySQL lock wait timeout, deadlock
        return True
    return "database is locked" in str(orig)


#: A database that refuses writes (a standby after a failover, a read-only server or file):
#: PostgreSQL 25006, MySQL/MariaDB 1290 (--read-only) and 1836 (read-only mode), SQLite.
_READ_ONLY_PG = "25006"
_READ_ONLY_MYSQL = {1290, 1836}
_READ_ONLY_SQLITE = "readonly database"


def is_read_only(exc: BaseException) -> bool:
    """True when the database refused a write because it is read-only: no retry within a
    request helps, yet it says nothing about the data (503, not 500)."""
    if not isinstance(exc, sa.exc.DBAPIError):
        return False
    orig = exc.orig
    code = getattr(orig, "pgcode", None)
    if isinstance(code, str):
        return code == _READ_ONLY_PG
    number = _mysql_number(orig)
    if number is not None:
        return number in _READ_ONLY_MYSQL
    return _READ_ONLY_SQLITE in str(orig).lower()


def _mysql_number(orig: object) -> int | None:
    """A MySQL driver's error number (their SQLSTATE is too coarse: 23000, HY000...)."""
    number = getattr(orig, "errno", None)
    args = getattr(orig, "args", ())
    if not isinstance(number, int) and args and isinstance(args[0], int):
        number = args[0]
    return number if isinstance(number, int) else None


def is_unique_violation(exc: BaseException) -> bool:
    """True for an IntegrityError that a unique index raised (a duplicate), not a CHECK,
    NOT NULL or foreign key constraint: PostgreSQL 23505, MySQL/MariaDB 1062, SQLite."""
    if not isinstance(exc, sa.exc.IntegrityError):
        return False
    orig = exc.orig
    code = getattr(orig, "pgcode", None)
    if isinstance(code, str):
        return code == "23505"
    number = _mysql_number(orig)
    if number is not None:
        return number in (1062, 1586)
    return "unique constraint failed" in str(orig).lower()


def is_data_error(exc: BaseException) -> bool:
    """True for an error the data itself causes (it fails the same way every time)."""
    return isinstance(exc, (sa.exc.DataError, sa.exc.IntegrityError))


def backoff(attempt: int) -> float:
    """Seconds to wait before try ``attempt + 1`` (``attempt`` counts from 1)."""
    bound = min(MAX_DELAY, BASE_DELAY * 2 ** (attempt - 1))
    return random.uniform(0, bound)  # noqa: S311 - jitter, not a secret


def call(func: Callable[..., T], *args: object, what: str = "a database transaction",
         attempts: int = ATTEMPTS, budget: float | None = None) -> T:
    """``func(*args)``, run again (after a backoff) while it raises a transient error.

    ``func`` must be a whole transaction: every try starts from nothing. No try starts
    ``budget`` seconds or more after the first (a request must not wait for a dead server
    ``attempts`` times its connect timeout). The last try's error is raised; any other
    error at once.
    """
    started = time.monotonic()
    for attempt in range(1, attempts + 1):
        try:
            return func(*args)
        except sa.exc.SQLAlchemyError as exc:
            if attempt == attempts or not is_transient(exc):
                raise
            delay = backoff(attempt)
            if budget is not None and time.monotonic() + delay - started >= budget:
                raise
            LOG.info("Transient database error in %s (%s); try %d of %d in %.2f s", what,
                     error_reason(exc), attempt + 1, attempts, delay)
            time.sleep(delay)
    raise AssertionError("unreachable")  # the loop returns or raises
