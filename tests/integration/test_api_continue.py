"""POST /v1/continue_inspection with the real InspectionService, processing in-process."""

import json

import pytest

from inspection.db import migration
from pxe_filter.common.database import create_engine
from tests.integration.api_helpers import Api, api_conf, error_message
from tests.integration.node_factory import add_node
from tests.integration.pipeline_support import body, macs_of

GENERIC_404 = "The requested node could not be found"


def make_api(tmp_path, db_url, **groups):
    return Api(api_conf(tmp_path, db_url, **groups))


@pytest.fixture
def api(tmp_path, db_url):
    api = make_api(tmp_path, db_url)
    yield api
    api.close()


def test_known_node_is_processed(api):
    data = body("bios-vm-x86_64")
    node = add_node(api.context.engine, state="inspect wait", macs=macs_of(data)[:1],
                    inspect_interface="agent")
    resp = api.unversioned.post("/v1/continue_inspection", json=data)
    assert resp.status_code == 202, resp.json
    assert resp.json == {"uuid": node["uuid"]}
    api.wait_processed()
    shown = api.client.get(f"/v1/nodes/{node['uuid']}").json
    assert shown["provision_state"] == "manageable", shown["last_error"]
    stored = api.client.get(f"/v1/nodes/{node['uuid']}/inventory").json
    assert stored["inventory"]["interfaces"] == data["inventory"]["interfaces"]


def test_node_uuid_parameter(api):
    data = body("bios-vm-x86_64")
    node = add_node(api.context.engine, state="inspect wait", inspect_interface="agent")
    resp = api.client.post(f"/v1/continue_inspection?node_uuid={node['uuid']}", json=data)
    assert resp.status_code == 202 and resp.json["uuid"] == node["uuid"]
    api.wait_processed()
    assert api.client.get(f"/v1/nodes/{node['uuid']}").json["provision_state"] == "manageable"
    bad = api.client.post("/v1/continue_inspection?node_uuid=../x", json=data)
    assert bad.status_code == 400


def test_one_generic_404(api):
    data = body("bios-vm-x86_64")
    macs = macs_of(data)
    unknown = api.unversioned.post("/v1/continue_inspection", json=data)
    # a node in the wrong state
    add_node(api.context.engine, state="active", macs=macs[:1])
    wrong_state = api.unversioned.post("/v1/continue_inspection", json=data)
    answers = {(r.status_code, r.get_data(as_text=True)) for r in (unknown, wrong_state)}
    generic = {"faultstring": GENERIC_404, "faultcode": "Client", "debuginfo": None}
    assert answers == {(404, json.dumps({"error_message": json.dumps(generic)}))}
    assert api.client.get("/v1/nodes").json["nodes"][0]["provision_state"] == "active"


def test_several_matches_give_the_same_404(api):
    data = body("dell_r640")
    macs = macs_of(data)
    assert len(macs) >= 2
    add_node(api.context.engine, state="inspect wait", macs=macs[:1])
    add_node(api.context.engine, state="inspect wait", macs=macs[1:2])
    resp = api.unversioned.post("/v1/continue_inspection", json=data)
    assert resp.status_code == 404 and error_message(resp) == GENERIC_404


def test_discovery(tmp_path, db_url):
    api = make_api(tmp_path, db_url, auto_discovery={"enabled": "true"})
    try:
        data = body("bios-vm-x86_64")
        resp = api.unversioned.post("/v1/continue_inspection", json=data)
        assert resp.status_code == 202, resp.json
        api.wait_processed()
        nodes = api.client.get("/v1/nodes?auto_discovered=true&detail=true").json["nodes"]
        assert [n["uuid"] for n in nodes] == [resp.json["uuid"]]
        ports = api.client.get(f"/v1/ports?node={resp.json['uuid']}").json["ports"]
        assert {p["address"] for p in ports} <= set(macs_of(data))
        again = api.unversioned.post("/v1/continue_inspection", json=data)
        assert again.status_code == 404
        assert len(api.client.get("/v1/nodes").json["nodes"]) == 1
    finally:
        api.close()


@pytest.mark.parametrize("payload, words", [
    (b"{not json", "not valid JSON"),
    (b"", "must be a JSON document"),
    (b'{"a": "\xff"}', "UTF-8"),
    (b"[1, 2]", "JSON object"),
    (b'{"no_inventory": 1}', "inventory"),
    (b'{"inventory": {"interfaces": []}}', "MAC"),
    (b'{"inventory": {"interfaces": [{"name": "eth0", "mac_address": "zz"}]}}', "MAC"),
    (b'{"inventory": {}}', "interfaces"),
])
def test_bad_bodies(api, payload, words):
    resp = api.unversioned.post("/v1/continue_inspection", data=payload,
                           content_type="application/json")
    assert resp.status_code == 400
    assert resp.is_json and words in error_message(resp)
    assert api.client.get("/v1/nodes").json["nodes"] == []


def test_size_limit(tmp_path, sqlite_url):
    migration.upgrade(create_engine(sqlite_url))
    api = make_api(tmp_path, sqlite_url, api={"max_request_body_size": 4096},
                   auto_discovery={"enabled": "true"})
    try:
        data = body("bios-vm-x86_64")
        data["padding"] = "x" * 5000
        resp = api.unversioned.post("/v1/continue_inspection", json=data)
        assert resp.status_code == 413 and resp.is_json
        assert "too large" in error_message(resp)
        assert api.client.get("/v1/nodes").json["nodes"] == []
        big_rule = {"actions": [{"op": "log", "args": {"msg": "y" * 5000}}]}
        assert api.client.post("/v1/inspection_rules", json=big_rule).status_code == 413
    finally:
        api.close()
