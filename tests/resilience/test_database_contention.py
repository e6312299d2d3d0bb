"""Contention and lost connections fail no inspection: real API and worker processes on
MariaDB under 32 concurrent clients (deadlocks are normal there), and on PostgreSQL while
every connection to the test's database is terminated again and again."""

import threading
import time

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import make_url

from inspection.db import migration, retry
from inspection.db.models import Node
from pxe_filter.common.database import create_engine
from tests.integration.node_factory import add_node
from tests.support import services
from tests.support.callbacks import machine_macs, nodes_of, post_callbacks, wait_finished
from tests.support.services_procs import ONE_ADDRESS_RACK, start_api, start_worker

pytestmark = pytest.mark.slow


@pytest.fixture
def vhost():
    """A RabbitMQ vhost of the test's own: nothing queued leaks into other tests."""
    url = services.create_vhost()
    yield url
    services.delete_vhost(url)


def _database(admin_url: str, kind: str):
    url = services.create_database(admin_url, kind)
    engine = create_engine(url)
    migration.upgrade(engine)
    return url, engine


@pytest.fixture
def mariadb():
    url, engine = _database(services.MYSQL_ADMIN_URL, "MariaDB")
    yield url, engine
    engine.dispose()
    services.drop_database(services.MYSQL_ADMIN_URL, url)


@pytest.fixture
def postgresql():
    url, engine = _database(services.PG_ADMIN_URL, "PostgreSQL")
    yield url, engine
    engine.dispose()
    services.drop_database(services.PG_ADMIN_URL, url)


def _waiting_nodes(engine, macs: list[str]) -> None:
    for mac in macs:
        add_node(engine, macs=[mac], inspect_interface="agent")


def _reserved(engine) -> int:
    with engine.connect() as conn:
        return conn.execute(sa.select(sa.func.count()).select_from(Node)
                            .where(Node.reservation.is_not(None))).scalar()


def _wait_finished(engine, macs: list[str], deadline: float) -> list:
    """wait_finished, through the connections the test itself loses."""
    while True:
        try:
            return wait_finished(engine, macs, deadline)
        except sa.exc.SQLAlchemyError as exc:
            if not retry.is_transient(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def _run_api_and_workers(tmp_path, url: str, vhost: str, macs: list[str], *, threads: int,
                         during=None, deadline: float = 120) -> tuple[list, list, list]:
    """Two workers and an API; POST a callback per MAC from ``threads`` clients (while
    ``during()`` runs in a thread, if given); the answers, node rows and logs."""
    workers = [start_worker(tmp_path, url, vhost, name=f"worker{i}") for i in (1, 2)]
    api = start_api(tmp_path, url, vhost, {"api": ONE_ADDRESS_RACK})
    procs = [*workers, api]
    chaos = threading.Thread(target=during) if during else None
    try:
        for worker in workers:
            worker.wait_ready(60)
        api.wait_http(60)
        engine = create_engine(url)
        try:
            if chaos:
                chaos.start()
            answers = post_callbacks(api.url, macs, threads=threads)
            rows = _wait_finished(engine, macs, time.monotonic() + deadline)
            if chaos:
                chaos.join()
                rows = nodes_of(engine, macs)
        finally:
            engine.dispose()
        logs = [p.log_text() for p in procs]
        assert [p.stop() for p in procs] == [0, 0, 0]
    finally:
        for proc in procs:
            proc.stop()
        if chaos and chaos.is_alive():
            chaos.join()
    return answers, rows, logs


def _assert_all_manageable(answers, rows, macs, engine, logs) -> None:
    refused = [a if isinstance(a, Exception) else f"{a.status_code} {a.text[:200]}"
               for a in answers if isinstance(a, Exception) or a.status_code != 202]
    assert not refused, refused
    states: dict = {}
    for row in rows:
        states.setdefault(row.provision_state, []).append(row.last_error)
    assert len(rows) == len(macs) and list(states) == ["manageable"], {
        state: len(errors) for state, errors in states.items()} | {
        "errors": sorted({e for errors in states.values() for e in errors if e})[:3]}
    assert all(r.last_error is None for r in rows)
    assert _reserved(engine) == 0
    assert not [log for log in logs if "Traceback" in log]  # nothing unexpected


def test_mariadb_deadlocks_under_32_clients_fail_no_inspection(tmp_path, mariadb, vhost):
    url, engine = mariadb
    macs = machine_macs(150, "52:54:00:e1")
    _waiting_nodes(engine, macs)
    started = time.monotonic()
    answers, rows, logs = _run_api_and_workers(tmp_path, url, vhost, macs, threads=32)
    retried = sum(log.count("Transient database error") for log in logs)
    deadlocks = sum(log.count("Deadlock found") for log in logs)
    print(f"MariaDB, 150 callbacks from 32 clients: {deadlocks} deadlock(s), {retried} "
          f"transaction(s) run again, done in {time.monotonic() - started:.1f} s")
    _assert_all_manageable(answers, rows, macs, engine, logs)


def test_postgresql_connections_terminated_every_0_4_s_fail_no_inspection(
        tmp_path, postgresql, vhost):
    url, engine = postgresql
    database = make_url(url).database
    macs = machine_macs(40, "52:54:00:e2")
    _waiting_nodes(engine, macs)
    terminated: list[int] = []

    def terminate_every_connection() -> None:
        admin = sa.create_engine(services.PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
        try:
            with admin.connect() as conn:
                end = time.monotonic() + 10
                while time.monotonic() < end:
                    # This test's database only: never another test's connections.
                    terminated.append(len(conn.execute(sa.text(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                        "WHERE datname = :db AND pid <> pg_backend_pid()"),
                        {"db": database}).all()))
                    time.sleep(0.4)
        finally:
            admin.dispose()

    answers, rows, logs = _run_api_and_workers(tmp_path, url, vhost, macs, threads=8,
                                               during=terminate_every_connection)
    retried = sum(log.count("Transient database error") for log in logs)
    given_back = sum(log.count("Database error while processing callback") for log in logs)
    print(f"PostgreSQL, 40 callbacks: {sum(terminated)} connections terminated in "
          f"{len(terminated)} rounds; {retried} transaction(s) run again, {given_back} "
          f"callback(s) given back")
    assert sum(terminated) >= len(terminated)  # every round did find connections to end
    _assert_all_manageable(answers, rows, macs, engine, logs)
