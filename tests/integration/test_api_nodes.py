"""/v1/nodes and /v1/ports against real databases: CRUD, filters, states, masking."""

import uuid

import pytest
import sqlalchemy as sa

from inspection.db.models import InspectionCallback, NodeInventory, utcnow
from inspection.processing import callbacks
from inspection.worker import heartbeat
from tests.integration.api_helpers import Api, api_conf, error_message, fault
from tests.integration.node_factory import add_node


@pytest.fixture
def api(tmp_path, db_url):
    api = Api(api_conf(tmp_path, db_url))
    yield api
    api.close()


def new_node(api, **fields):
    fields.setdefault("driver", "ipmi")
    resp = api.client.post("/v1/nodes", json=fields)
    assert resp.status_code == 201, resp.json
    return resp


def test_create_show_delete_with_masked_secrets(api):
    resp = new_node(api, name="node-1", driver_info={
        "ipmi_address": "10.0.0.5", "ipmi_username": "admin", "ipmi_password": "hunter2",
        "redfish": {"auth_token": "t0ken-value"}}, properties={"cpus": 4})
    node = resp.json
    assert resp.headers["Location"] == f"http://localhost/v1/nodes/{node['uuid']}"
    assert node["provision_state"] == "enroll" and node["auto_discovered"] is False
    for path in (f"/v1/nodes/{node['uuid']}", "/v1/nodes/node-1"):
        shown = api.client.get(path)
        assert shown.status_code == 200
        text = shown.get_data(as_text=True)
        assert "hunter2" not in text and "t0ken-value" not in text
        info = shown.json["driver_info"]
        assert info["ipmi_password"] == "******" and info["redfish"]["auth_token"] == "******"
        assert info["ipmi_address"] == "10.0.0.5" and info["ipmi_username"] == "admin"
    detail = api.client.get("/v1/nodes?detail=true").get_data(as_text=True)
    assert "hunter2" not in detail
    assert api.client.delete("/v1/nodes/node-1").status_code == 204
    assert api.client.get("/v1/nodes/node-1").status_code == 404
    assert api.client.get("/v1/nodes").json["nodes"] == []


def test_passwords_inside_urls_are_masked(api):
    resp = new_node(api, name="url-creds", driver_info={
        "redfish_address": "https://admin:Url-Pa55@bmc.example.com/redfish/v1",
        "redfish_username": "admin",
        "console": ["ipmi://root:C0nsole@10.0.0.9:623"],
        "plain": "https://bmc.example.com/redfish/v1"})
    for path in (resp.headers["Location"], "/v1/nodes?detail=true"):
        text = api.client.get(path).get_data(as_text=True)
        assert "Url-Pa55" not in text and "C0nsole" not in text
    info = api.client.get(resp.headers["Location"]).json["driver_info"]
    assert info["redfish_address"] == "https://admin:******@bmc.example.com/redfish/v1"
    assert info["console"] == ["ipmi://root:******@10.0.0.9:623"]
    assert info["plain"] == "https://bmc.example.com/redfish/v1"
    assert info["redfish_username"] == "admin"


def test_create_validation_and_conflicts(api):
    bad = api.client.post("/v1/nodes", json={"name": 5, "driver_info": [], "colour": "x"})
    assert bad.status_code == 400
    problems = " ".join(fault(bad)["problems"])
    assert "driver" in problems and "name" in problems and "colour" in problems
    assert "driver_info" in problems
    uuid_name = api.client.post("/v1/nodes", json={"driver": "ipmi",
                                                   "name": str(uuid.uuid4())})
    assert uuid_name.status_code == 400
    new_node(api, name="twin")
    assert api.client.post("/v1/nodes", json={"driver": "ipmi",
                                              "name": "twin"}).status_code == 409
    assert len(api.client.get("/v1/nodes").json["nodes"]) == 1


def test_list_filters(api):
    engine = api.context.engine
    add_node(engine, state="manageable", name="m1")
    add_node(engine, state="enroll", name="d1", auto_discovered=True)
    add_node(engine, state="manageable", name="d2", auto_discovered=True)

    def names(query=""):
        resp = api.client.get(f"/v1/nodes{query}")
        assert resp.status_code == 200, resp.json
        return sorted(n["name"] for n in resp.json["nodes"])

    assert names() == ["d1", "d2", "m1"]
    assert names("?provision_state=manageable") == ["d2", "m1"]
    assert names("?auto_discovered=true") == ["d1", "d2"]
    assert names("?auto_discovered=false") == ["m1"]
    assert names("?auto_discovered=true&provision_state=enroll") == ["d1"]
    assert api.client.get("/v1/nodes?auto_discovered=perhaps").status_code == 400


def test_provision_states(api):
    node = new_node(api, name="cycle").json
    path = "/v1/nodes/cycle/states/provision"
    early = api.client.put(path, json={"target": "inspect"})
    assert early.status_code == 400 and '"enroll"' in error_message(early)
    managed = api.client.put(path, json={"target": "manage"})
    assert managed.status_code == 202 and managed.json["provision_state"] == "manageable"
    started = api.client.put(path, json={"target": "inspect"})
    assert started.status_code == 202 and started.json["provision_state"] == "inspect wait"
    refused = api.client.delete(f"/v1/nodes/{node['uuid']}")
    assert refused.status_code == 409
    aborted = api.client.put(path, json={"target": "abort"})
    assert aborted.json["provision_state"] == "inspect failed"
    assert "aborted" in aborted.json["last_error"]
    assert api.client.put(path, json={"target": "abort"}).status_code == 400
    assert api.client.put(path, json={"target": "manage"}).json["provision_state"] == \
        "manageable"
    assert api.client.put(path, json={"target": "deploy"}).status_code == 501  # Ironic's, unserved
    assert api.client.put(path, json={"target": "frobnicate"}).status_code == 400
    assert api.client.put(path, json=["inspect"]).status_code == 400
    assert api.client.put("/v1/nodes/ghost/states/provision",
                          json={"target": "inspect"}).status_code == 404


def test_locked_node_is_not_deleted(api):
    node = add_node(api.context.engine, state="manageable", reservation="conductor-1")
    resp = api.client.delete(f"/v1/nodes/{node['uuid']}")
    assert resp.status_code == 409
    assert api.client.get(f"/v1/nodes/{node['uuid']}").status_code == 200


def test_inventory(api):
    node = add_node(api.context.engine, state="manageable", name="inv")
    assert api.client.get("/v1/nodes/inv/inventory").status_code == 404
    with api.context.engine.begin() as conn:
        conn.execute(sa.insert(NodeInventory).values(
            node_id=node["id"], inventory_data={"cpu": {"count": 2}},
            plugin_data={"root_disk": {"name": "/dev/sda"}}))
    resp = api.client.get("/v1/nodes/inv/inventory")
    assert resp.status_code == 200
    assert resp.json == {"inventory": {"cpu": {"count": 2}},
                         "plugin_data": {"root_disk": {"name": "/dev/sda"}}}
    assert api.client.delete("/v1/nodes/inv").status_code == 204
    assert api.client.get("/v1/nodes/inv/inventory").status_code == 404


def test_ports(api):
    a = new_node(api, name="a").json
    new_node(api, name="b")
    resp = api.client.post("/v1/ports", json={"node_uuid": "a", "address": "52-54-00-AA-BB-01"})
    assert resp.status_code == 201, resp.json
    port = resp.json
    assert port["address"] == "52:54:00:aa:bb:01" and port["node_uuid"] == a["uuid"]
    assert api.client.get(resp.headers["Location"]).json["address"] == "52:54:00:aa:bb:01"
    api.client.post("/v1/ports", json={"node_uuid": "b", "address": "52:54:00:aa:bb:02",
                                       "pxe_enabled": False})
    dup = api.client.post("/v1/ports", json={"node_uuid": "b", "address": "52:54:00:aa:bb:01"})
    assert dup.status_code == 409
    bad = api.client.post("/v1/ports", json={"node_uuid": "b", "address": "../etc/passwd"})
    assert bad.status_code == 400 and "address" in error_message(bad)
    assert api.client.post("/v1/ports", json={"node_uuid": "zz",
                                              "address": "52:54:00:aa:bb:03"}).status_code == 400
    all_ports = api.client.get("/v1/ports").json["ports"]
    assert sorted(p["address"] for p in all_ports) == ["52:54:00:aa:bb:01", "52:54:00:aa:bb:02"]
    of_b = api.client.get("/v1/ports?node=b").json["ports"]
    assert [(p["address"], p["pxe_enabled"]) for p in of_b] == [("52:54:00:aa:bb:02", False)]
    assert api.client.delete(f"/v1/ports/{port['uuid']}").status_code == 204
    assert api.client.get("/v1/ports?node=a").json["ports"] == []
    assert api.client.delete(f"/v1/ports/{port['uuid']}").status_code == 404
    # deleting a node deletes its ports
    assert api.client.delete("/v1/nodes/b").status_code == 204
    assert api.client.get("/v1/ports").json["ports"] == []


def test_deleting_a_node_discards_its_accepted_callbacks(api):
    engine = api.context.engine
    node = add_node(engine, state="manageable")
    heartbeat.beat(engine, "worker-z")
    # Accepted data a live worker holds, waiting for the node: written claimed at once, or
    # the API's own processing threads could take it first.
    with engine.begin() as conn:
        conn.execute(sa.insert(InspectionCallback).values(
            node_uuid=node["uuid"], data={"inventory": {}}, created_at=utcnow(), attempts=1,
            owner="worker-z", claim="t", data_size=17))
    assert api.client.delete(f"/v1/nodes/{node['uuid']}").status_code == 204
    assert callbacks.count(engine) == 0
