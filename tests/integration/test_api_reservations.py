"""Every node change through the API takes the node's reservation: changes made while
processing (or anyone) holds the node are refused, and a delete racing an inspect never
deletes a node that is being inspected."""

import pytest

from inspection import locking
from inspection.processing import callbacks
from tests.integration.api_helpers import Api, api_conf, error_message, versioned_client
from tests.integration.node_factory import add_node, node_row
from tests.support.concurrency import race

MAC, OTHER = "52:54:00:c7:00:01", "52:54:00:c7:00:02"


@pytest.fixture
def api(tmp_path, db_url):
    api = Api(api_conf(tmp_path, db_url))
    yield api
    api.close()


def _ports(api, node_uuid):
    return sorted(p["address"] for p in api.client.get(f"/v1/ports?node={node_uuid}")
                  .json["ports"])


def test_port_changes_wait_for_the_processing_that_holds_the_node(api):
    engine = api.context.engine
    node = add_node(engine, macs=[MAC])
    spare = add_node(engine, state="manageable")
    port = api.client.get(f"/v1/ports?node={node['uuid']}").json["ports"][0]["uuid"]
    # A worker processing the node's data holds it (its pipeline edits the ports too).
    locking.acquire(engine, node["id"], "worker-x/worker/1")
    try:
        edits = [
            api.client.post("/v1/ports", json={"node_uuid": node["uuid"], "address": OTHER}),
            api.client.patch(f"/v1/ports/{port}", json=[
                {"op": "replace", "path": "/address", "value": OTHER}]),
            api.client.patch(f"/v1/ports/{port}", json=[
                {"op": "replace", "path": "/node_uuid", "value": spare["uuid"]}]),
            api.client.delete(f"/v1/ports/{port}"),
            # Moving a port onto the held node is refused as well.
            api.client.post("/v1/ports", json={"node_uuid": spare["uuid"], "address": OTHER}),
        ]
        assert [e.status_code for e in edits[:4]] == [409] * 4
        assert "try again later" in error_message(edits[0])
        assert edits[4].status_code == 201
        back = api.client.patch(f"/v1/ports/{edits[4].json['uuid']}", json=[
            {"op": "replace", "path": "/node_uuid", "value": node["uuid"]}])
        assert back.status_code == 409
        assert _ports(api, node["uuid"]) == [MAC] and _ports(api, spare["uuid"]) == [OTHER]
    finally:
        assert locking.release(engine, node["id"], "worker-x/worker/1")
    moved = api.client.patch(f"/v1/ports/{port}", json=[
        {"op": "replace", "path": "/node_uuid", "value": spare["uuid"]}])
    assert moved.status_code == 200, moved.json
    assert _ports(api, node["uuid"]) == [] and _ports(api, spare["uuid"]) == [MAC, OTHER]
    assert node_row(engine, node["id"]).reservation is None
    assert node_row(engine, spare["id"]).reservation is None


def test_a_delete_racing_an_inspect_never_deletes_a_node_being_inspected(api):
    engine = api.context.engine
    outcomes = set()
    for i in range(8):
        node = add_node(engine, state="manageable", driver="fake-hardware",
                        macs=[f"52:54:00:c8:00:{i:02x}"])
        inspect_client, delete_client = versioned_client(api.app), versioned_client(api.app)
        inspected, deleted = race([
            lambda c=inspect_client, n=node: c.put(
                f"/v1/nodes/{n['uuid']}/states/provision", json={"target": "inspect"},
                headers={"X-OpenStack-Ironic-API-Version": "1.6"}),
            lambda c=delete_client, n=node: c.delete(f"/v1/nodes/{n['uuid']}")])
        codes = (inspected.status_code, deleted.status_code)
        outcomes.add(codes)
        # Never both: the delete checks the state under the node's reservation.
        assert codes in ((202, 409), (409, 204), (404, 204)), codes
        if deleted.status_code == 204:
            assert api.client.get(f"/v1/nodes/{node['uuid']}").status_code == 404
        else:
            assert node_row(engine, node["id"]).provision_state == "inspect wait"
            assert node_row(engine, node["id"]).reservation is None
    assert callbacks.count(engine) == 0
