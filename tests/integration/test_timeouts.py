"""The inspect-wait timeout task, alone and in several processes at once."""

import time
from datetime import timedelta

import requests
import sqlalchemy as sa

from inspection import bmc, locking
from inspection.db import migration
from inspection.db.models import Node, utcnow
from inspection.timeouts import TimeoutTask, fail_timed_out
from pxe_filter.broadcast import FilterNotifier
from pxe_filter.common.database import create_engine
from tests.integration.filter_listener import listener  # noqa: F401 - fixture
from tests.integration.node_factory import add_node, make_conf, node_row
from tests.support import concurrency
from tests.support.services_procs import API_HEADERS, start_api

NO_BUS = FilterNotifier(None)


def conf_with(tmp_path, timeout, host="inspection-1"):
    return make_conf(tmp_path, DEFAULT={"host": host},
                     inspector={"inspect_wait_timeout": timeout})


def waiting_since(engine, seconds_ago, macs=(), **columns):
    return add_node(engine, macs=macs, bmc_cache=["192.0.2.1"],
                    inspection_started_at=utcnow() - timedelta(seconds=seconds_ago),
                    **columns)


def test_overdue_node_fails_with_a_clear_error(db_engine, tmp_path):
    overdue = waiting_since(db_engine, 2000)
    recent = waiting_since(db_engine, 100)
    other_state = add_node(db_engine, state="manageable",
                           inspection_started_at=utcnow() - timedelta(days=3))
    assert fail_timed_out(db_engine, conf_with(tmp_path, 1800), NO_BUS) == [overdue["uuid"]]
    row = node_row(db_engine, overdue["id"])
    assert row.provision_state == "inspect failed" and row.reservation is None
    assert "Timeout reached while inspecting" in row.last_error
    assert "1800 seconds" in row.last_error
    assert bmc.CACHE_KEY not in row.driver_internal_info
    assert node_row(db_engine, recent["id"]).provision_state == "inspect wait"
    assert node_row(db_engine, other_state["id"]).provision_state == "manageable"
    # Running again changes nothing.
    assert fail_timed_out(db_engine, conf_with(tmp_path, 1800), NO_BUS) == []


def test_an_out_of_band_read_nobody_did_times_out_but_not_ironics_nodes(db_engine, tmp_path):
    ours = waiting_since(db_engine, 2000, state="inspecting", driver="redfish",
                         inspect_interface="redfish",
                         driver_internal_info={"bmc_task": {"action": "inspect"}})
    ironics = waiting_since(db_engine, 2000, state="inspecting", driver="redfish",
                            inspect_interface="redfish")
    assert fail_timed_out(db_engine, conf_with(tmp_path, 1800), NO_BUS) == [ours["uuid"]]
    assert node_row(db_engine, ours["id"]).provision_state == "inspect failed"
    assert node_row(db_engine, ironics["id"]).provision_state == "inspecting"


def test_zero_disables_the_timeout(db_engine, tmp_path):
    node = waiting_since(db_engine, 10**6)
    assert fail_timed_out(db_engine, conf_with(tmp_path, 0), NO_BUS) == []
    assert node_row(db_engine, node["id"]).provision_state == "inspect wait"


def test_node_without_start_time_uses_its_last_update(db_engine, tmp_path):
    node = add_node(db_engine, updated_at=utcnow() - timedelta(hours=2))
    assert fail_timed_out(db_engine, conf_with(tmp_path, 1800), NO_BUS) == [node["uuid"]]


def test_node_locked_by_someone_else_is_skipped_until_released(db_engine, tmp_path):
    node = waiting_since(db_engine, 2000)
    locking.acquire(db_engine, node["id"], "ironic-conductor-1")
    assert fail_timed_out(db_engine, conf_with(tmp_path, 1800), NO_BUS) == []
    row = node_row(db_engine, node["id"])
    assert (row.provision_state, row.reservation) == ("inspect wait", "ironic-conductor-1")
    locking.release(db_engine, node["id"], "ironic-conductor-1")
    assert fail_timed_out(db_engine, conf_with(tmp_path, 1800), NO_BUS) == [node["uuid"]]


def test_timeout_broadcasts_deny(db_engine, tmp_path, listener):  # noqa: F811
    notifier, endpoint = listener
    macs = ["52:54:00:00:40:01", "52:54:00:00:40:02"]
    waiting_since(db_engine, 2000, macs=macs)
    assert len(fail_timed_out(db_engine, conf_with(tmp_path, 1800), notifier)) == 1
    assert endpoint.wait_for(lambda calls: calls) == [{"allow": [], "deny": macs}]


def test_several_processes_at_once_fail_each_node_exactly_once(db_url, db_engine, tmp_path):
    nodes = [waiting_since(db_engine, 4000) for _ in range(24)]
    workers = 4
    for i in range(workers):
        (tmp_path / str(i)).mkdir()
    confs = [conf_with(tmp_path / str(i), 1800, host=f"inspection-{i}")
             for i in range(workers)]
    with concurrency.engines(db_url, workers) as engines:
        results = concurrency.race([lambda e=e, c=c: fail_timed_out(e, c, NO_BUS)
                                    for e, c in zip(engines, confs, strict=True)])
    assert not any(isinstance(r, Exception) for r in results), results
    failed = [u for r in results for u in r]
    # Every node failed once; a node busy in one worker was done by another or is left for
    # the next run (never failed twice).
    assert len(failed) == len(set(failed))
    assert set(failed) | set(fail_timed_out(db_engine, confs[0], NO_BUS)) == \
        {n["uuid"] for n in nodes}
    with db_engine.connect() as conn:
        rows = conn.execute(sa.select(Node.provision_state, Node.reservation)).all()
    assert set(rows) == {("inspect failed", None)}


def test_periodic_task_fails_a_node_that_times_out_while_it_runs(db_engine, tmp_path):
    node = waiting_since(db_engine, 0)
    task = TimeoutTask(db_engine, conf_with(tmp_path, 1), NO_BUS, interval=0.1)
    task.start()
    try:
        deadline = time.monotonic() + 15
        while node_row(db_engine, node["id"]).provision_state == "inspect wait":
            assert time.monotonic() < deadline, "the periodic task never failed the node"
            time.sleep(0.1)
    finally:
        task.stop(10)
    assert node_row(db_engine, node["id"]).provision_state == "inspect failed"


def test_the_all_in_one_api_fails_a_stuck_node_within_the_timeout_plus_one_interval(
        tmp_path, sqlite_url):
    engine = create_engine(sqlite_url)
    migration.upgrade(engine)
    node = add_node(engine, state="manageable", macs=["52:54:00:e1:00:01"],
                    inspect_interface="agent")
    # The shipped default: no message bus, the API processes inspection data itself.
    api = start_api(tmp_path, sqlite_url, None, {"inspector": {"inspect_wait_timeout": 5}})
    try:
        api.wait_http(60)
        answer = requests.put(f"{api.url}/v1/nodes/{node['uuid']}/states/provision",
                              json={"target": "inspect"}, headers=API_HEADERS, timeout=30)
        assert answer.status_code == 202, answer.text
        started = time.monotonic()
        limit = 5 + 1 + 1  # timeout + one interval (a tenth of it, at least 1 s) + slack
        # The failure commits before the reservation's release: wait for both.
        while (row := node_row(engine, node["id"])).provision_state == "inspect wait" \
                or row.reservation is not None:
            assert time.monotonic() - started < limit, "the node was never timed out"
            time.sleep(0.1)
        assert row.provision_state == "inspect failed"
        assert "Timeout reached" in row.last_error
        assert api.stop() == 0
    finally:
        api.stop()
        engine.dispose()
