"""Transient database errors (deadlocks, serialization failures, lock timeouts, dropped
connections) never fail an inspection: the transaction runs again, and if the error lasts
the callback is given back for later. Faults are raised by the real database server (a
trigger, counted by a sequence, which no rollback undoes)."""

import logging
import socket
from datetime import timedelta

import pytest
import sqlalchemy as sa

from inspection import locking
from inspection.db import retry
from inspection.db.models import InspectionCallback, utcnow
from inspection.processing import callbacks
from inspection.timeouts import fail_timed_out
from inspection.worker.runner import CallbackRunner
from pxe_filter.broadcast import FilterNotifier
from pxe_filter.common.database import create_engine
from tests.integration.api_helpers import Api, api_conf, error_message
from tests.integration.node_factory import add_node, make_conf, node_row
from tests.integration.pipeline_support import body, macs_of, service_for

DATA = "bios-vm-x86_64"
SECRET = "hunter2-s3cr3t"


def _pg_fault(table: str, code: str, times: int, event: str = "INSERT",
              when: str = "") -> list[str]:
    return [
        "CREATE SEQUENCE fault_count",
        f"CREATE FUNCTION fault() RETURNS trigger AS $$ BEGIN "
        f"IF nextval('fault_count') <= {times} THEN "
        f"RAISE EXCEPTION 'simulated fault' USING ERRCODE = '{code}'; END IF; "
        f"RETURN NEW; END $$ LANGUAGE plpgsql",
        f"CREATE TRIGGER fault BEFORE {event} ON {table} FOR EACH ROW {when} "
        f"EXECUTE FUNCTION fault()"]


def _mysql_fault(table: str, errno: int, times: int) -> list[str]:
    return [
        "CREATE SEQUENCE fault_count",
        f"CREATE TRIGGER fault BEFORE INSERT ON {table} FOR EACH ROW BEGIN "
        f"IF NEXTVAL(fault_count) <= {times} THEN SIGNAL SQLSTATE '40001' "
        f"SET MESSAGE_TEXT = 'simulated fault', MYSQL_ERRNO = {errno}; END IF; END"]


def _clear_faults(engine) -> None:
    with engine.begin() as conn:
        if engine.dialect.name == "postgresql":
            conn.execute(sa.text("DROP TRIGGER IF EXISTS fault ON node_inventory"))
            conn.execute(sa.text("DROP TRIGGER IF EXISTS fault ON nodes"))
            conn.execute(sa.text("DROP FUNCTION IF EXISTS fault()"))
        else:
            conn.execute(sa.text("DROP TRIGGER IF EXISTS fault"))
        conn.execute(sa.text("DROP SEQUENCE IF EXISTS fault_count"))


@pytest.fixture
def faults(db_engine):
    """Install the fault statements given; removed after the test."""
    def install(statements: list[str]) -> None:
        with db_engine.begin() as conn:
            for statement in statements:
                conn.execute(sa.text(statement))
    _clear_faults(db_engine)
    yield install
    _clear_faults(db_engine)


def _waiting_node(engine, data, **columns):
    return add_node(engine, macs=macs_of(data)[:1], inspect_interface="agent", **columns)


FAULTS = {
    "pg-serialization-failure": ("postgresql", "40001"),
    "pg-deadlock": ("postgresql", "40P01"),
    "pg-lock-timeout": ("postgresql", "55P03"),
    "mariadb-deadlock": ("mysql", 1213),
    "mariadb-lock-wait-timeout": ("mysql", 1205),
}


@pytest.mark.parametrize(("db_url", "fault"), [(backend, name) for name, (backend, _)
                                               in FAULTS.items()],
                         ids=list(FAULTS), indirect=["db_url"])
def test_transient_errors_are_retried_until_they_pass(db_engine, tmp_path, faults, fault,
                                                      caplog):
    """Every try of the first claim fails, then the first retry of the next: the callback is
    given back once, without using an attempt, and the node ends manageable."""
    service = service_for(db_engine, tmp_path, DEFAULT={"host": "worker-a"},
                          processing={"heartbeat_interval": 1, "heartbeat_timeout": 2,
                                      "max_attempts": 1})
    data = body(DATA)
    node = _waiting_node(db_engine, data)
    code = FAULTS[fault][1]
    times = retry.ATTEMPTS + 1
    faults(_pg_fault("node_inventory", code, times) if isinstance(code, str)
           else _mysql_fault("node_inventory", code, times))
    callbacks.store(db_engine, node["uuid"], data)
    runner = CallbackRunner(db_engine, service, service.conf, threads=1)
    with caplog.at_level(logging.INFO):
        runner.start()
        try:
            assert runner.wait_idle(60)
        finally:
            runner.stop()
    row = node_row(db_engine, node["id"])
    assert (row.provision_state, row.last_error, row.reservation) == (
        "manageable", None, None)
    assert "simulated fault" in caplog.text  # the fault did fire
    given_back = [r for r in caplog.records if "retried in 1 s" in r.getMessage()]
    assert len(given_back) == 1, caplog.text
    with db_engine.connect() as conn:
        assert conn.execute(sa.select(sa.func.count())
                            .select_from(InspectionCallback)).scalar() == 0


#: The first commit that stored an inventory loses its connection (a deferred trigger
#: terminates its own backend while the transaction commits).
DROP_AT_COMMIT = [
    "CREATE SEQUENCE fault_count",
    "CREATE FUNCTION fault() RETURNS trigger AS $$ BEGIN "
    "IF nextval('fault_count') = 1 THEN PERFORM pg_terminate_backend(pg_backend_pid()); "
    "END IF; RETURN NULL; END $$ LANGUAGE plpgsql",
    "CREATE CONSTRAINT TRIGGER fault AFTER INSERT ON node_inventory DEFERRABLE "
    "INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION fault()"]


@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
def test_a_connection_dropped_at_commit_fails_nothing(db_engine, tmp_path, faults, caplog):
    """The server ends the connection while the run commits (a deferred trigger terminates
    its own backend): the run is done again on a new connection."""
    faults(DROP_AT_COMMIT)
    service = service_for(db_engine, tmp_path)
    data = body(DATA)
    node = _waiting_node(db_engine, data)
    with caplog.at_level(logging.INFO):
        service.process(node["uuid"], data)
    row = node_row(db_engine, node["id"])
    assert (row.provision_state, row.last_error, row.reservation) == (
        "manageable", None, None)
    assert "server closed the connection unexpectedly" in caplog.text
    assert service.notifier.denied() == [macs_of(data)[:1]]


@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
def test_a_lasting_transient_error_leaves_the_node_waiting(db_engine, tmp_path, faults):
    faults(_pg_fault("node_inventory", "40001", 1000))
    service = service_for(db_engine, tmp_path)
    data = body(DATA)
    node = _waiting_node(db_engine, data)
    with pytest.raises(sa.exc.OperationalError) as exc:
        service.process(node["uuid"], data)
    assert retry.is_transient(exc.value)
    row = node_row(db_engine, node["id"])
    assert (row.provision_state, row.last_error, row.reservation) == (
        "inspect wait", None, None)


@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
@pytest.mark.parametrize("code", ["22003", "40001"], ids=["data-error", "transient"])
def test_a_database_error_never_logs_the_bmc_password(db_engine, tmp_path, faults, code,
                                                      caplog):
    """A rule changes driver_info, so the failing UPDATE binds the whole driver_info."""
    faults(_pg_fault("nodes", code, 1000, event="UPDATE",
                     when="WHEN (NEW.driver_info IS DISTINCT FROM OLD.driver_info)"))
    service = service_for(db_engine, tmp_path)
    with service.sessions.begin() as session:
        service.rules.repository.create(session, {"actions": [
            {"op": "set-attribute", "args": ["/driver_info/ipmi_address", "192.0.2.9"]}]})
    data = body(DATA)
    node = _waiting_node(db_engine, data, driver_info={"ipmi_address": "192.0.2.1",
                                                       "ipmi_password": SECRET})
    with caplog.at_level(logging.DEBUG):
        try:
            service.process(node["uuid"], data)
        except sa.exc.SQLAlchemyError as exc:
            assert code == "40001"  # given back to the caller, which logs it
            logging.getLogger("test").warning("%s", exc)
    row = node_row(db_engine, node["id"])
    assert "simulated fault" in caplog.text
    assert SECRET not in caplog.text
    assert row.provision_state == ("inspect failed" if code == "22003" else "inspect wait")
    assert SECRET not in (row.last_error or "")


def test_the_filter_s_engine_hides_bound_values_too(sqlite_url):
    """The filter reads the same nodes (driver_info included) on its own engine."""
    engine = create_engine(sqlite_url, read_only=True)
    try:
        with pytest.raises(sa.exc.OperationalError) as exc, engine.connect() as conn:
            conn.execute(sa.text("SELECT * FROM missing WHERE secret = :s"), {"s": SECRET})
    finally:
        engine.dispose()
    assert SECRET not in str(exc.value)


@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
def test_an_api_request_that_meets_a_locked_table_answers_503(db_url, db_engine, tmp_path,
                                                             caplog):
    api = Api(api_conf(tmp_path, db_url, database={"lock_timeout": 1}))
    try:
        with db_engine.connect() as holder:
            holder.execute(sa.text("LOCK TABLE nodes IN ACCESS EXCLUSIVE MODE"))
            with caplog.at_level(logging.WARNING, logger="inspection.api"):
                answer = api.client.get("/v1/nodes")
            holder.rollback()
        assert answer.status_code == 503, answer.json
        assert answer.headers["Retry-After"] == "1"
        assert "try again later" in error_message(answer)
        assert "Request not completed, the database failed" in caplog.text
        assert "Traceback" not in caplog.text
        assert api.client.get("/v1/nodes").status_code == 200  # lock gone: served again
    finally:
        api.close()


@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
def test_a_discovered_node_keeps_no_error_from_a_dropped_connection(db_url, db_engine,
                                                                    tmp_path, faults):
    """Before, such a node kept last_error and stayed unknown to its ramdisk's retries."""
    faults(DROP_AT_COMMIT)
    api = Api(api_conf(tmp_path, db_url, auto_discovery={"enabled": True}))
    try:
        answer = api.unversioned.post("/v1/continue_inspection", json=body(DATA))
        assert answer.status_code == 202, answer.json
        api.wait_processed(30)
        shown = api.client.get(f"/v1/nodes/{answer.json['uuid']}").json
    finally:
        api.close()
    assert (shown["provision_state"], shown["last_error"]) == ("enroll", None)
    assert shown["inspection_finished_at"] is not None
    with db_engine.connect() as conn:  # the fault did fire
        assert conn.execute(sa.text("SELECT last_value FROM fault_count")).scalar() >= 2


@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
def test_the_inspect_wait_timeout_survives_a_serialization_failure(db_engine, tmp_path,
                                                                   faults):
    faults(_pg_fault("nodes", "40001", 2, event="UPDATE",
                     when="WHEN (NEW.provision_state = 'inspect failed')"))
    conf = make_conf(tmp_path, DEFAULT={"host": "w"}, inspector={"inspect_wait_timeout": 60})
    node = add_node(db_engine, inspection_started_at=utcnow() - timedelta(seconds=600))
    assert fail_timed_out(db_engine, conf, FilterNotifier(None)) == [node["uuid"]]
    row = node_row(db_engine, node["id"])
    assert (row.provision_state, row.reservation) == ("inspect failed", None)
    with db_engine.connect() as conn:  # the fault did fire
        assert conn.execute(sa.text("SELECT last_value FROM fault_count")).scalar() >= 3


@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
def test_giving_up_on_poison_data_survives_a_lasting_transient_error(db_engine, tmp_path,
                                                                    faults):
    """The failure is recorded at the next try, not dropped with the data."""
    faults(_pg_fault("nodes", "40001", retry.ATTEMPTS, event="UPDATE",
                     when="WHEN (NEW.provision_state = 'inspect failed')"))
    service = service_for(db_engine, tmp_path, DEFAULT={"host": "worker-a"},
                          processing={"heartbeat_interval": 1, "heartbeat_timeout": 2,
                                      "max_attempts": 1})
    data = body(DATA)
    node = _waiting_node(db_engine, data)
    row_id = callbacks.store(db_engine, node["uuid"], data)
    with db_engine.begin() as conn:  # a process died while processing it
        conn.execute(sa.update(InspectionCallback.__table__)
                     .where(InspectionCallback.id == row_id).values(attempts=1))
    runner = CallbackRunner(db_engine, service, service.conf, threads=1)
    runner.start()
    try:
        assert runner.wait_idle(60)
    finally:
        runner.stop()
    row = node_row(db_engine, node["id"])
    assert (row.provision_state, row.reservation) == ("inspect failed", None)
    assert "interrupted 1 time(s)" in row.last_error


@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
def test_a_release_that_meets_a_transient_error_is_retried_at_once(db_engine, faults):
    """The reservation is gone when release returns, not one heartbeat_interval later."""
    faults(_pg_fault("nodes", "40001", 2, event="UPDATE",
                     when="WHEN (OLD.reservation IS NOT NULL AND NEW.reservation IS NULL)"))
    node = add_node(db_engine)
    locking.acquire(db_engine, node["id"], "worker-a")
    assert locking.release(db_engine, node["id"], "worker-a") is True
    assert node_row(db_engine, node["id"]).reservation is None
    with db_engine.connect() as conn:  # the fault did fire
        assert conn.execute(sa.text("SELECT last_value FROM fault_count")).scalar() >= 3
    # Nothing is left for recovery to repair, and the node can be reserved again.
    assert locking.release_unheld(db_engine, "worker-a") == []
    with locking.reserved(db_engine, node["id"], "worker-b"):
        assert node_row(db_engine, node["id"]).reservation == "worker-b"
    assert node_row(db_engine, node["id"]).reservation is None


@pytest.mark.parametrize("scheme", ["postgresql+psycopg2", "mysql+pymysql"])
def test_a_refused_connection_is_transient_on_every_server_backend(scheme):
    # A restarting server refuses connections for seconds: worth another try, on
    # PostgreSQL (whose driver reports it with no code) as on MariaDB.
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # nothing listens here once the socket is closed
    engine = sa.create_engine(f"{scheme}://user:pw@127.0.0.1:{port}/db")
    try:
        with pytest.raises(sa.exc.OperationalError) as refused:
            engine.connect()
    finally:
        engine.dispose()
    assert retry.is_transient(refused.value)
    assert not retry.is_lock_conflict(refused.value)
