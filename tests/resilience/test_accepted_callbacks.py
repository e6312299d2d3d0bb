"""Accepted means durable: a 202 from /v1/continue_inspection survives the death of any one
process. Real PostgreSQL (a database of the test's own), RabbitMQ (a vhost of the test's own,
or a private broker when the test kills it), real API and worker processes killed with
SIGKILL."""

import logging
import threading
import time

import pytest
import requests
import sqlalchemy as sa
from sqlalchemy.engine import make_url

from inspection.db import migration
from pxe_filter.common.database import create_engine
from tests.integration.api_helpers import Api, api_conf, error_message
from tests.integration.node_factory import add_node, node_row
from tests.support import services
from tests.support.callbacks import (
    REFUSED,
    callback_body,
    finished_counts,
    machine_macs,
    nodes_of,
    post_callbacks,
    wait_finished,
)
from tests.support.rabbitmq import PrivateRabbit
from tests.support.services_procs import API_HEADERS, ONE_ADDRESS_RACK, start_api, start_worker
from tests.support.tcpproxy import TcpProxy

pytestmark = pytest.mark.slow

#: Takeover of a dead worker's callbacks at the default [processing] options (the contract),
#: plus what a shared 2-core machine adds.
TAKEOVER = 60
MARGIN = 20
# The simulated machines all post from 127.0.0.1.
DISCOVERY = {"auto_discovery": {"enabled": True}, "api": ONE_ADDRESS_RACK}


@pytest.fixture
def pg_db():
    """A migrated PostgreSQL database of the test's own, and an engine on it."""
    url = services.create_database(services.PG_ADMIN_URL, "PostgreSQL")
    engine = create_engine(url)
    migration.upgrade(engine)
    yield url, engine
    engine.dispose()
    services.drop_database(services.PG_ADMIN_URL, url)


@pytest.fixture
def vhost():
    """A RabbitMQ vhost of the test's own: nothing queued leaks into other tests."""
    url = services.create_vhost()
    yield url
    services.delete_vhost(url)


def pending_callbacks(engine) -> int:
    """Accepted callbacks not yet processed (the table of accepted callbacks)."""
    with engine.connect() as conn:
        return conn.execute(sa.text("SELECT COUNT(*) FROM inspection_callbacks")).scalar()


def assert_each_processed_once(engine, macs, answers, rows, logs) -> None:
    """Every answer 202, one node per machine, each node processed exactly once."""
    refused = [a for a in answers if isinstance(a, Exception) or a.status_code != 202]
    assert not refused, sorted({str(a)[:200] if isinstance(a, Exception)
                                else f"{a.status_code} {a.text}" for a in refused})
    uuids = {a.json()["uuid"] for a in answers}
    assert len(uuids) == len(macs)  # one node per machine
    assert len(rows) == len(macs) and {r.uuid for r in rows} == uuids  # no duplicate node
    unfinished = [r.uuid for r in rows if r.inspection_finished_at is None]
    assert not unfinished, f"{len(unfinished)} accepted callback(s) never processed"
    assert all(r.last_error is None for r in rows), {r.last_error for r in rows}
    counts = finished_counts(logs)
    assert max(counts.values()) == 1, [u for u, n in counts.items() if n > 1]
    assert not any(REFUSED in log for log in logs)  # no second run of processed data
    assert pending_callbacks(engine) == 0


def test_a_worker_killed_mid_way_loses_no_accepted_callback(tmp_path, pg_db, vhost):
    url, engine = pg_db
    count = 200
    macs = machine_macs(count)
    workers = [start_worker(tmp_path, url, vhost, DISCOVERY, name=f"worker{i}")
               for i in (1, 2)]
    api = start_api(tmp_path, url, vhost, DISCOVERY)
    procs = [*workers, api]
    try:
        for worker in workers:
            worker.wait_ready(60)
        api.wait_http(60)
        answers: list = []
        poster = threading.Thread(target=lambda: answers.extend(post_callbacks(api.url, macs)))
        started = time.monotonic()
        poster.start()
        # Two seconds in, once it has taken work: the victim dies with work in hand.
        workers[0].wait_log("Inspection of node", timeout=60)
        time.sleep(max(0.0, started + 2 - time.monotonic()))
        workers[0].kill()
        killed = time.monotonic()
        poster.join(120)
        rows = wait_finished(engine, macs, killed + TAKEOVER + MARGIN)
        done = time.monotonic() - killed
        logs = [p.log_text() for p in procs]
        lost = count - sum(1 for r in rows if r.inspection_finished_at)
        print(f"{count} callbacks, worker1 killed {killed - started:.1f} s in: {lost} lost; "
              f"all processed {done:.1f} s after the kill; worker shares "
              f"{[sum(finished_counts([log]).values()) for log in logs[:2]]}")
        assert_each_processed_once(engine, macs, answers, rows, logs)
        assert done < TAKEOVER + MARGIN
        assert workers[1].stop() == 0 and api.stop() == 0
    finally:
        for proc in procs:
            proc.stop()


def test_the_api_all_in_one_killed_after_202_finishes_the_work_when_restarted(tmp_path,
                                                                            sqlite_url):
    engine = create_engine(sqlite_url)
    migration.upgrade(engine)
    count = 40
    macs = machine_macs(count, "52:54:00:d2")
    # The same [DEFAULT]host before and after the crash, as systemd restarts it: the new
    # process (a new identity) takes the work over once the old one's heartbeat is stale.
    conf = {**DISCOVERY, "DEFAULT": {"host": "all-in-one"},
            "api": {**ONE_ADDRESS_RACK, "processing_threads": 1},
            "processing": {"heartbeat_interval": 1, "heartbeat_timeout": 3}}
    first = start_api(tmp_path, sqlite_url, None, conf, name="api1")
    procs = [first]
    try:
        first.wait_http(60)
        answers = post_callbacks(first.url, macs, threads=16)
        first.kill()  # right after the last 202: most of the work is still in hand
        unprocessed = sum(1 for r in wait_finished(engine, macs, 0)
                          if not r.inspection_finished_at)
        second = start_api(tmp_path, sqlite_url, None, conf, name="api2")
        procs.append(second)
        restarted = time.monotonic()
        rows = wait_finished(engine, macs, restarted + 60)
        done = time.monotonic() - restarted
        lost = count - sum(1 for r in rows if r.inspection_finished_at)
        print(f"{count} callbacks, API killed after the last 202 with {unprocessed} "
              f"unprocessed: {lost} lost; all processed {done:.1f} s after the restart")
        logs = [p.log_text() for p in procs]
        assert unprocessed > 0  # the kill did catch work in hand
        assert_each_processed_once(engine, macs, answers, rows, logs)
        assert second.stop() == 0
    finally:
        for proc in procs:
            proc.stop()
        engine.dispose()


def test_a_killed_broker_loses_no_accepted_callback(tmp_path, pg_db):
    url, engine = pg_db
    macs = machine_macs(30, "52:54:00:d3")
    queued, later = macs[:20], macs[20:]
    with PrivateRabbit() as rabbit:
        worker = start_worker(tmp_path, url, rabbit.url, DISCOVERY, name="worker1")
        api = start_api(tmp_path, url, rabbit.url, DISCOVERY)
        procs = [worker, api]
        try:
            worker.wait_ready(60)  # the task queue exists from now on
            assert worker.stop() == 0  # ... and nobody consumes it
            api.wait_http(60)
            answers = post_callbacks(api.url, queued, threads=8)
            rabbit.kill()  # with the wake-ups (old: the data itself) queued in it
            killed = time.monotonic()
            # The bus stays dead: a worker still starts and processes what is stored...
            worker = start_worker(tmp_path, url, rabbit.url, DISCOVERY, name="worker2")
            procs.append(worker)
            wait_finished(engine, queued, killed + 60)
            # ... the API still accepts, and the idle worker finds those with no wake-up.
            answers += post_callbacks(api.url, later, threads=8)
            rows = wait_finished(engine, macs, killed + 60)
            done = time.monotonic() - killed
            lost = len(macs) - sum(1 for r in rows if r.inspection_finished_at)
            print(f"broker killed with {len(queued)} callbacks queued, {len(later)} more "
                  f"posted while it was dead: {lost} lost; all processed {done:.1f} s "
                  f"after the kill")
            assert_each_processed_once(engine, macs, answers, rows,
                                       [p.log_text() for p in procs])
            # What the operator sees, once the cast's own reconnection attempts are over.
            api.wait_log("Cannot wake a worker over the message bus", timeout=60)
            assert worker.stop() == 0 and api.stop() == 0
        finally:
            for proc in procs:
                proc.stop()


def test_an_unreachable_database_accepts_nothing_and_says_try_again(tmp_path, pg_db, caplog):
    url, engine = pg_db
    data = callback_body("52:54:00:d4:00:01")
    node = add_node(engine, macs=["52:54:00:d4:00:01"], inspect_interface="agent")
    with TcpProxy("127.0.0.1", make_url(url).port or 5432) as proxy:
        proxied = make_url(url).set(port=proxy.port).render_as_string(hide_password=False)
        api = Api(api_conf(tmp_path, proxied, database={"connect_timeout": 2}))
        try:
            proxy.stop()  # the database server is gone for this API
            with caplog.at_level(logging.ERROR, logger="inspection.api"):
                answer = api.unversioned.post("/v1/continue_inspection", json=data)
            assert answer.status_code == 503, answer.json
            assert "try again later" in error_message(answer)
            assert "Inspection data not accepted, the database failed" in caplog.text
            assert "Traceback" not in caplog.text
            assert pending_callbacks(engine) == 0  # nothing accepted
            proxy.start()  # back: the ramdisk's retry is accepted and processed
            answer = api.unversioned.post("/v1/continue_inspection", json=data)
            assert answer.status_code == 202, answer.json
            api.wait_processed(30)
            assert node_row(engine, node["id"]).provision_state == "manageable"
        finally:
            api.close()


def test_a_database_failure_while_discovering_leaves_no_node_the_retry_cannot_use(
        tmp_path, sqlite_url):
    engine = create_engine(sqlite_url)
    migration.upgrade(engine)
    mac = "52:54:00:d5:00:01"
    api = Api(api_conf(tmp_path, sqlite_url, **DISCOVERY))
    failures = []

    def die_on_storing(conn, cursor, statement, *args) -> None:
        if statement.startswith("INSERT INTO inspection_callbacks") and not failures:
            failures.append(statement)
            raise sa.exc.OperationalError(statement, {}, Exception("server closed the "
                                                                     "connection"))

    sa.event.listen(api.context.engine, "before_cursor_execute", die_on_storing)
    try:
        answer = api.unversioned.post("/v1/continue_inspection", json=callback_body(mac))
        assert answer.status_code == 503 and failures, answer.json
        assert nodes_of(engine, [mac]) == []  # the enrollment went with the data
        answer = api.unversioned.post("/v1/continue_inspection", json=callback_body(mac))
        assert answer.status_code == 202, answer.json  # the ramdisk's retry
        api.wait_processed(30)
        (row,) = nodes_of(engine, [mac])
        assert row.uuid == answer.json["uuid"] and row.inspection_finished_at
    finally:
        api.close()
        engine.dispose()


def test_data_accepted_for_an_aborted_inspection_never_completes_the_next_one(
        tmp_path, sqlite_url, vhost):
    engine = create_engine(sqlite_url)
    migration.upgrade(engine)
    mac = "52:54:00:d6:00:01"
    node = add_node(engine, state="manageable", macs=[mac], inspect_interface="agent")
    fast = {"processing": {"heartbeat_interval": 1, "heartbeat_timeout": 3}}
    api = start_api(tmp_path, sqlite_url, vhost)  # hands its data to workers: none runs
    procs = [api]

    def provision(target: str) -> None:
        answer = requests.put(f"{api.url}/v1/nodes/{node['uuid']}/states/provision",
                              json={"target": target}, headers=API_HEADERS, timeout=30)
        assert answer.status_code == 202, answer.text

    try:
        api.wait_http(60)
        provision("inspect")
        answer = requests.post(f"{api.url}/v1/continue_inspection", json=callback_body(mac),
                               timeout=30)
        assert answer.status_code == 202, answer.text
        assert pending_callbacks(engine) == 1
        for target in ("abort", "manage", "inspect"):
            provision(target)
        worker = start_worker(tmp_path, sqlite_url, vhost, fast)
        procs.append(worker)
        worker.wait_ready(60)
        # Three housekeeping passes of the worker: the old data would be processed by now.
        time.sleep(3)
        row = node_row(engine, node["id"])
        assert row.provision_state == "inspect wait" and row.inspection_finished_at is None
        assert pending_callbacks(engine) == 0
        answer = requests.post(f"{api.url}/v1/continue_inspection", json=callback_body(mac),
                               timeout=30)
        assert answer.status_code == 202, answer.text
        deadline = time.monotonic() + 30
        while node_row(engine, node["id"]).provision_state == "inspect wait":
            assert time.monotonic() < deadline, "the fresh data was never processed"
            time.sleep(0.2)
        assert node_row(engine, node["id"]).provision_state == "manageable"
        assert worker.stop() == 0 and api.stop() == 0
    finally:
        for proc in procs:
            proc.stop()
        engine.dispose()
