"""Database engines for the configured URL, with errors that say what to check.

Shared by the filter (read-only, possibly on Ironic's own database) and the inspection service.
"""

import contextlib
import functools
import importlib.util
import os
import socket
import threading
from collections.abc import Callable
from typing import TypeVar

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import URL, Engine, make_url

from pxe_filter.common import statedirs

T = TypeVar("T")


class DatabaseError(Exception):
    """The database is unreachable or unusable; the message says what to check."""


def describe_url(url: str | URL) -> str:
    """The URL with any password hidden, for log lines and errors."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # an unparsable URL is itself the error to report
        return "<unparsable database URL>"


def create_engine(url: str, connect_timeout: int = 10, read_only: bool = False, *,
                  statement_timeout: int = 60, lock_timeout: int = 30) -> Engine:
    """Create an engine with settings that suit each backend.

    SQLite gets WAL and a busy timeout so the filter can read while the inspection service
    writes; server databases get a connect timeout so a dead server fails fast, and statement
    and lock timeouts so a frozen one fails a statement instead of blocking it for ever. A
    ``read_only`` engine (the PXE filter's) never switches an SQLite file to WAL: that
    setting is persistent, a write to a database that may belong to Ironic.
    """
    try:
        parsed = make_url(url)
    except sa.exc.ArgumentError:
        raise DatabaseError(f"[database]connection is not a valid SQLAlchemy URL: "
                            f"{describe_url(url)}") from None
    parsed = _with_installed_driver(parsed)
    # hide_parameters: an error's text never quotes the bound values (a node's driver_info
    # holds BMC passwords; inventories hold whatever the ramdisk sent).
    # A read-only engine (the filter's) skips the pre-ping: that SELECT 1 runs inside the
    # pool's checkout, where :func:`bounded` cannot reach its socket, so a frozen server
    # would hold it for ever; a stale pooled connection is retried once instead.
    kwargs: dict = {"pool_pre_ping": not read_only, "future": True, "hide_parameters": True}
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        kwargs["connect_args"] = {"timeout": 30, "check_same_thread": False}
    elif backend == "postgresql":
        kwargs["connect_args"] = {
            "connect_timeout": connect_timeout,
            "options": f"-c statement_timeout={statement_timeout * 1000} "
                       f"-c lock_timeout={lock_timeout * 1000}"}
    elif backend in ("mysql", "mariadb"):
        kwargs["connect_args"] = {"connect_timeout": connect_timeout}
        kwargs["pool_recycle"] = 3600
    try:
        engine = sa.create_engine(parsed, **kwargs)
    except (sa.exc.ArgumentError, sa.exc.NoSuchModuleError, ImportError) as exc:
        hint = _DRIVER_HINTS.get(backend, "")
        raise DatabaseError(f"cannot use database {describe_url(parsed)}: {exc}"
                            f"{'; ' + hint if hint else ''}") from None
    if backend == "sqlite":
        event.listen(engine, "connect", functools.partial(
            _sqlite_pragmas, busy_ms=lock_timeout * 1000, writer=not read_only))
    elif backend in ("mysql", "mariadb"):
        event.listen(engine, "connect", functools.partial(
            _mysql_timeouts, statement=statement_timeout, lock=lock_timeout))
    return engine


#: For a URL without a driver, the driver modules tried in turn (the extras install the first);
#: SQLAlchemy's own defaults (psycopg 3, mysqlclient) are not what the extras install.
_DRIVERS = {"postgresql": (("psycopg2", "psycopg2"), ("psycopg", "psycopg")),
            "mysql": (("pymysql", "pymysql"), ("MySQLdb", "mysqldb"))}
_DRIVER_HINTS = {
    "postgresql": "install the [postgresql] extra (pip install 'ironic-pxe-filter[postgresql]') "
                  "and write postgresql+psycopg2://...",
    "mysql": "install the [mysql] extra (pip install 'ironic-pxe-filter[mysql]') and write "
             "mysql+pymysql://...",
}


def _with_installed_driver(url: URL) -> URL:
    """``url`` with the driver that is installed when it names none (``postgresql://``)."""
    if "+" in url.drivername or url.drivername not in _DRIVERS:
        return url
    for module, driver in _DRIVERS[url.drivername]:
        if importlib.util.find_spec(module) is not None:
            return url.set(drivername=f"{url.drivername}+{driver}")
    return url


def _mysql_timeouts(dbapi_conn, _record, statement: int, lock: int) -> None:
    cursor = dbapi_conn.cursor()
    cursor.execute(f"SET SESSION lock_wait_timeout = {int(lock)}, "
                   f"innodb_lock_wait_timeout = {int(lock)}")
    if "mariadb" in dbapi_conn.get_server_info().lower():
        cursor.execute(f"SET SESSION max_statement_time = {int(statement)}")
    else:  # MySQL limits read-only SELECTs only, in milliseconds
        cursor.execute(f"SET SESSION max_execution_time = {int(statement) * 1000}")
    cursor.close()


def _sqlite_pragmas(dbapi_conn, _record, busy_ms: int, writer: bool) -> None:
    cursor = dbapi_conn.cursor()
    cursor.execute(f"PRAGMA busy_timeout={int(busy_ms)}")
    if writer:
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA journal_mode=WAL")
    cursor.close()


#: What the drivers say when a statement or lock timeout fires.
_TIMEOUT_WORDS = ("statement timeout", "lock timeout", "max_statement_time",
                  "lock wait timeout", "maximum statement execution time", "database is locked")


def error_reason(exc: BaseException) -> str:
    """The first line of what the database driver said, for one-line error messages; a
    timeout says which option bounded it."""
    reason = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0]
    if any(word in reason.lower() for word in _TIMEOUT_WORDS):
        reason += " ([database]statement_timeout or lock_timeout reached: is the database " \
                  "overloaded or a table locked?)"
    return reason


def check_connection(engine: Engine) -> None:
    """Open one connection, raising :class:`DatabaseError` with an actionable message."""
    try:
        with engine.connect() as conn:
            conn.execute(sa.text("SELECT 1"))
    except sa.exc.SQLAlchemyError as exc:
        raise DatabaseError(f"cannot connect to database {describe_url(engine.url)}: "
                            f"{error_reason(exc)}") from None


def bounded_read(engine: Engine, seconds: float, read: Callable[[sa.Connection], T]) -> T:
    """``read(connection)``, cut after ``seconds`` whatever the server does.

    Server-side timeouts and TCP keepalives do not help against a frozen server: its kernel
    still acknowledges every packet. So a timer shuts the connection's socket down (SQLite:
    interrupts the statement); the blocked call then fails at once, SQLAlchemy discards the
    connection, and :class:`DatabaseError` is raised. Opening a connection is bounded by
    ``[database]connect_timeout``. A pooled connection found dead (the server restarted
    since) is replaced and ``read`` run once more. Other driver errors propagate.
    """
    try:
        return _bounded_once(engine, seconds, read)
    except _StaleConnection:
        pass
    try:
        return _bounded_once(engine, seconds, read)
    except _StaleConnection as exc:
        raise exc.__cause__ from None


class _StaleConnection(Exception):
    """A pooled connection turned out dead before the read got an answer."""


def _bounded_once(engine: Engine, seconds: float, read: Callable[[sa.Connection], T]) -> T:
    cut = threading.Event()
    holder: list = []

    def _cut() -> None:
        cut.set()
        if holder:
            _interrupt(holder[0])

    dbapi_error = engine.dialect.loaded_dbapi.Error
    timer = threading.Timer(seconds, _cut)
    timer.daemon = True
    timer.start()
    try:
        with engine.connect() as conn:
            holder.append(conn.connection.dbapi_connection)
            if cut.is_set():
                _interrupt(holder[0])
            try:
                return read(conn)
            except (sa.exc.DBAPIError, dbapi_error) as exc:
                # Raw cursors (the full sync's) bypass SQLAlchemy's disconnect handling.
                raw = getattr(exc, "orig", None) or exc
                dead = cut.is_set() or getattr(exc, "connection_invalidated", False) \
                    or engine.dialect.is_disconnect(raw, holder[0], None)
                if dead and not conn.invalidated:
                    conn.invalidate()
                if cut.is_set():
                    raise DatabaseError(
                        f"no answer from {describe_url(engine.url)} within {seconds:g} s: "
                        f"connection cut (is the database server frozen or "
                        f"overloaded?)") from None
                if dead:
                    raise _StaleConnection() from exc
                raise
    finally:
        timer.cancel()


def _interrupt(dbapi_conn: object) -> None:
    """Make whatever blocks on ``dbapi_conn`` fail now (from another thread)."""
    if hasattr(dbapi_conn, "interrupt"):  # sqlite3
        with contextlib.suppress(Exception):
            dbapi_conn.interrupt()
        return
    sock = getattr(dbapi_conn, "_sock", None)  # PyMySQL
    fd = sock.fileno() if sock is not None else None
    if fd is None and hasattr(dbapi_conn, "fileno"):  # psycopg2, psycopg
        with contextlib.suppress(Exception):
            fd = dbapi_conn.fileno()
    if fd is None or fd < 0:
        return
    with contextlib.suppress(OSError):
        # shutdown() acts on the socket itself, not on this duplicate descriptor
        dup = socket.socket(fileno=os.dup(fd))
        try:
            dup.shutdown(socket.SHUT_RDWR)
        finally:
            dup.close()


def engine_from_conf(conf, read_only: bool = False, create: bool = False) -> Engine:
    """The engine for ``conf.database.connection``; ConfigError for a missing SQLite file
    unless ``create`` (see :func:`~pxe_filter.common.statedirs.check_sqlite_file`)."""
    db = conf.database
    engine = create_engine(db.connection, db.connect_timeout, read_only=read_only,
                           statement_timeout=db.statement_timeout, lock_timeout=db.lock_timeout)
    # Before the first connection: SQLite creates a missing file on connect.
    statedirs.check_sqlite_file(engine.url, create)
    return engine
