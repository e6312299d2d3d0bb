"""What Ironic 39 answers, answered alike: chassis, the bodies it accepts, microversion
gating, 400 for malformed identifiers, its node fields and links, unversioned paths. Each
case was checked against Ironic 39 at the same microversion; tempest (tests/clients) judges
the whole API."""

import uuid

import pytest

from tests.integration.api_helpers import api_on_new_database, error_message


def v(minor: int) -> dict:
    """The version header of 1.<minor>."""
    return {"X-OpenStack-Ironic-API-Version": f"1.{minor}"}


V = v(96)


@pytest.fixture(scope="module")
def api(tmp_path_factory):
    with api_on_new_database(tmp_path_factory.mktemp("api")) as api:
        yield api


def _node(api, headers=V, **fields):
    resp = api.client.post("/v1/nodes", json={"driver": "fake-hardware", **fields},
                           headers=headers)
    assert resp.status_code == 201, resp.json
    return resp.json


def _chassis(api, **fields):
    resp = api.client.post("/v1/chassis", json=fields, headers=V)
    assert resp.status_code == 201, resp.json
    return resp.json


# --- chassis ---

def test_chassis_crud_and_its_nodes(api):
    chassis = _chassis(api, description="rack 1", extra={"row": "a"})
    assert chassis["links"][0]["href"].endswith(f"/v1/chassis/{chassis['uuid']}")
    assert chassis["nodes"][1] == {"rel": "bookmark",
                                   "href": f"http://localhost/chassis/{chassis['uuid']}/nodes"}
    listed = api.client.get("/v1/chassis", headers=V).json["chassis"]
    assert {"uuid": chassis["uuid"], "description": "rack 1",
            "links": chassis["links"]} in listed
    node = _node(api, chassis_uuid=chassis["uuid"])
    assert node["chassis_uuid"] == chassis["uuid"]
    _node(api, chassis_uuid=None)
    members = api.client.get(f"/v1/chassis/{chassis['uuid']}/nodes", headers=V).json["nodes"]
    assert [n["uuid"] for n in members] == [node["uuid"]]
    by_filter = api.client.get(f"/v1/nodes?chassis_uuid={chassis['uuid']}", headers=V)
    assert [n["uuid"] for n in by_filter.json["nodes"]] == [node["uuid"]]
    not_empty = api.client.delete(f"/v1/chassis/{chassis['uuid']}", headers=V)
    assert not_empty.status_code == 400 and "contains nodes" in error_message(not_empty)
    patched = api.client.patch(f"/v1/chassis/{chassis['uuid']}", headers=V, json=[
        {"op": "replace", "path": "/description", "value": "rack 2"},
        {"op": "remove", "path": "/extra/row"}])
    assert (patched.json["description"], patched.json["extra"]) == ("rack 2", {})
    old = api.client.patch(f"/v1/nodes/{node['uuid']}", headers=v(24),
                           json=[{"op": "remove", "path": "/chassis_uuid"}])
    assert old.status_code == 406  # Ironic lets a node leave its chassis from 1.25
    left = api.client.patch(f"/v1/nodes/{node['uuid']}", headers=V,
                            json=[{"op": "remove", "path": "/chassis_uuid"}])
    assert left.json["chassis_uuid"] is None
    assert api.client.delete(f"/v1/chassis/{chassis['uuid']}", headers=V).status_code == 204
    assert api.client.get(f"/v1/chassis/{chassis['uuid']}", headers=V).status_code == 404


def test_chassis_identifiers_and_duplicates(api):
    chassis_uuid = str(uuid.uuid4())
    _chassis(api, uuid=chassis_uuid)
    again = api.client.post("/v1/chassis", json={"uuid": chassis_uuid}, headers=V)
    assert again.status_code == 409
    assert api.client.get("/v1/chassis/not-a-uuid", headers=V).status_code == 400
    unknown = api.client.post("/v1/nodes", headers=V, json={
        "driver": "fake-hardware", "chassis_uuid": str(uuid.uuid4())})
    assert unknown.status_code == 400 and "Chassis" in error_message(unknown)


# --- bodies Ironic accepts, and identifiers it refuses with 400 ---

def test_ports_take_a_uuid_and_refuse_bad_identifiers_with_400(api):
    node = _node(api)
    port_uuid = str(uuid.uuid4())
    body = {"address": "52:54:00:39:00:01", "node_uuid": node["uuid"], "uuid": port_uuid}
    created = api.client.post("/v1/ports", json=body, headers=V)
    assert created.status_code == 201 and created.json["uuid"] == port_uuid
    duplicate = api.client.post("/v1/ports", headers=V,
                                json={**body, "address": "52:54:00:39:00:02"})
    assert duplicate.status_code == 409
    for path in ("/v1/ports/malformed:uuid", "/v1/ports/52:54:00:39:00:01"):
        assert api.client.get(path, headers=V).status_code == 400, path
    for node_uuid in ("malformed:nodeid", str(uuid.uuid4())):
        resp = api.client.post("/v1/ports", headers=V, json={
            "address": "52:54:00:39:00:03", "node_uuid": node_uuid})
        assert resp.status_code == 400, node_uuid
    moved = api.client.patch(f"/v1/ports/{port_uuid}", headers=V, json=[
        {"op": "replace", "path": "/node_uuid", "value": str(uuid.uuid4())}])
    assert moved.status_code == 400


def test_rule_paths_without_slash_or_as_references(api):
    for path in ("properties/cpu_model", "{{ /properties/cpu_model }}"):
        resp = api.client.post("/v1/inspection_rules", headers=V, json={
            "actions": [{"op": "set-attribute", "args": [path, "x"]}]})
        assert resp.status_code == 201, (path, resp.json)


# --- microversions ---

def test_fields_and_filters_newer_than_the_request_are_refused_or_hidden(api):
    node = _node(api)
    assert api.client.get("/v1/nodes?resource_class=x", headers=v(20)).status_code == 406
    assert api.client.get("/v1/nodes?fault=somefake", headers=V).status_code == 400
    port = api.client.post("/v1/ports", headers=v(33), json={
        "address": "52:54:00:39:00:10", "node_uuid": node["uuid"], "physical_network": "p"})
    assert port.status_code == 406
    port = api.client.post("/v1/ports", headers=v(1), json={
        "address": "52:54:00:39:00:10", "node_uuid": node["uuid"]}).json
    assert not {"pxe_enabled", "local_link_connection", "physical_network",
                "internal_info"} & set(port)
    path = f"/v1/nodes/{node['uuid']}/traits"
    assert api.client.get(path, headers=v(36)).status_code == 406
    assert api.client.put(path, json={"traits": []}, headers=v(36)).status_code == 405
    assert api.client.delete(path, headers=v(36)).status_code == 404


def test_old_versions_see_old_states_and_fields(api):
    assert _node(api, headers=v(1))["provision_state"] is None
    node = _node(api, headers=v(10))
    assert node["provision_state"] == "available"
    assert _node(api, headers=v(11))["provision_state"] == "enroll"
    states = api.client.get(f"/v1/nodes/{node['uuid']}/states", headers=v(1)).json
    assert not {"raid_config", "target_raid_config", "boot_mode", "secure_boot"} & set(states)
    assert states["console_enabled"] is False
    shown = api.client.get(f"/v1/nodes/{node['uuid']}.json", headers=v(90))
    assert shown.status_code == 200 and shown.json["uuid"] == node["uuid"]
    assert api.client.get(f"/v1/nodes/{node['uuid']}.json", headers=v(91)).status_code == 404


# --- representation and routing ---

def test_nodes_show_ironics_fields_defaults_and_links(api):
    node = _node(api)
    for name, value in {"console_enabled": False, "chassis_uuid": None,
                        "conductor": "api-test", "allocation_uuid": None, "raid_config": {},
                        "disable_power_off": False, "power_interface": "fake",
                        "network_interface": "noop", "inspect_interface": "agent"}.items():
        assert node[name] == value, name
    assert [link["rel"] for link in node["links"]] == ["self", "bookmark"]
    assert {"ports", "states", "portgroups", "volume"} <= set(node)
    ipmi = _node(api, driver="ipmi")
    assert (ipmi["power_interface"], ipmi["boot_interface"]) == ("ipmitool", "ipxe")
    change = api.client.patch(f"/v1/nodes/{node['uuid']}", headers=V,
                              json=[{"op": "replace", "path": "/driver", "value": "ipmi"}])
    assert change.status_code == 400 and "reset_interfaces" in error_message(change)


def test_unversioned_paths_are_served_as_v1(api):
    node = _node(api)
    assert api.client.get(f"/nodes/{node['uuid']}", headers=V).json["uuid"] == node["uuid"]
    assert api.client.get("/ports/detail", headers=V).status_code == 200
    assert "chassis" in api.client.get("/v1").json


def test_instance_uuid_is_recorded_and_filtered(api):
    node = _node(api)
    instance = str(uuid.uuid4())
    patched = api.client.patch(f"/v1/nodes/{node['uuid']}", headers=V, json=[
        {"op": "add", "path": "/instance_uuid", "value": instance}])
    assert patched.json["instance_uuid"] == instance
    found = api.client.get(f"/v1/nodes/detail?instance_uuid={instance}", headers=V).json
    assert [n["uuid"] for n in found["nodes"]] == [node["uuid"]]
    associated = api.client.get("/v1/nodes?associated=true", headers=V).json["nodes"]
    assert node["uuid"] in [n["uuid"] for n in associated]
    api.client.patch(f"/v1/nodes/{node['uuid']}", headers=V,
                     json=[{"op": "remove", "path": "/instance_uuid"}])
    free = api.client.get("/v1/nodes?associated=false", headers=V).json["nodes"]
    assert node["uuid"] in [n["uuid"] for n in free]
