"""A request naming no API version is served as Ironic 39 serves it: at 1.1, its minimum.

Every expected answer below is what Ironic 39 answered to the same request without a version
header (tests/ironic/test_unversioned_as_ironic.py asks a real Ironic 39 the same questions).
"""

import pytest

from tests.integration.api_helpers import api_on_new_database, error_message
from tests.integration.node_factory import add_node
from tests.integration.pipeline_support import body, macs_of

V = "X-OpenStack-Ironic-API-Version"
#: A node's fields at 1.1 in Ironic 39, and ``auto_discovered`` (this service's own).
NODE_FIELDS_1_1 = {"uuid", "chassis_uuid", "console_enabled", "created_at", "driver",
                   "driver_info", "extra", "instance_info", "instance_uuid", "last_error",
                   "links", "maintenance", "maintenance_reason", "ports", "power_state",
                   "properties", "provision_state", "provision_updated_at", "reservation",
                   "target_power_state", "target_provision_state", "updated_at",
                   "auto_discovered"}
#: A port's fields at 1.1 in Ironic 39.
PORT_FIELDS_1_1 = {"uuid", "address", "node_uuid", "extra", "created_at", "updated_at",
                   "links"}


@pytest.fixture(scope="module")
def api(tmp_path_factory):
    with api_on_new_database(tmp_path_factory.mktemp("api")) as api:
        yield api


@pytest.fixture(scope="module")
def node(api):
    """A node made at 1.96 (with a name and newer fields), with a port."""
    resp = api.client.post("/v1/nodes", json={"driver": "fake-hardware", "name": "unnamed-1",
                                              "inspect_interface": "agent"})
    assert resp.status_code == 201, resp.json
    port = api.client.post("/v1/ports", json={"address": "52:54:00:11:00:01",
                                              "node_uuid": resp.json["uuid"],
                                              "pxe_enabled": True})
    assert port.status_code == 201, port.json
    return {**resp.json, "port": port.json["uuid"]}


def test_the_version_used_is_1_1_and_v1_links_what_1_1_has(api):
    for path in ("/", "/v1", "/v1/nodes"):
        assert api.unversioned.get(path).headers[V] == "1.1", path
    linked = set(api.unversioned.get("/v1").json)
    assert {"chassis", "nodes", "ports"} <= linked
    assert not linked & {"inspection_rules", "continue_inspection"}
    assert {"inspection_rules", "continue_inspection"} <= set(api.client.get("/v1").json)


def test_nodes_show_only_the_fields_of_1_1(api, node):
    shown = api.unversioned.get(f"/v1/nodes/{node['uuid']}").json
    assert set(shown) == NODE_FIELDS_1_1
    assert "name" in api.client.get(f"/v1/nodes/{node['uuid']}").json
    (listed,) = [n for n in api.unversioned.get("/v1/nodes").json["nodes"]
                 if n["uuid"] == node["uuid"]]
    assert "name" not in listed
    (detailed,) = [n for n in api.unversioned.get("/v1/nodes/detail").json["nodes"]
                   if n["uuid"] == node["uuid"]]
    assert set(detailed) == NODE_FIELDS_1_1


@pytest.mark.parametrize(("state", "shown"), [
    ("available", None), ("inspect wait", "inspecting"), ("manageable", "manageable")])
def test_states_newer_than_1_1_show_as_ironic_shows_them(api, state, shown):
    made = add_node(api.context.engine, state=state)
    assert api.unversioned.get(f"/v1/nodes/{made['uuid']}").json["provision_state"] == shown


def test_a_new_node_starts_available(api):
    made = api.unversioned.post("/v1/nodes", json={"driver": "fake-hardware"})
    assert made.status_code == 201 and made.json["provision_state"] is None
    again = api.client.get(f"/v1/nodes/{made.json['uuid']}").json
    assert again["provision_state"] == "available"


def test_nodes_are_found_by_uuid_only(api, node):
    by_name = api.unversioned.get("/v1/nodes/unnamed-1")
    assert by_name.status_code == 404
    assert error_message(by_name) == "Node unnamed-1 could not be found"
    assert api.unversioned.get(f"/v1/nodes/{node['uuid']}").status_code == 200
    for path in ("/v1/nodes/unnamed-1/ports", "/v1/nodes/unnamed-1/states",
                 "/v1/nodes/unnamed-1/maintenance"):
        method = api.unversioned.put if path.endswith("maintenance") else api.unversioned.get
        assert method(path).status_code == 404, path
    assert api.client.get("/v1/nodes/unnamed-1").status_code == 200
    # Ironic strips .json only for a version named in X-OpenStack-Ironic-API-Version.
    assert api.unversioned.get(f"/v1/nodes/{node['uuid']}.json").status_code == 404
    assert api.client.get(f"/v1/nodes/{node['uuid']}.json",
                          headers={V: "1.1"}).status_code == 200


# (method, path, body, status): Ironic 39's answers without a version header; {node} is
# the node's UUID.
REFUSED = [
    ("POST", "/v1/nodes", {"driver": "fake-hardware", "name": "n2"}, 406),
    ("POST", "/v1/nodes", {"driver": "fake-hardware", "resource_class": "x"}, 406),
    ("PATCH", "/v1/nodes/{node}", [{"op": "add", "path": "/name", "value": "n3"}], 406),
    ("PATCH", "/v1/nodes/{node}?reset_interfaces=true",
     [{"op": "replace", "path": "/driver", "value": "fake-hardware"}], 406),
    ("PUT", "/v1/nodes/{node}/states/provision", {"target": "manage"}, 406),
    ("PUT", "/v1/nodes/{node}/states/provision", {"target": "inspect"}, 406),
    ("PUT", "/v1/nodes/{node}/states/provision", {"target": "abort"}, 406),
    ("PUT", "/v1/nodes/{node}/states/provision", {"target": "provide"}, 406),
    ("PUT", "/v1/nodes/{node}/states/power", {"target": "soft power off"}, 406),
    ("GET", "/v1/nodes/{node}/inventory", None, 404),
    ("POST", "/v1/nodes/{node}/inventory/reprocess", None, 404),
    ("GET", "/v1/nodes/{node}/traits", None, 406),
    ("PUT", "/v1/nodes/{node}/traits", {"traits": ["CUSTOM_A"]}, 405),
    ("DELETE", "/v1/nodes/{node}/traits", None, 404),
    ("GET", "/v1/shards", None, 404),
    ("GET", "/v1/inspection_rules", None, 404),
    ("POST", "/v1/inspection_rules", {"actions": []}, 405),
    ("DELETE", "/v1/inspection_rules", None, 405),
    ("POST", "/v1/inspection_rules/test", {"rules": []}, 405),
    ("GET", "/v1/nodes?fields=uuid", None, 406),
    ("GET", "/v1/nodes/{node}?fields=uuid", None, 406),
    ("GET", "/v1/nodes?detail=true", None, 400),
    ("GET", "/v1/nodes?sort_key=name", None, 406),
    ("GET", "/v1/nodes?sort_key=driver_internal_info", None, 406),
    ("GET", "/v1/nodes?provision_state=enroll", None, 406),
    ("GET", "/v1/nodes?driver=fake-hardware", None, 406),
    ("GET", "/v1/nodes?owner=p1", None, 406),
    ("GET", "/v1/nodes/detail?fields=uuid", None, 400),
    ("GET", "/v1/chassis?fields=uuid", None, 406),
    ("GET", "/v1/chassis?detail=false", None, 400),
]
#: What Ironic 39 takes at 1.1 all the same.
SERVED = [
    ("GET", "/v1/nodes?retired=false", None, 200),
    ("GET", "/v1/nodes?description_contains=x", None, 200),
    ("GET", "/v1/nodes?maintenance=false&associated=false", None, 200),
    ("GET", "/v1/nodes/detail?parent_node=x", None, 200),
    ("GET", "/v1/nodes?sort_key=provision_state", None, 200),
    ("GET", "/v1/nodes/{node}/states", None, 200),
    ("GET", "/v1/nodes/{node}/validate", None, 200),
    ("PUT", "/v1/nodes/{node}/states/power", {"target": "power off"}, 202),
]


def case_id(case: tuple) -> str:
    """``METHOD path body`` of a REFUSED or SERVED case, for test ids."""
    method, path, data, _ = case
    return f"{method} {path.split('/v1/')[1]} {data or ''}"[:70]


@pytest.mark.parametrize("case", REFUSED + SERVED, ids=case_id)
def test_what_came_after_1_1_is_refused_as_ironic_refuses_it(api, node, case):
    method, path, data, status = case
    resp = api.unversioned.open(path.format(node=node["uuid"]), method=method, json=data)
    assert resp.status_code == status, resp.json


def test_ports_at_1_1(api, node):
    shown = api.unversioned.get(f"/v1/ports/{node['port']}")
    assert set(shown.json) == PORT_FIELDS_1_1
    assert api.client.get(f"/v1/ports/{node['port']}").json["pxe_enabled"] is True
    listed = api.unversioned.get(f"/v1/ports?node_uuid={node['uuid']}").json["ports"]
    assert [set(p) for p in listed] == [PORT_FIELDS_1_1]
    plain = api.unversioned.post("/v1/ports", json={"address": "52:54:00:11:00:02",
                                                   "node_uuid": node["uuid"]})
    assert plain.status_code == 201 and set(plain.json) == PORT_FIELDS_1_1
    refused = [
        api.unversioned.post("/v1/ports", json={"address": "52:54:00:11:00:03",
                                                "node_uuid": node["uuid"],
                                                "pxe_enabled": False}),
        api.unversioned.patch(f"/v1/ports/{node['port']}", json=[
            {"op": "replace", "path": "/pxe_enabled", "value": False}]),
        api.unversioned.get("/v1/ports?node=unnamed-1"),
        api.unversioned.get("/v1/ports?fields=uuid"),
        api.unversioned.get("/v1/ports?sort_key=pxe_enabled"),
        api.unversioned.get("/v1/ports?portgroup=x"),
    ]
    assert [r.status_code for r in refused] == [406] * len(refused)
    assert api.unversioned.get("/v1/ports?detail=true").status_code == 400
    assert api.unversioned.get(f"/v1/ports?node={node['uuid']}").status_code == 200


def test_children_are_not_found_below_1_83(api, node):
    # Ironic 39 answers this one with a 500 (its controller fails on the version check).
    assert api.unversioned.get(f"/v1/nodes/{node['uuid']}/children").status_code == 404


def test_the_ramdisk_callback_is_taken_as_ironic_takes_it_from_ipa(api):
    data = body("bios-vm-x86_64")
    made = add_node(api.context.engine, state="inspect wait", macs=macs_of(data)[:1],
                    inspect_interface="agent")
    by_uuid = f"/v1/continue_inspection?node_uuid={made['uuid']}"
    # node_uuid from 1.84 only; 1.2 to 1.83 have no callback at all; 1.1 is IPA's (no header)
    for resp in (api.unversioned.post(by_uuid, json=data),
                 api.client.post("/v1/continue_inspection", json=data, headers={V: "1.83"})):
        assert resp.status_code == 404
        assert error_message(resp) == "API version 1.84 or newer is required"
    resp = api.unversioned.post("/v1/continue_inspection", json=data)
    assert resp.status_code == 202 and resp.json == {"uuid": made["uuid"]}
    api.wait_processed()
