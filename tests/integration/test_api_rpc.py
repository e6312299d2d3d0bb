"""With [DEFAULT]transport_url set, the API casts processing to workers over RabbitMQ."""

import time

import pytest

from inspection.db import migration
from inspection.processing.service import InspectionService
from inspection.worker import rpc
from pxe_filter.common import messaging
from pxe_filter.common.database import create_engine
from tests.integration.api_helpers import Api, api_conf, error_message
from tests.integration.node_factory import add_node
from tests.integration.pipeline_support import body, macs_of
from tests.support import services


@pytest.fixture
def vhost():
    """A vhost of the test's own so that no queued task leaks into other tests."""
    url = services.create_vhost()
    yield url
    services.delete_vhost(url)


def test_cast_to_worker(tmp_path, sqlite_url, vhost):
    migration.upgrade(create_engine(sqlite_url))
    conf = api_conf(tmp_path, sqlite_url, DEFAULT={"transport_url": vhost})
    api = Api(conf)
    try:
        assert type(api.context.dispatcher).__name__ == "RpcDispatcher"
        data = body("bios-vm-x86_64")
        node = add_node(api.context.engine, state="inspect wait", macs=macs_of(data)[:1],
                        inspect_interface="agent")
        transport = messaging.get_transport(vhost)
        service = InspectionService.from_conf(conf, engine=api.context.engine)
        server = rpc.start_server(transport, "worker-1", rpc.WorkerEndpoint(service.process))
        resp = api.client.post("/v1/continue_inspection", json=data)
        assert resp.status_code == 202 and resp.json["uuid"] == node["uuid"]
        try:
            deadline = time.monotonic() + 20
            while True:
                state = api.client.get(f"/v1/nodes/{node['uuid']}").json["provision_state"]
                if state != "inspect wait" or time.monotonic() > deadline:
                    break
                time.sleep(0.1)
            assert state == "manageable"
        finally:
            rpc.stop_server(server)
            transport.cleanup()
    finally:
        api.close()


def test_unreachable_bus_gives_503(tmp_path, sqlite_url):
    migration.upgrade(create_engine(sqlite_url))
    dead = "rabbit://guest:guest@127.0.0.1:1/"
    api = Api(api_conf(tmp_path, sqlite_url, DEFAULT={"transport_url": dead}))
    try:
        data = body("bios-vm-x86_64")
        node = add_node(api.context.engine, state="inspect wait", macs=macs_of(data)[:1])
        started = time.monotonic()
        resp = api.client.post("/v1/continue_inspection", json=data)
        assert resp.status_code == 503 and "try again" in error_message(resp)
        assert time.monotonic() - started < 30
        assert api.client.get(f"/v1/nodes/{node['uuid']}").json["provision_state"] == \
            "inspect wait"
    finally:
        api.close()
