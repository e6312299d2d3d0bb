"""Ironic's node fields (interfaces, owner, lessee, description, protection, retirement, shard,
parent node, network data) through the API: stored, shown, validated and gated by version as
Ironic 39 does. The real ``baremetal`` CLI round trip is in tests/clients."""

import pytest
import sqlalchemy as sa

from inspection.db import migration
from inspection.db.models import Node
from pxe_filter.common.database import create_engine
from tests.integration.api_helpers import Api, api_conf, error_message

NETWORK_DATA = {
    "links": [{"id": "port-1", "type": "phy", "ethernet_mac_address": "52:54:00:12:34:56"}],
    "networks": [{"id": "net-1", "link": "port-1", "network_id": "n1", "type": "ipv4_dhcp"}],
    "services": [{"type": "dns", "address": "192.0.2.53"}],
}
V = {"X-OpenStack-Ironic-API-Version": "1.96"}


@pytest.fixture
def api(tmp_path, sqlite_url):
    engine = create_engine(sqlite_url)
    migration.upgrade(engine)
    api = Api(api_conf(tmp_path, sqlite_url))
    api.engine = engine
    yield api
    api.close()
    engine.dispose()


@pytest.fixture
def api_on_each_db(tmp_path, db_url):
    """The API on SQLite, PostgreSQL and MariaDB in turn (text matching differs)."""
    api = Api(api_conf(tmp_path, db_url))
    yield api
    api.close()


def _create(api, **fields):
    return api.client.post("/v1/nodes", json={"driver": "ipmi", **fields}, headers=V)


def _patch(api, node, *ops, headers=V):
    return api.client.patch(f"/v1/nodes/{node}", json=list(ops), headers=headers)


def _set_state(api, name, state):
    with api.engine.begin() as conn:
        conn.execute(sa.update(Node).where(Node.name == name).values(provision_state=state))


def test_every_field_is_stored_and_shown(api):
    fields = {"boot_interface": "pxe", "deploy_interface": "direct", "bios_interface": "no-bios",
              "console_interface": "no-console", "firmware_interface": "no-firmware",
              "management_interface": "ipmitool", "network_interface": "noop",
              "power_interface": "ipmitool", "raid_interface": "no-raid",
              "rescue_interface": "no-rescue", "storage_interface": "noop",
              "vendor_interface": "no-vendor", "owner": "p-owner", "lessee": "p-lessee",
              "description": "rack 4, slot 2", "shard": "s1", "retired": True,
              "retired_reason": "old", "network_data": NETWORK_DATA}
    created = _create(api, name="n1", **fields)
    assert created.status_code == 201, created.json
    shown = api.client.get("/v1/nodes/n1", headers=V).json
    assert {k: shown[k] for k in fields} == fields
    assert shown["protected"] is False and shown["protected_reason"] is None
    assert shown["maintenance_reason"] is None and shown["parent_node"] is None


def test_patch_sets_and_removes_fields(api):
    _create(api, name="n1")
    resp = _patch(api, "n1", {"op": "add", "path": "/owner", "value": "p1"},
                  {"op": "add", "path": "/description", "value": "d"},
                  {"op": "add", "path": "/power_interface", "value": "redfish"},
                  {"op": "add", "path": "/network_data", "value": NETWORK_DATA})
    assert resp.status_code == 200, resp.json
    assert (resp.json["owner"], resp.json["power_interface"]) == ("p1", "redfish")
    resp = _patch(api, "n1", {"op": "remove", "path": "/owner"},
                  {"op": "remove", "path": "/power_interface"},
                  {"op": "remove", "path": "/network_data"})
    # a removed interface is the hardware type's default again, as in Ironic
    assert (resp.json["owner"], resp.json["power_interface"]) == (None, "ipmitool")
    assert resp.json["network_data"] == {}


@pytest.mark.parametrize(("fields", "words"), [
    ({"description": "x" * 4097}, "description: must be a string of at most 4096"),
    ({"owner": 5}, "owner: must be a string"),
    ({"boot_interface": ""}, "boot_interface: must name an interface"),
    ({"network_data": {"links": []}}, "network_data: 'networks' is a required property"),
    ({"network_data": {**NETWORK_DATA, "links": [{"id": "p", "type": "phy"}]}},
     "network_data/links/0: 'ethernet_mac_address' is a required property"),
    ({"retired_reason": "why"}, "retired_reason: can only be set when retired is True"),
    ({"protected": True}, "protected: unknown field"),
    ({"maintenance_reason": "x"}, "maintenance_reason: unknown field"),
    ({"retired": "maybe"}, "Invalid retired"),
    ({"parent_node": "no-such-node"}, "Unable to apply the requested parent_node"),
])
def test_create_refuses_what_ironic_refuses(api, fields, words):
    resp = _create(api, **fields)
    assert resp.status_code == 400 and words in error_message(resp), resp.json


def test_protection_follows_ironic_state_rules(api):
    _create(api, name="n1")
    refused = _patch(api, "n1", {"op": "add", "path": "/protected", "value": True})
    assert refused.status_code == 409 and "'active' or 'rescue'" in error_message(refused)
    _set_state(api, "n1", "active")
    reason_alone = _patch(api, "n1", {"op": "add", "path": "/protected_reason", "value": "x"})
    assert reason_alone.status_code == 400, reason_alone.json
    resp = _patch(api, "n1", {"op": "add", "path": "/protected", "value": "true"},
                  {"op": "add", "path": "/protected_reason", "value": "tenant"})
    assert (resp.json["protected"], resp.json["protected_reason"]) == (True, "tenant")
    deleted = api.client.delete("/v1/nodes/n1")
    assert deleted.status_code == 403 and "protected" in error_message(deleted)
    resp = _patch(api, "n1", {"op": "replace", "path": "/protected", "value": False})
    assert (resp.json["protected"], resp.json["protected_reason"]) == (False, None)
    # Interfaces change only where Ironic allows it (not on a deployed node).
    refused = _patch(api, "n1", {"op": "add", "path": "/deploy_interface", "value": "ansible"})
    assert refused.status_code == 409 and "deploy_interface" in error_message(refused)


def test_retirement_rules(api):
    _create(api, name="n1")
    resp = _patch(api, "n1", {"op": "add", "path": "/retired", "value": True},
                  {"op": "add", "path": "/retired_reason", "value": "eol"})
    assert (resp.json["retired"], resp.json["retired_reason"]) == (True, "eol")
    resp = _patch(api, "n1", {"op": "replace", "path": "/retired", "value": False})
    assert (resp.json["retired"], resp.json["retired_reason"]) == (False, None)
    _set_state(api, "n1", "available")
    refused = _patch(api, "n1", {"op": "replace", "path": "/retired", "value": True})
    assert refused.status_code == 409 and "available" in error_message(refused)


def test_parent_node_is_stored_as_uuid_and_children_are_listed_on_request(api):
    parent = _create(api, name="parent").json
    child = _create(api, name="child", parent_node="parent").json
    assert child["parent_node"] == parent["uuid"]
    listed = {n["name"] for n in api.client.get("/v1/nodes", headers=V).json["nodes"]}
    assert listed == {"parent"}  # as Ironic: children only when asked for
    every = api.client.get("/v1/nodes?include_children=true", headers=V).json["nodes"]
    assert {n["name"] for n in every} == {"parent", "child"}
    by_parent = api.client.get("/v1/nodes?parent_node=parent", headers=V).json["nodes"]
    assert [n["name"] for n in by_parent] == ["child"]
    itself = _patch(api, "parent", {"op": "add", "path": "/parent_node", "value": "parent"})
    assert itself.status_code == 400


def test_list_filters_filter(api_on_each_db):
    api = api_on_each_db
    _create(api, name="a", owner="p1", lessee="p2", description="Rack 4 100%", shard="s1")
    _create(api, name="b", owner="p2", description="rack 5", shard="s2")
    _create(api, name="c")

    def names(query):
        resp = api.client.get(f"/v1/nodes?{query}", headers=V)
        assert resp.status_code == 200, resp.json
        return sorted(n["name"] for n in resp.json["nodes"])

    assert names("owner=p1") == ["a"]
    assert names("lessee=p2") == ["a"]
    assert names("project=p2") == ["a", "b"]
    assert names("description_contains=rack") == ["a", "b"]  # in any case
    assert names("description_contains=K 5") == ["b"]
    assert names("description_contains=100%25") == ["a"]  # % is no wildcard
    assert names("description_contains=0%25") == ["a"]
    assert names("shard=s1,s2") == ["a", "b"]
    assert names("shard=s2") == ["b"]
    assert names("sharded=false") == ["c"]
    assert names("retired=false") == ["a", "b", "c"]


def test_fields_are_gated_by_api_version_as_in_ironic(api):
    _create(api, name="n1", owner="p1", shard="s1")
    old = {"X-OpenStack-Ironic-API-Version": "1.49"}
    shown = api.client.get("/v1/nodes/n1", headers=old).json
    assert "owner" not in shown and "shard" not in shown and "protected" in shown
    assert api.client.get("/v1/nodes?owner=p1", headers=old).status_code == 406
    assert api.client.get("/v1/nodes/n1?fields=shard", headers=old).status_code == 406
    refused = api.client.post("/v1/nodes", json={"driver": "ipmi", "lessee": "p"},
                              headers={"X-OpenStack-Ironic-API-Version": "1.64"})
    assert refused.status_code == 406 and "lessee" in error_message(refused)
    assert _patch(api, "n1", {"op": "add", "path": "/shard", "value": "x"},
                  headers={"X-OpenStack-Ironic-API-Version": "1.81"}).status_code == 406
    # Our CLI names 1.96 and sees every field; a request naming none is served as 1.1.
    shown = api.client.get("/v1/nodes/n1").json
    assert shown["shard"] == "s1"
    unnamed = api.unversioned.get(f"/v1/nodes/{shown['uuid']}").json
    assert "shard" not in unnamed and "owner" not in unnamed and "protected" not in unnamed


def test_traits_as_ironic_serves_them(api_on_each_db):
    api = api_on_each_db
    _create(api, name="n1")
    path = "/v1/nodes/n1/traits"
    assert api.client.get(path, headers=V).json == {"traits": []}
    added = api.client.put(f"{path}/CUSTOM_GPU", headers=V)
    assert added.status_code == 204 and added.headers["Location"].endswith(f"{path}/CUSTOM_GPU")
    assert api.client.put(f"{path}/HW_CPU_X86_AVX2", headers=V).status_code == 204
    assert api.client.get(path, headers=V).json == {"traits": ["CUSTOM_GPU", "HW_CPU_X86_AVX2"]}
    assert api.client.get("/v1/nodes/n1", headers=V).json["traits"] == [
        "CUSTOM_GPU", "HW_CPU_X86_AVX2"]
    for bad in ("HW_NO_SUCH_TRAIT", "custom_lower", "CUSTOM_"):
        refused = api.client.put(f"{path}/{bad}", headers=V)
        assert refused.status_code == 400 and "Invalid trait" in error_message(refused)
    missing = api.client.delete(f"{path}/CUSTOM_NONE", headers=V)
    assert missing.status_code == 404 and "doesn't have a trait" in error_message(missing)
    assert api.client.put(path, json={"traits": ["CUSTOM_A", "CUSTOM_GPU"]},
                          headers=V).status_code == 204
    assert api.client.get(path, headers=V).json == {"traits": ["CUSTOM_A", "CUSTOM_GPU"]}
    assert api.client.delete(f"{path}/CUSTOM_A", headers=V).status_code == 204
    assert api.client.get(path, headers=V).json == {"traits": ["CUSTOM_GPU"]}
    too_many = api.client.put(path, json={"traits": [f"CUSTOM_{i}" for i in range(51)]},
                              headers=V)
    assert too_many.status_code == 400 and "maximum number of traits" in error_message(too_many)
    assert api.client.put(path, json={"trait": "CUSTOM_A"}, headers=V).status_code == 400
    assert api.client.delete(path, headers=V).status_code == 204
    assert api.client.get(path, headers=V).json == {"traits": []}
    old = {"X-OpenStack-Ironic-API-Version": "1.36"}
    assert api.client.get(path, headers=old).status_code == 406  # as Ironic below 1.37


@pytest.mark.parametrize(("method", "path", "words"), [
    ("get", "/v1/drivers", "Driver listing is not available through this service"),
    ("get", "/v1/conductors/", "Conductor listing is not available"),
    ("get", "/v1/nodes/n1/history", "Node history is not available"),
    ("post", "/v1/nodes/n1/vifs", "VIF attachment is not available"),
    ("get", "/v1/nodes/n1/bios/setting", "BIOS settings management is not available"),
    ("put", "/v1/nodes/n1/states/raid", "RAID configuration is not available"),
    ("post", "/v1/allocations", "Allocation management is not available"),
])
def test_unserved_ironic_endpoints_are_refused_by_name(api, method, path, words):
    resp = getattr(api.client, method)(path, headers=V)
    assert resp.status_code == 501 and words in error_message(resp), resp.json


def test_a_node_s_ports_path_lists_its_ports(api):
    _create(api, name="n1")
    assert api.client.post("/v1/ports", headers=V, json={
        "address": "52:54:00:00:00:31", "node_uuid": "n1"}).status_code == 201
    for path in ("/v1/nodes/n1/ports", "/v1/nodes/n1/ports/detail"):
        ports = api.client.get(path, headers=V).json["ports"]
        assert [p["address"] for p in ports] == ["52:54:00:00:00:31"], path
    assert api.client.get("/v1/nodes/nosuch/ports", headers=V).status_code == 404


def test_unknown_paths_and_missing_nodes_stay_plain_404(api):
    assert "could not be found" in error_message(api.client.get("/v1/nonsense"))
    missing = api.client.get("/v1/nodes/no-such-node/traits", headers=V)
    assert missing.status_code == 404 and "no-such-node" in error_message(missing)


def test_reset_interfaces_with_a_new_driver(api):
    _create(api, name="n1", boot_interface="pxe", power_interface="ipmitool",
            inspect_interface="no-inspect")
    alone = api.client.patch("/v1/nodes/n1?reset_interfaces=true", headers=V,
                             json=[{"op": "add", "path": "/description", "value": "x"}])
    assert alone.status_code == 400 and "changing the node's driver" in error_message(alone)
    resp = api.client.patch("/v1/nodes/n1?reset_interfaces=true", headers=V, json=[
        {"op": "replace", "path": "/driver", "value": "redfish"},
        {"op": "add", "path": "/power_interface", "value": "redfish"}])
    assert resp.status_code == 200, resp.json
    assert (resp.json["boot_interface"], resp.json["power_interface"],
            resp.json["inspect_interface"]) == ("ipxe", "redfish", "agent")


def test_shards_and_children(api):
    parent = _create(api, name="p", shard="s1").json
    _create(api, name="a", shard="s1")
    child = _create(api, name="c", shard="s2", parent_node="p").json
    _create(api, name="u")
    shards = api.client.get("/v1/shards", headers=V).json["shards"]
    assert shards == [{"name": "s1", "count": 2}, {"name": "None", "count": 1},
                      {"name": "s2", "count": 1}]
    children = api.client.get("/v1/nodes/p/children", headers=V).json
    assert children["children"] == [child["uuid"]]
    assert children["links"]["href"].endswith(f"/v1/nodes?parent_node={parent['uuid']}")
    assert api.client.get("/v1/nodes/a/children", headers=V).json["children"] == []
    old = {"X-OpenStack-Ironic-API-Version": "1.81"}
    assert api.client.get("/v1/shards", headers=old).status_code == 404
