"""The transient/data classification of database errors, and the retry loop's bounds."""

import sqlite3
import time

import pymysql
import pytest
import sqlalchemy as sa

from inspection.db import retry


def _wrapped(orig: Exception, cls=sa.exc.OperationalError, **kwargs) -> sa.exc.DBAPIError:
    return cls("UPDATE nodes SET driver_info=?", {}, orig, **kwargs)


@pytest.mark.parametrize(("error", "transient"), [
    (_wrapped(pymysql.err.OperationalError(1213, "Deadlock found")), True),
    (_wrapped(pymysql.err.OperationalError(1205, "Lock wait timeout exceeded")), True),
    (_wrapped(pymysql.err.OperationalError(2013, "Lost connection")), True),
    (_wrapped(pymysql.err.OperationalError(1054, "Unknown column")), False),
    (_wrapped(sqlite3.OperationalError("database is locked")), True),
    (_wrapped(sqlite3.OperationalError("no such table: nodes")), False),
    (_wrapped(sqlite3.OperationalError("?"), connection_invalidated=True), True),
    (_wrapped(pymysql.err.DataError(1406, "Data too long"), sa.exc.DataError), False),
    (_wrapped(sqlite3.IntegrityError("UNIQUE constraint failed"), sa.exc.IntegrityError),
     False),
    (sa.exc.DisconnectionError("pool"), True),
    (ValueError("not a database error"), False),
], ids=lambda v: str(v)[:40] if isinstance(v, Exception) else None)
def test_transient_errors_are_told_from_the_others(error, transient):
    assert retry.is_transient(error) is transient


def test_data_errors():
    assert retry.is_data_error(_wrapped(sqlite3.IntegrityError("x"), sa.exc.IntegrityError))
    assert not retry.is_data_error(_wrapped(pymysql.err.OperationalError(1213, "Deadlock")))


def _failing(errors: list[Exception]):
    calls = []

    def func(value):
        calls.append(time.monotonic())
        if len(calls) <= len(errors):
            raise errors[len(calls) - 1]
        return value
    return func, calls


DEADLOCK = _wrapped(pymysql.err.OperationalError(1213, "Deadlock found"))


def test_a_transient_error_is_retried_until_it_passes(monkeypatch):
    monkeypatch.setattr(retry, "BASE_DELAY", 0.001)
    func, calls = _failing([DEADLOCK] * (retry.ATTEMPTS - 1))
    assert retry.call(func, "done") == "done"
    assert len(calls) == retry.ATTEMPTS


def test_the_last_try_s_error_is_raised(monkeypatch):
    monkeypatch.setattr(retry, "BASE_DELAY", 0.001)
    func, calls = _failing([DEADLOCK] * retry.ATTEMPTS)
    with pytest.raises(sa.exc.OperationalError):
        retry.call(func, "done")
    assert len(calls) == retry.ATTEMPTS


def test_any_other_error_is_raised_at_once():
    func, calls = _failing([_wrapped(sqlite3.OperationalError("no such table: nodes"))])
    with pytest.raises(sa.exc.OperationalError):
        retry.call(func, "done")
    assert len(calls) == 1


def test_no_try_starts_after_the_budget(monkeypatch):
    slow = 0.3

    def slow_deadlock(value):
        time.sleep(slow)  # as a connect timeout would
        raise DEADLOCK
    started = time.monotonic()
    with pytest.raises(sa.exc.OperationalError):
        retry.call(slow_deadlock, "done", budget=0.5)
    assert time.monotonic() - started < 3 * slow  # two tries at most, not six


def test_backoff_grows_and_is_bounded():
    for attempt in range(1, 12):
        bound = min(retry.MAX_DELAY, retry.BASE_DELAY * 2 ** (attempt - 1))
        assert all(0 <= retry.backoff(attempt) <= bound for _ in range(50))
