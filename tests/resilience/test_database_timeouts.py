"""A frozen database (a table locked by someone else) fails a read in bounded time, with a
message that says which option bounded it, on every backend."""

import threading
import time

import pytest
import sqlalchemy as sa

from pxe_filter.common.database import DatabaseError, create_engine
from pxe_filter.source import DatabaseSource

LOCK_TIMEOUT = 2


@pytest.fixture
def locked(db_url):
    """A migrated database (each backend in turn) whose ports table another session locks."""
    admin = create_engine(db_url)
    backend = admin.dialect.name
    holder = admin.connect()
    if backend == "postgresql":
        holder.execute(sa.text("BEGIN"))
        holder.execute(sa.text("LOCK TABLE ports IN ACCESS EXCLUSIVE MODE"))
    elif backend == "mysql":
        holder.execute(sa.text("LOCK TABLES ports WRITE"))
    else:  # an exclusive transaction: readers wait for the lock
        holder.exec_driver_sql("PRAGMA journal_mode=DELETE")
        holder.exec_driver_sql("BEGIN EXCLUSIVE")
    try:
        yield db_url
    finally:
        if backend == "mysql":
            holder.execute(sa.text("UNLOCK TABLES"))
        holder.rollback()
        holder.close()
        admin.dispose()


def test_a_locked_table_fails_the_read_within_the_lock_timeout(locked):
    engine = create_engine(locked, read_only=True, statement_timeout=30,
                           lock_timeout=LOCK_TIMEOUT)
    source = DatabaseSource(engine)
    outcome: dict = {}

    def read() -> None:
        start = time.monotonic()
        try:
            source.read_snapshot(["agent"])
            outcome["result"] = "read"
        except DatabaseError as exc:
            outcome["result"] = str(exc)
        outcome["seconds"] = time.monotonic() - start

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    thread.join(LOCK_TIMEOUT + 20)
    engine.dispose()
    assert not thread.is_alive(), "the read blocked beyond its lock timeout"
    assert outcome["seconds"] < LOCK_TIMEOUT + 10, outcome
    assert "cannot read nodes and ports" in outcome["result"], outcome
    assert "lock_timeout reached" in outcome["result"], outcome
