"""The worker: the processing-task protocol on a real RabbitMQ, the console script, and the
recovery of nodes whose reservation outlived a dead worker."""

import threading
import time
from datetime import timedelta

import pytest

from inspection.db import migration
from inspection.db.models import utcnow
from inspection.worker import rpc
from pxe_filter.common import messaging
from pxe_filter.common.database import create_engine
from tests.integration.node_factory import add_node, node_row
from tests.support import services
from tests.support.services_procs import free_port, start_worker

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
    assert f"rabbit://guest:***@127.0.0.1:{port}/" in waiting[0]  # password masked
    assert "SIGTERM stops the worker" in waiting[0]
    assert not worker.ready and "Traceback" not in log


# -- this host's reservations left by a crash -------------------------------------------------

def _waiting(engine, seconds_ago, holder):
    return add_node(engine, inspection_started_at=utcnow() - timedelta(seconds=seconds_ago),
                    reservation=holder)


def test_worker_clears_its_own_stale_reservations_and_stops_on_sigterm(tmp_path, sqlite_url,
                                                                       vhost):
    engine = create_engine(sqlite_url)
    migration.upgrade(engine)
    mine = _waiting(engine, 10, "worker-fixed")      # left by a crashed process of this host
    other = _waiting(engine, 10, "worker-other")     # another host's: not ours to clear
    worker = start_worker(tmp_path, sqlite_url, vhost,
                          {"DEFAULT": {"host": "worker-fixed"}})
    try:
        worker.wait_ready(30)
        assert node_row(engine, mine["id"]).reservation is None
        assert node_row(engine, other["id"]).reservation == "worker-other"
        started = time.monotonic()
        assert worker.stop(timeout=15) == 0
        assert time.monotonic() - started < 10
    finally:
        worker.stop()
        engine.dispose()
    log = worker.log_text()
    assert "Traceback" not in log
    cleared = [line for line in log.splitlines() if "stale node reservation" in line]
    assert len(cleared) == 1 and "WARNING" in cleared[0], log
    assert "Cleared 1 stale node reservation(s) held by this host (worker-fixed)" in cleared[0]
