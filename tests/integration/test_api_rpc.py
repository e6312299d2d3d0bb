"""With [DEFAULT]transport_url set, the API stores accepted data, then wakes a worker over
RabbitMQ."""

import logging
import time

import pytest

from inspection.db import migration
from inspection.processing import callbacks
from inspection.processing.service import InspectionService
from inspection.worker import rpc
from inspection.worker.runner import CallbackRunner
from pxe_filter.common import messaging
from pxe_filter.common.database import create_engine
from tests.integration.api_helpers import Api, api_conf
from tests.integration.node_factory import add_node
from tests.integration.pipeline_support import body, macs_of
from tests.support import services


@pytest.fixture
def vhost():
    """A vhost of the test's own so that no queued task leaks into other tests."""
    url = services.create_vhost()
    yield url
    services.delete_vhost(url)


def _wait_state(api, node_uuid, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while True:
        state = api.client.get(f"/v1/nodes/{node_uuid}").json["provision_state"]
        if state != "inspect wait" or time.monotonic() > deadline:
            return state
        time.sleep(0.1)


def test_stored_then_cast_to_worker(tmp_path, sqlite_url, vhost):
    migration.upgrade(create_engine(sqlite_url))
    # Polls far apart: only the wake-up cast can explain a quick result.
    conf = api_conf(tmp_path, sqlite_url, DEFAULT={"transport_url": vhost},
                    processing={"heartbeat_interval": 30, "heartbeat_timeout": 60})
    api = Api(conf)
    try:
        assert type(api.context.dispatcher).__name__ == "RpcDispatcher"
        data = body("bios-vm-x86_64")
        node = add_node(api.context.engine, state="inspect wait", macs=macs_of(data)[:1],
                        inspect_interface="agent")
        transport = messaging.get_transport(vhost)
        service = InspectionService.from_conf(conf, engine=api.context.engine)
        runner = CallbackRunner(api.context.engine, service, conf, 2)
        runner.start()
        server = rpc.start_server(transport, "worker-1", rpc.WorkerEndpoint(
            runner.wake, lambda u, d: callbacks.store(api.context.engine, u, d)))
        try:
            resp = api.unversioned.post("/v1/continue_inspection", json=data)
            assert resp.status_code == 202 and resp.json["uuid"] == node["uuid"]
            assert _wait_state(api, node["uuid"], 20) == "manageable"
            assert callbacks.count(api.context.engine) == 0
        finally:
            rpc.stop_server(server)
            runner.stop()
            service.notifier.close()  # its connection must not outlive the vhost
            transport.cleanup()
    finally:
        api.close()


def test_unreachable_bus_still_accepts_and_a_worker_finds_the_data(tmp_path, sqlite_url,
                                                                   caplog):
    migration.upgrade(create_engine(sqlite_url))
    dead = "rabbit://guest:guest@127.0.0.1:1/"
    conf = api_conf(tmp_path, sqlite_url, DEFAULT={"transport_url": dead},
                    processing={"heartbeat_interval": 1, "heartbeat_timeout": 2})
    api = Api(conf)
    try:
        data = body("bios-vm-x86_64")
        node = add_node(api.context.engine, state="inspect wait", macs=macs_of(data)[:1],
                        inspect_interface="agent")
        started = time.monotonic()
        with caplog.at_level(logging.WARNING, logger="inspection.api.dispatch"):
            resp = api.unversioned.post("/v1/continue_inspection", json=data)
            assert resp.status_code == 202  # stored: the bus only carries wake-ups
            assert time.monotonic() - started < 5  # the cast never holds up the ramdisk
            assert callbacks.count(api.context.engine) == 1
            deadline = time.monotonic() + 30
            while "Cannot wake a worker" not in caplog.text:
                assert time.monotonic() < deadline, caplog.text
                time.sleep(0.1)
        # A worker that reaches the database finds the data without any wake-up.
        service = InspectionService.from_conf(conf, engine=api.context.engine)
        runner = CallbackRunner(api.context.engine, service, conf, 1)
        runner.start()
        try:
            assert _wait_state(api, node["uuid"], 20) == "manageable"
        finally:
            runner.stop()
            service.notifier.close()
    finally:
        api.close()
