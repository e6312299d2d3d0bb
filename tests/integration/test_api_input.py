"""Malformed input on every JSON endpoint and in URLs: a 400 with a message, never a 500.

PostgreSQL is the backend that refuses NUL characters in text, so these run on every real
database; the others must give the same answers.
"""

import uuid

import pytest

from inspection.common.untrusted import MAX_JSON_DEPTH
from tests.integration.api_helpers import Api, api_conf, error_message
from tests.integration.node_factory import add_node

RULE = {"actions": [{"op": "set-attribute", "args": {"path": "/extra/x", "value": 1}}]}
MAC = "52:54:00:12:34:56"


@pytest.fixture
def api(tmp_path, db_url):
    api = Api(api_conf(tmp_path, db_url))
    yield api
    api.close()


def _endpoints(api) -> list[tuple[str, str]]:
    node = add_node(api.context.engine, state="manageable", name="input-node")
    rule = api.client.post("/v1/inspection_rules", json=RULE)
    assert rule.status_code == 201, rule.json
    return [("POST", "/v1/inspection_rules"),
            ("PATCH", rule.headers["Location"]),
            ("POST", "/v1/inspection_rules/explain"),
            ("POST", "/v1/nodes"),
            ("PUT", f"/v1/nodes/{node['uuid']}/states/provision"),
            ("POST", "/v1/ports"),
            ("POST", "/v1/continue_inspection")]


def _send(api, method: str, path: str, raw: str):
    return api.client.open(path, method=method, data=raw.encode(),
                           content_type="application/json")


STRING_PROBLEMS = ("NUL character", "unpaired UTF-16 surrogate")


@pytest.mark.parametrize(("raw", "words"), [
    ("1" * 5000, "cannot be read"),                              # int() digit limit
    ("[" * 100_000 + "]" * 100_000, "nested too deeply"),        # parser recursion
    ('{"a":' * (MAX_JSON_DEPTH + 1) + "1" + "}" * (MAX_JSON_DEPTH + 1), "nested more than"),
    ('{"value": NaN}', "NaN is not a JSON number"),
    ('{"value": Infinity}', "Infinity is not a JSON number"),
    ('{"value": -Infinity}', "-Infinity is not a JSON number"),
    ('{"value": 1e400}', "number out of range"),
    ('{"name": "a\\u0000b", "driver": "ipmi"}', "NUL character"),
    ('{"a\\u0000": 1}', "NUL character"),
    ('{"name": "\\ud800", "driver": "ipmi"}', "unpaired UTF-16 surrogate"),
])
def test_bad_json_is_a_400_everywhere(api, raw, words):
    for method, path in _endpoints(api):
        if path == "/v1/continue_inspection" and words in STRING_PROBLEMS:
            continue  # the ramdisk's strings are stored escaped: see the test below
        resp = _send(api, method, path, raw)
        assert resp.status_code == 400, (method, path, resp.status_code, resp.get_data()[:200])
        assert words in error_message(resp), (method, path, resp.json)
    assert [n["name"] for n in api.client.get("/v1/nodes").json["nodes"]] == ["input-node"]


def test_nul_in_strings_of_valid_documents_is_refused_before_the_database(api):
    node = add_node(api.context.engine, name="keeper")
    cases = [
        ("/v1/nodes", {"driver": "ipmi", "name": "a\x00b"}),
        ("/v1/inspection_rules", {**RULE, "description": "a\x00b"}),
        ("/v1/inspection_rules", {**RULE, "scope": "\x00"}),
        ("/v1/ports", {"address": MAC, "node_uuid": "ab\x00"}),
        ("/v1/ports", {"address": MAC, "node_uuid": node["uuid"],
                       "extra": {"k": "\x00"}}),
    ]
    for path, doc in cases:
        resp = api.client.post(path, json=doc)
        assert resp.status_code == 400, (path, doc, resp.json)
        assert "NUL" in error_message(resp)
    assert [n["name"] for n in api.client.get("/v1/nodes").json["nodes"]] == ["keeper"]
    assert api.client.get("/v1/ports").json["ports"] == []


@pytest.mark.parametrize(("method", "url"), [
    ("GET", "/v1/nodes?provision_state=%00"),
    ("GET", "/v1/nodes/a%00b"),
    ("DELETE", "/v1/nodes/a%00b"),
    ("GET", "/v1/nodes/a%00b/inventory"),
    ("GET", "/v1/ports?node=%00"),
    ("GET", "/v1/ports/%00"),
    ("GET", "/v1/inspection_rules?scope=%00"),
    ("GET", "/v1/inspection_rules/%00"),
    ("GET", "/v1/nodes?x%00=1"),
])
def test_nul_in_urls_is_a_400(api, method, url):
    resp = api.client.open(url, method=method)
    assert resp.status_code == 400, resp.get_data()[:300]
    assert "NUL" in error_message(resp)


def test_nul_in_the_ramdisk_callback_query_is_a_400(api):
    resp = api.client.post("/v1/continue_inspection?node_uuid=%00",
                           json={"inventory": {"interfaces": []}})
    assert resp.status_code == 400 and "NUL" in error_message(resp)
    # Ordinary requests keep working, with ordinary answers.
    assert api.client.get(f"/v1/nodes/{uuid.uuid4()}").status_code == 404
    assert api.client.get("/v1/nodes?provision_state=enroll").status_code == 200


def test_nul_in_the_ramdisk_data_is_inspected_and_stored(api):
    """Firmware does put NULs in serial numbers: that machine must still be inspectable."""
    node = add_node(api.context.engine, macs=["52:54:00:00:0a:01"], inspect_interface="agent",
                    target_provision_state="manageable")
    data = {"inventory": {
        "interfaces": [{"name": "eth0", "mac_address": "52:54:00:00:0a:01",
                        "ipv4_address": "192.0.2.10"}],
        "cpu": {"count": 2, "architecture": "x86_64"},
        "memory": {"physical_mb": 2048},
        "system_vendor": {"serial_number": "SN\x00\x00", "manufacturer": "\ud800x"},
        "boot": {"current_boot_mode": "bios", "pxe_interface": "52:54:00:00:0a:01"}}}
    resp = api.unversioned.post("/v1/continue_inspection", json=data)
    assert resp.status_code == 202, resp.json
    assert resp.json["uuid"] == node["uuid"]
    api.wait_processed()
    shown = api.client.get(f"/v1/nodes/{node['uuid']}").json
    assert shown["provision_state"] == "manageable", shown["last_error"]
    stored = api.client.get(f"/v1/nodes/{node['uuid']}/inventory").json
    assert stored["inventory"]["system_vendor"]["serial_number"] == "SN\x00\x00"
