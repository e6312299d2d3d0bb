"""What Ironic's clients rely on: version negotiation, trailing slashes, /detail, fields,
filters that filter (or 400), pages with a next link, PATCH, Ironic's coercions and bodies."""

import json
from urllib.parse import urlsplit

import pytest
import sqlalchemy as sa

from inspection.db import migration
from inspection.db.models import Node, NodeTrait, Port
from pxe_filter.common.database import create_engine
from tests.integration.api_helpers import Api, api_conf, error_message, fault
from tests.integration.node_factory import add_node
from tests.integration.test_policy_senders import api_and_filter, wait_for

V = "X-OpenStack-Ironic-API-Version"


@pytest.fixture
def api(tmp_path, sqlite_url):
    migration.upgrade(create_engine(sqlite_url))
    api = Api(api_conf(tmp_path, sqlite_url))
    yield api
    api.close()


def _node(api, **fields) -> dict:
    resp = api.client.post("/v1/nodes", json={"driver": "ipmi", **fields})
    assert resp.status_code == 201, resp.json
    return resp.json


def _follow(api, url: str, key: str) -> tuple[list[dict], int]:
    """Every item of a paged list, following next links; and how many pages it took."""
    items, pages = [], 0
    while url:
        parts = urlsplit(url)
        resp = api.client.get(parts.path + ("?" + parts.query if parts.query else ""))
        assert resp.status_code == 200, resp.json
        items += resp.json[key]
        pages += 1
        url = resp.json.get("next")
    return items, pages


# --- versions ---

def test_version_documents_as_openstacksdk_needs_them(api):
    for path in ("/", "/v1", "/v1/"):
        resp = api.unversioned.get(path)
        assert resp.status_code == 200
        assert resp.headers["X-OpenStack-Ironic-API-Minimum-Version"] == "1.1"
        assert resp.headers["X-OpenStack-Ironic-API-Maximum-Version"] == "1.96"
        assert resp.headers[V] == "1.1"
    root = api.client.get("/").json
    for doc in (root["default_version"], *root["versions"], api.client.get("/v1").json["version"]):
        assert doc["min_version"] == "1.1" and doc["version"] == "1.96"
        assert doc["links"] == [{"href": "http://localhost/v1/", "rel": "self"}]


def test_public_endpoint_is_used_for_links(tmp_path, sqlite_url):
    migration.upgrade(create_engine(sqlite_url))
    api = Api(api_conf(tmp_path, sqlite_url,
                       api={"public_endpoint": "https://bmaas.example.com:6385/"}))
    try:
        root = api.client.get("/").json
        assert root["default_version"]["links"][0]["href"] == "https://bmaas.example.com:6385/v1/"
        created = api.client.post("/v1/nodes", json={"driver": "ipmi"})
        assert created.headers["Location"].startswith("https://bmaas.example.com:6385/v1/nodes/")
    finally:
        api.close()


@pytest.mark.parametrize("headers, used", [
    ({V: "1.50"}, "1.50"), ({V: "latest"}, "1.96"), ({V: "1.96"}, "1.96"),
    ({"OpenStack-API-Version": "baremetal 1.81"}, "1.81"),
    ({"OpenStack-API-Version": "compute 2.1, baremetal latest"}, "1.96"),
])
def test_requested_versions_are_honoured(api, headers, used):
    resp = api.client.get("/v1/nodes", headers=headers)
    assert resp.status_code == 200 and resp.headers[V] == used


@pytest.mark.parametrize("value, words", [
    ("1.115", "1.115 was requested but the minor version is not supported"),
    ("1.0", "not supported"), ("2.1", "Mutually exclusive versions"),
    ("abc", "Invalid value for X-OpenStack-Ironic-API-Version"), ("1.x", "Invalid value"),
    # Beyond Python's integer conversion limit: once a 500 with a traceback.
    ("1." + "9" * 5000, "Invalid value"), ("9" * 5000 + ".1", "Invalid value"),
    ("1.\u00b2", "Invalid value"), ("1.-1", "Invalid value"),
])
def test_versions_out_of_range_get_406_with_the_range(api, value, words):
    resp = api.client.get("/v1/nodes", headers={V: value})
    assert resp.status_code == 406 and words in error_message(resp)
    assert resp.headers["X-OpenStack-Ironic-API-Maximum-Version"] == "1.96"
    assert V not in resp.headers


def test_resources_newer_than_a_named_version_are_refused_as_ironic_does(api):
    node = _node(api, name="n1")
    old = {V: "1.50"}
    rules = api.client.get("/v1/inspection_rules", headers=old)
    assert rules.status_code == 404 and "does not allow inspection rules" in error_message(rules)
    written = api.client.post("/v1/inspection_rules", headers=old, json={"actions": []})
    assert written.status_code == 405  # Ironic's answer to a write below 1.96
    assert api.client.get("/v1/inspection_rules", headers={V: "1.96"}).status_code == 200
    assert api.unversioned.get("/v1/inspection_rules").status_code == 404  # none named: 1.1
    inventory = api.client.get("/v1/nodes/n1/inventory", headers={V: "1.80"})
    assert inventory.status_code == 404 and "inventory" in error_message(inventory)
    manage = api.client.put(f"/v1/nodes/{node['uuid']}/states/provision",
                            json={"target": "manage"}, headers={V: "1.3"})
    assert manage.status_code == 406
    assert api.client.put("/v1/nodes/n1/states/provision", json={"target": "manage"},
                          headers={V: "1.4"}).status_code == 404  # no node names before 1.5
    assert api.client.put("/v1/nodes/n1/states/provision", json={"target": "manage"},
                          headers={V: "1.5"}).status_code == 202


def test_every_answer_carries_the_version_headers(api):
    for resp in (api.client.get("/v1/nodes/nosuch"), api.client.delete("/v1/openapi.json"),
                 api.client.get("/nowhere"), api.client.post("/v1/nodes", json={})):
        assert resp.status_code >= 400
        assert resp.headers["X-OpenStack-Ironic-API-Minimum-Version"] == "1.1"
        assert fault(resp)["faultcode"] == "Client"


# --- paths, detail, fields ---

def test_trailing_slashes_and_detail_paths(api):
    node = _node(api, name="n1", driver_info={"ipmi_password": "pw"})
    mac = "52:54:00:00:00:01"
    assert api.client.post("/v1/ports", json={"address": mac, "node_uuid": "n1"}
                           ).status_code == 201
    listed = api.client.get("/v1/nodes/?provision_state=enroll").json["nodes"]
    assert [n["uuid"] for n in listed] == [node["uuid"]]
    assert "driver_info" not in listed[0]
    assert listed[0]["links"] == [
        {"href": f"http://localhost/v1/nodes/{node['uuid']}", "rel": "self"},
        {"href": f"http://localhost/nodes/{node['uuid']}", "rel": "bookmark"}]
    detail = api.client.get("/v1/nodes/detail/").json["nodes"]
    assert detail[0]["driver_info"] == {"ipmi_password": "******"}
    assert api.client.get("/v1/nodes/n1/").json["uuid"] == node["uuid"]
    ports = api.client.get("/v1/ports/detail?node=n1").json["ports"]
    assert [p["address"] for p in ports] == [mac]
    rules = api.client.get("/v1/inspection_rules/?detail=True")
    assert rules.status_code == 200
    assert api.client.post("/v1/nodes", json={"driver": "ipmi", "name": "detail"}
                           ).status_code == 400


def test_timestamps_carry_their_zone(api):
    node = _node(api, name="n1")
    assert node["created_at"].endswith("+00:00")
    rule = api.client.post("/v1/inspection_rules", json={"actions": [
        {"op": "set-attribute", "args": {"path": "/extra/x", "value": 1}}]}).json
    assert rule["created_at"].endswith("+00:00")


def test_traits_and_port_internal_info_are_shown(api):
    node = _node(api, name="n1")
    _node(api, name="n2")
    assert api.client.post("/v1/ports", json={"address": "52:54:00:00:00:01",
                                              "node_uuid": "n1"}).status_code == 201
    with api.context.engine.begin() as conn:
        node_id = conn.execute(sa.select(Node.id).where(Node.uuid == node["uuid"])).scalar()
        conn.execute(sa.insert(NodeTrait), [{"node_id": node_id, "trait": t}
                                            for t in ("CUSTOM_B", "CUSTOM_A")])
        conn.execute(sa.update(Port).values(internal_info={"tenant_vif_port_id": "v1"}))
    assert api.client.get("/v1/nodes/n1").json["traits"] == ["CUSTOM_A", "CUSTOM_B"]
    detail = api.client.get("/v1/nodes/detail").json["nodes"]
    assert [n["traits"] for n in detail] == [["CUSTOM_A", "CUSTOM_B"], []]
    assert api.client.get("/v1/nodes?fields=traits").json["nodes"][0]["traits"] == \
        ["CUSTOM_A", "CUSTOM_B"]
    (port,) = api.client.get("/v1/ports").json["ports"]
    assert port["internal_info"] == {"tenant_vif_port_id": "v1"}


def test_fields_show_only_what_is_asked(api):
    node = _node(api, name="n1")
    shown = api.client.get("/v1/nodes/n1?fields=uuid,name").json
    assert set(shown) == {"uuid", "name", "links"} and shown["uuid"] == node["uuid"]
    listed = api.client.get("/v1/nodes?fields=provision_state").json["nodes"]
    assert listed == [{"provision_state": "enroll", "links": shown["links"]}]
    bad = api.client.get("/v1/nodes?fields=uuid,bogus")
    assert bad.status_code == 400 and "bogus" in error_message(bad)
    both = api.client.get("/v1/nodes?detail=true&fields=uuid")
    assert both.status_code == 400 and "detail" in error_message(both)


# --- filters ---

@pytest.mark.parametrize("path", ["/v1/nodes?bogus=1",
                                  "/v1/ports?adress=52:54:00:00:00:01",
                                  "/v1/inspection_rules?phases=main",
                                  "/v1/nodes/detail?detail=true", "/v1/nodes/n1?limit=1",
                                  "/v1/nodes?limit=1&limit=2"])
def test_unknown_or_repeated_parameters_are_refused_not_ignored(api, path):
    _node(api, name="n1")
    resp = api.client.get(path)
    assert resp.status_code == 400
    assert "Unexpected arguments" in error_message(resp) or "more than once" in \
        error_message(resp)


def test_node_filters(api):
    engine = api.context.engine
    a = add_node(engine, state="manageable", maintenance=True, resource_class="gpu",
                 conductor_group="rack1", auto_discovered=True)
    b = add_node(engine, state="enroll", conductor_group="")
    with engine.begin() as conn:
        conn.execute(sa.update(Node).where(Node.id == a["id"]).values(driver="redfish"))

    def uuids(query):
        resp = api.client.get(f"/v1/nodes?{query}")
        assert resp.status_code == 200, resp.json
        return [n["uuid"] for n in resp.json["nodes"]]

    assert uuids("provision_state=manageable") == [a["uuid"]]
    assert uuids("driver=ipmi") == [b["uuid"]]
    assert uuids("maintenance=true") == [a["uuid"]]
    assert uuids("maintenance=False") == [b["uuid"]]
    assert uuids("resource_class=gpu") == [a["uuid"]]
    assert uuids("conductor_group=RACK1") == [a["uuid"]]
    assert uuids("auto_discovered=yes") == [a["uuid"]]
    assert uuids("fault=power%20failure") == []
    assert uuids("provision_state=manageable&maintenance=false") == []
    bad = api.client.get("/v1/nodes?maintenance=maybe")
    assert bad.status_code == 400 and "acceptable values" in error_message(bad)


def test_port_filters(api):
    _node(api, name="n1")
    other = _node(api, name="n2")
    for mac, node, pxe in (("52:54:00:00:00:01", "n1", True), ("52:54:00:00:00:02", "n1",
                                                               "false"),
                           ("52:54:00:00:00:03", "n2", "True")):
        resp = api.client.post("/v1/ports", json={"address": mac, "node_uuid": node,
                                                  "pxe_enabled": pxe})
        assert resp.status_code == 201, resp.json

    def macs(query):
        resp = api.client.get(f"/v1/ports?{query}")
        assert resp.status_code == 200, resp.json
        return [p["address"] for p in resp.json["ports"]]

    assert macs("address=52-54-00-00-00-02") == ["52:54:00:00:00:02"]
    assert macs("address=52:54:00:00:00:09") == []
    assert macs("node=n1") == ["52:54:00:00:00:01", "52:54:00:00:00:02"]
    assert macs(f"node_uuid={other['uuid']}") == ["52:54:00:00:00:03"]
    assert macs("pxe_enabled=false") == ["52:54:00:00:00:02"]
    assert macs("node=n1&pxe_enabled=true") == ["52:54:00:00:00:01"]
    bad = api.client.get("/v1/ports?address=zz")
    assert bad.status_code == 400 and error_message(bad) == \
        "Expected valid MAC address for address: zz"
    assert api.client.get("/v1/ports?node_uuid=n1").status_code == 400
    assert api.client.get("/v1/ports?node=nosuch").status_code == 404


# --- pages ---

def test_pages_follow_next_links_in_every_sort_order(tmp_path, db_url):
    api = Api(api_conf(tmp_path, db_url, api={"max_limit": 4}))
    try:
        engine = api.context.engine
        names = ["b", None, "a", "d", None, "c", "e"]  # NULL names sort first everywhere
        created = [add_node(engine, state="enroll", name=n)["uuid"] for n in names]
        items, pages = _follow(api, "/v1/nodes", "nodes")
        assert [n["uuid"] for n in items] == created and pages == 2
        items, _ = _follow(api, "/v1/nodes?limit=2&sort_key=name&sort_dir=desc", "nodes")
        assert [n["name"] for n in items] == ["e", "d", "c", "b", "a", None, None]
        items, pages = _follow(api, "/v1/nodes/detail?sort_key=created_at&limit=3", "nodes")
        assert sorted(n["uuid"] for n in items) == sorted(created) and pages == 3
        others = [add_node(engine, state="manageable")["uuid"] for _ in range(3)]
        # Every page keeps the filter (Ironic 39's next links drop it: unfiltered pages).
        items, pages = _follow(api, "/v1/nodes?provision_state=enroll&limit=2&fields=uuid",
                               "nodes")
        assert [n["uuid"] for n in items] == created and pages == 4
        assert [n["uuid"] for n in _follow(api, "/v1/nodes?provision_state=manageable",
                                           "nodes")[0]] == others
        first = api.client.get("/v1/nodes?limit=100").json
        assert len(first["nodes"]) == 4  # [api]max_limit caps the page
        assert first["next"].startswith("http://localhost/v1/nodes?")
    finally:
        api.close()


@pytest.mark.parametrize("query, status, words", [
    ("limit=0", 400, "Limit must be positive"), ("limit=x", 400, "Expected an integer"),
    ("sort_key=driver_info", 400, "invalid field for sorting"),
    ("sort_dir=up", 400, "Invalid sort direction"), ("marker=x", 400, "Expected UUID"),
    ("marker=9b1f1f51-6a0c-4d1b-8f7a-5f6ab6f0c001", 404, "could not be found"),
])
def test_bad_page_parameters(api, query, status, words):
    resp = api.client.get(f"/v1/nodes?{query}")
    assert resp.status_code == status and words in error_message(resp)


def test_rules_pages_keep_run_order(api):
    for priority in (5, 50, 20):
        assert api.client.post("/v1/inspection_rules", json={"priority": priority, "actions": [
            {"op": "set-attribute", "args": {"path": "/extra/x", "value": 1}}]}
        ).status_code == 201
    everything = api.client.get("/v1/inspection_rules").json["inspection_rules"]
    items, pages = _follow(api, "/v1/inspection_rules?limit=2", "inspection_rules")
    assert [r["uuid"] for r in items] == [r["uuid"] for r in everything] and pages == 2
    by_phase = api.client.get("/v1/inspection_rules?phase=early").json["inspection_rules"]
    assert all(r["phase"] == "early" for r in by_phase)


# --- PATCH and coercions ---

def test_patch_node(api):
    _node(api, name="n1", driver_info={"ipmi_password": "pw", "ipmi_address": "10.0.0.1"})
    resp = api.client.patch("/v1/nodes/n1", json=[
        {"op": "add", "path": "/extra/foo", "value": "bar"},
        {"op": "replace", "path": "/maintenance", "value": "true"},
        {"op": "replace", "path": "/driver_info/ipmi_address", "value": "10.0.0.2"},
        {"op": "replace", "path": "/conductor_group", "value": "Rack2"},
        {"op": "replace", "path": "/name", "value": "n1-renamed"}])
    assert resp.status_code == 200, resp.json
    node = resp.json
    assert node["extra"] == {"foo": "bar"} and node["maintenance"] is True
    assert node["conductor_group"] == "rack2" and node["name"] == "n1-renamed"
    assert node["driver_info"] == {"ipmi_password": "******", "ipmi_address": "10.0.0.2"}
    with api.context.engine.connect() as conn:  # the secret is kept, not overwritten
        stored = conn.execute(sa.select(Node.driver_info)).scalar_one()
    assert stored["ipmi_password"] == "pw"
    removed = api.client.patch("/v1/nodes/n1-renamed", json=[
        {"op": "remove", "path": "/name"}, {"op": "remove", "path": "/maintenance"}]).json
    assert removed["name"] is None and removed["maintenance"] is False


@pytest.mark.parametrize("patch, status, words", [
    ([{"op": "replace", "path": "/provision_state", "value": "active"}], 400,
     "Cannot patch /provision_state. Only the following can be updated: "),
    ([{"op": "replace", "path": "/uuid", "value": "x"}], 400, "Cannot patch /uuid"),
    ([{"op": "move", "from": "/reservation", "path": "/extra/r"}], 400, "Cannot patch"),
    ([{"op": "remove", "path": "/driver"}], 400, "driver"),
    ([{"op": "replace", "path": "/maintenance", "value": "maybe"}], 400, "acceptable values"),
    ([{"op": "replace", "path": "/name", "value": "detail"}], 400, "reserved"),
    ([{"op": "replace", "path": "/name", "value": "taken"}], 409, "already exists"),
    ([{"op": "remove", "path": "/extra/nosuch"}], 400, "Invalid patch"),
    ({"op": "add"}, 400, "JSON patch"), ([], 400, "JSON patch"),
])
def test_patch_node_refusals(api, patch, status, words):
    _node(api, name="n1")
    _node(api, name="taken")
    resp = api.client.patch("/v1/nodes/n1", json=patch)
    assert resp.status_code == status and words in error_message(resp), resp.json


def test_maintenance_set_and_unset(api):
    _node(api, name="n1")
    assert api.client.put("/v1/nodes/n1/maintenance", json={"reason": None}).status_code == 202
    assert api.client.get("/v1/nodes/n1").json["maintenance"] is True
    assert api.client.get("/v1/nodes/n1").json["maintenance_reason"] is None
    assert api.client.put("/v1/nodes/n1/maintenance", json={"reason": "disk"}).status_code == 202
    assert api.client.get("/v1/nodes/n1").json["maintenance_reason"] == "disk"
    refused = api.client.put("/v1/nodes/n1/maintenance", json={"reason": 3})
    assert refused.status_code == 400 and "reason" in error_message(refused)
    assert api.client.delete("/v1/nodes/n1/maintenance").status_code == 202
    shown = api.client.get("/v1/nodes/n1").json
    assert shown["maintenance"] is False and shown["maintenance_reason"] is None


def test_methods_a_path_lacks_get_405(api):
    _node(api, name="n1")
    for method, path in (("patch", "/v1/nodes/n1/states/provision"),
                         ("patch", "/v1/nodes/n1/inventory"), ("put", "/v1/nodes/n1"),
                         ("patch", "/v1/nodes"), ("patch", "/v1/nodes/detail"),
                         ("delete", "/v1/ports/detail/"),
                         ("patch", "/v1/inspection_rules/explain"),
                         ("get", "/v1/inspection_rules/explain")):
        resp = getattr(api.client, method)(path, json=[])
        assert resp.status_code == 405, (method, path)
        assert "Allow" in resp.headers


def test_patch_port_and_pxe_enabled_strings(api):
    _node(api, name="n1")
    target = _node(api, name="n2")
    created = api.client.post("/v1/ports", json={"address": "52:54:00:00:00:01",
                                                 "node_uuid": "n1", "pxe_enabled": "false"})
    assert created.status_code == 201 and created.json["pxe_enabled"] is False
    path = f"/v1/ports/{created.json['uuid']}"
    resp = api.client.patch(path, json=[
        {"op": "replace", "path": "/address", "value": "52-54-00-00-00-0A"},
        {"op": "replace", "path": "/pxe_enabled", "value": "True"},
        {"op": "replace", "path": "/node_uuid", "value": target["uuid"]},
        {"op": "add", "path": "/extra/switch", "value": "sw1"}])
    assert resp.status_code == 200, resp.json
    port = resp.json
    assert (port["address"], port["pxe_enabled"], port["node_uuid"], port["extra"]) == \
        ("52:54:00:00:00:0a", True, target["uuid"], {"switch": "sw1"})
    assert api.client.get(path).json == port
    refused = api.client.patch(path, json=[{"op": "replace", "path": "/uuid", "value": "x"}])
    assert refused.status_code == 400 and "Cannot patch /uuid" in error_message(refused)
    bad = api.client.post("/v1/ports", json={"address": "52:54:00:00:00:02",
                                             "node_uuid": "n1", "pxe_enabled": "maybe"})
    assert bad.status_code == 400 and "pxe_enabled" in error_message(bad)


def test_error_body_is_what_ironicclient_parses(api):
    resp = api.client.get("/v1/nodes/nosuch")
    assert resp.status_code == 404
    body = json.loads(resp.get_data(as_text=True))
    assert json.loads(body["error_message"]) == {
        "faultstring": "Node nosuch could not be found", "faultcode": "Client",
        "debuginfo": None}


def test_patched_port_address_reaches_the_filters_at_once(tmp_path, sqlite_url, rabbit_url):
    # A real filter daemon with its periodic sync out of reach: only broadcasts move files.
    old, new = "52:54:00:bb:00:01", "52:54:00:bb:00:02"
    with api_and_filter(tmp_path, sqlite_url, rabbit_url,
                        {"state": "inspect wait", "macs": [old], "inspect_interface": "agent"}
                        ) as (api, hostsdir, (node,)):
        wait_for(hostsdir / old, f"{old}\n")
        (port,) = api.client.get(f"/v1/ports?node_uuid={node['uuid']}").json["ports"]
        resp = api.client.patch(f"/v1/ports/{port['uuid']}",
                                json=[{"op": "replace", "path": "/address", "value": new}])
        assert resp.status_code == 200, resp.json
        wait_for(hostsdir / old, f"{old},ignore\n")
        wait_for(hostsdir / new, f"{new}\n")
        # Deleting a served port closes it (this answered 500 after the commit before).
        assert api.client.delete(f"/v1/ports/{port['uuid']}").status_code == 204
        wait_for(hostsdir / new, f"{new},ignore\n")
