"""The worker: the processing-task protocol on a real RabbitMQ, the console script, and the
recovery of nodes whose reservation outlived a dead worker."""

import re
import threading
import time
import uuid
from datetime import timedelta

import pytest
import sqlalchemy as sa

from inspection.db import migration
from inspection.db.models import InspectionProcess, utcnow
from inspection.worker import rpc
from pxe_filter.common import messaging
from pxe_filter.common.database import create_engine
from tests.integration.node_factory import add_node, node_row
from tests.support import services
from tests.support.services_procs import free_port, start_api, start_worker

om = messaging.oslo_messaging_module()


@pytest.fixture
def vhost():
    """A RabbitMQ vhost of the test's own: tasks left queued must not leak into other tests."""
    url = services.create_vhost()
    yield url
    services.delete_vhost(url)


class Recorder:
    """A stand-in for the worker's runner and store: records wake-ups and stored tasks."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []
        self.cond = threading.Condition()

    def _record(self, call: tuple) -> None:
        with self.cond:
            self.calls.append(call)
            self.cond.notify_all()

    def endpoint(self, name: str, store=None) -> rpc.WorkerEndpoint:
        return rpc.WorkerEndpoint(lambda: self._record(("wake", name)),
                                  store or (lambda u, d: self._record(("store", name, u, d))))

    def wait_count(self, count: int, timeout: float = 15.0) -> list:
        deadline = time.monotonic() + timeout
        with self.cond:
            while len(self.calls) < count:
                left = deadline - time.monotonic()
                assert left > 0, f"only {len(self.calls)} of {count} messages arrived"
                self.cond.wait(left)
            return list(self.calls)


def _server(url, name, endpoint):
    transport = messaging.get_transport(url)
    server = rpc.start_server(transport, name, endpoint)
    return transport, server


def _stop(transport, server):
    rpc.stop_server(server)
    transport.cleanup()


def test_wakeups_are_shared_between_workers_and_each_arrives_once(vhost):
    recorder = Recorder()
    running = [_server(vhost, f"w{i}", recorder.endpoint(f"w{i}")) for i in (1, 2)]
    client_transport = messaging.get_transport(vhost)
    try:
        client = rpc.WorkerClient(client_transport)
        for _ in range(40):
            client.wake()
        calls = recorder.wait_count(40)
        time.sleep(0.3)  # a duplicate would arrive now
        assert len(recorder.calls) == 40 and {c[0] for c in calls} == {"wake"}
        per_worker = {name: sum(1 for c in calls if c[1] == name) for name in ("w1", "w2")}
        assert per_worker["w1"] > 0 and per_worker["w2"] > 0, per_worker  # not a fanout
    finally:
        for transport, server in running:
            _stop(transport, server)
        client_transport.cleanup()


def test_wakeups_cast_while_no_worker_runs_arrive_later(vhost):
    recorder = Recorder()
    transport, server = _server(vhost, "w1", recorder.endpoint("first"))
    _stop(transport, server)  # the topic queue exists now, nobody consumes it
    client_transport = messaging.get_transport(vhost)
    try:
        rpc.WorkerClient(client_transport).wake()
        time.sleep(0.5)
        assert recorder.calls == []
        transport, server = _server(vhost, "w2", recorder.endpoint("second"))
        try:
            assert recorder.wait_count(1) == [("wake", "second")]
        finally:
            _stop(transport, server)
    finally:
        client_transport.cleanup()


def test_older_apis_tasks_are_stored_and_bad_tasks_do_not_stop_the_worker(vhost):
    recorder = Recorder()

    def failing_then_recording(node_uuid, data):
        if node_uuid == "boom":
            raise RuntimeError("database went away")
        recorder._record(("store", "w", node_uuid, data))

    transport, server = _server(vhost, "w", recorder.endpoint("w", failing_then_recording))
    client_transport = messaging.get_transport(vhost)
    try:
        # As an API of version 1.0 sends it: the data in the message.
        raw = om.get_rpc_client(client_transport, om.Target(
            exchange=rpc.EXCHANGE, topic=rpc.TOPIC, version="1.0"))
        raw.cast({}, "__init__", process=None)      # not exposed: refused
        raw.cast({}, "process", node_uuid=42, data="not a dict")  # malformed: dropped
        raw.cast({}, "process", node_uuid="boom", data={})        # store fails: logged
        raw.cast({}, "process", node_uuid="after", data={"inventory": {}})  # version 1.0
        assert recorder.wait_count(2) == [("store", "w", "after", {"inventory": {}}),
                                          ("wake", "w")]
    finally:
        _stop(transport, server)
        client_transport.cleanup()


# -- the console script: start-up errors ------------------------------------------------------

def test_worker_without_a_message_bus_refuses_to_start(tmp_path, sqlite_url):
    worker = start_worker(tmp_path, sqlite_url, None)
    assert worker.wait(30) == 2
    log = worker.log_text()
    worker.stop()
    critical = [line for line in log.splitlines() if "CRITICAL" in line]
    assert len(critical) == 1, log
    assert "[DEFAULT]transport_url is not set" in critical[0]
    assert "Traceback" not in log


def test_worker_refuses_a_missing_sqlite_database(tmp_path, rabbit_url):
    worker = start_worker(tmp_path, f"sqlite:///{tmp_path}/state/none.sqlite", rabbit_url)
    assert worker.wait(30) == 2
    log = worker.log_text()
    worker.stop()
    assert "does not exist: create it with 'ironic-inspection dbsync'" in log
    assert not (tmp_path / "state").exists()  # nothing created on the way


def test_worker_refuses_a_heartbeat_timeout_shorter_than_two_intervals(tmp_path, sqlite_url,
                                                                       rabbit_url):
    engine = create_engine(sqlite_url)
    migration.upgrade(engine)
    engine.dispose()
    worker = start_worker(tmp_path, sqlite_url, rabbit_url, {"processing": {
        "heartbeat_interval": 10, "heartbeat_timeout": 15}})
    assert worker.wait(30) == 2
    log = worker.log_text()
    worker.stop()
    critical = [line for line in log.splitlines() if "CRITICAL" in line]
    assert len(critical) == 1 and "Traceback" not in log, log
    assert "[processing]heartbeat_timeout (15) must be at least twice " \
           "heartbeat_interval (10)" in critical[0]


def test_worker_on_a_database_without_the_callbacks_table_says_to_run_dbsync(
        tmp_path, sqlite_url, rabbit_url):
    engine = create_engine(sqlite_url)
    migration.upgrade(engine, "0001_initial")  # the schema of the previous version
    engine.dispose()
    worker = start_worker(tmp_path, sqlite_url, rabbit_url)
    assert worker.wait(30) == 1
    log = worker.log_text()
    worker.stop()
    assert "has no table inspection_callbacks (added by this version): run " \
           "'ironic-inspection dbsync" in log and "Traceback" not in log


def test_worker_with_an_unreachable_database_exits_1(tmp_path, rabbit_url):
    worker = start_worker(tmp_path, "postgresql+psycopg2://nobody@127.0.0.1:1/none",
                          rabbit_url)
    assert worker.wait(30) == 1
    log = worker.log_text()
    worker.stop()
    assert "cannot connect to database" in log and "Traceback" not in log


def test_worker_waits_for_an_unreachable_bus_and_stops_on_sigterm(tmp_path, sqlite_url):
    engine = create_engine(sqlite_url)
    migration.upgrade(engine)
    engine.dispose()
    port = free_port()  # nobody listens: every connection attempt is refused
    worker = start_worker(tmp_path, sqlite_url, f"rabbit://guest:guest@127.0.0.1:{port}/")
    try:
        deadline = time.monotonic() + 20
        # Retrying the connection; then (after 5 s) saying once that it waits for the bus.
        while "does not answer after" not in worker.log_text():
            assert worker.proc.poll() is None, worker.log_text()
            if time.monotonic() > deadline:
                break  # SIGTERM must work anyway; the log is checked below
            time.sleep(0.1)
        started = time.monotonic()
        assert worker.stop(timeout=15) == 0, worker.log_text()
        assert time.monotonic() - started < 5
    finally:
        worker.stop()
    log = worker.log_text()
    waiting = [line for line in log.splitlines() if "does not answer" in line]
    assert len(waiting) == 1 and "WARNING" in waiting[0], log
    # the password masked (by the message, then again by the log filter of every line)
    assert re.search(rf"rabbit://guest:\*+@127.0.0.1:{port}/", waiting[0]), waiting[0]
    assert "SIGTERM stops the worker" in waiting[0]
    assert not worker.ready and "Traceback" not in log


# -- this host's reservations left by a crash -------------------------------------------------

def _waiting(engine, seconds_ago, holder):
    return add_node(engine, inspection_started_at=utcnow() - timedelta(seconds=seconds_ago),
                    reservation=holder)


def _identities(engine, host: str) -> set[str]:
    with engine.connect() as conn:
        return set(conn.execute(sa.select(InspectionProcess.host).where(
            InspectionProcess.host.startswith(host + "/"))).scalars())


def _wait_for(predicate, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


@pytest.mark.parametrize("backend", ["sqlite", "postgresql", "mysql"])
def test_an_api_and_a_worker_sharing_a_host_never_release_each_others_reservations(
        tmp_path, request, vhost, backend):
    url = request.getfixturevalue({"sqlite": "sqlite_url", "postgresql": "pg_url",
                                   "mysql": "mysql_url"}[backend])
    engine = create_engine(url)
    migration.upgrade(engine)
    host = f"shared-{uuid.uuid4().hex[:8]}"  # the server databases are the session's
    quick = {"DEFAULT": {"host": host},
             "processing": {"heartbeat_interval": 1, "heartbeat_timeout": 3}}
    api = start_api(tmp_path, url, None, quick)  # all-in-one: it registers, too
    first = start_worker(tmp_path, url, vhost, quick, name="w1")
    second = None
    try:
        api.wait_ready(30)
        first.wait_ready(30)
        assert _wait_for(lambda: len(_identities(engine, host)) == 2, 10)
        api_id, worker_id = sorted(_identities(engine, host))  # "/api/" < "/worker/"
        assert api_id.startswith(f"{host}/api/") and worker_id.startswith(f"{host}/worker/")
        # Work in flight in each process: an API inspect or patch, a worker's processing.
        in_api = _waiting(engine, 10, api_id)
        in_worker = _waiting(engine, 10, worker_id)
        first.kill()  # the worker crashes and is started again at once
        second = start_worker(tmp_path, url, vhost, quick, name="w2")
        second.wait_ready(30)
        # The dead worker's reservation goes once its heartbeat is stale (3 s), not sooner,
        # and the API's never: it is alive.
        assert _wait_for(lambda: node_row(engine, in_worker["id"]).reservation is None, 20)
        assert node_row(engine, in_api["id"]).reservation == api_id
        restarted = _identities(engine, host) - {api_id}
        assert len(restarted) == 1 and worker_id not in restarted, restarted
        assert second.stop(timeout=15) == 0
        assert node_row(engine, in_api["id"]).reservation == api_id
    finally:
        for proc in (second, first, api):
            if proc is not None:
                proc.stop()
        engine.dispose()
    logs = api.log_text() + second.log_text()
    assert "Traceback" not in logs
    assert f"Process {worker_id} is dead" in logs, logs
