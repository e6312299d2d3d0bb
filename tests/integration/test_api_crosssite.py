"""What a web page in the operator's browser could send is refused: bodies that are not JSON,
foreign origins, and (noauth) rebound host names."""

import json

import pytest

from inspection.db import migration
from pxe_filter.common.database import create_engine
from tests.integration.api_helpers import Api, api_conf, basic, error_message, write_htpasswd

NODE = json.dumps({"driver": "ipmi"})


@pytest.fixture(scope="module")
def api(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("crosssite")
    url = f"sqlite:///{tmp}/inspection.sqlite"
    migration.upgrade(create_engine(url))
    api = Api(api_conf(tmp, url, api={"public_endpoint": "https://bmaas.example.com:6385"},
                       cors={"allowed_origin": "https://dashboard.example.com"}))
    yield api
    api.close()


def _count(api, path: str) -> int:
    return len(api.client.get(path).json[path.rsplit("/", 1)[-1]])


@pytest.mark.parametrize("content_type", [
    "text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", None,
])
def test_bodies_other_than_json_get_415_and_change_nothing(api, content_type):
    nodes, rules = _count(api, "/v1/nodes"), _count(api, "/v1/inspection_rules")
    headers = {"Content-Type": content_type} if content_type else {}
    rule = json.dumps({"actions": [{"op": "set-attribute",
                                    "args": {"path": "/extra/x", "value": 1}}]})
    for path, payload in (("/v1/nodes", NODE), ("/v1/inspection_rules", rule)):
        resp = api.client.post(path, data=payload, headers=headers)
        assert resp.status_code == 415, resp.json
        assert "send application/json" in error_message(resp)
    assert (_count(api, "/v1/nodes"), _count(api, "/v1/inspection_rules")) == (nodes, rules)


def test_json_and_json_patch_are_accepted(api):
    resp = api.client.post("/v1/nodes", data=NODE,
                           headers={"Content-Type": "application/json; charset=utf-8"})
    assert resp.status_code == 201
    patch = json.dumps([{"op": "add", "path": "/extra/x", "value": 1}])
    uuid = resp.json["uuid"]
    for kind in ("application/json-patch+json", "application/json"):
        assert api.client.patch(f"/v1/nodes/{uuid}", data=patch,
                                headers={"Content-Type": kind}).status_code == 200
    refused = api.client.post("/v1/nodes", data=NODE,
                              headers={"Content-Type": "application/json-patch+json"})
    assert refused.status_code == 415


@pytest.mark.parametrize("origin, status", [
    ("https://evil.example", 403), ("null", 403), ("http://dashboard.example.com", 403),
    ("https://dashboard.example.com", 201), ("https://bmaas.example.com:6385", 201),
    ("http://localhost", 201),  # the request's own origin
])
def test_origins_outside_the_cors_settings_are_refused(api, origin, status):
    nodes = _count(api, "/v1/nodes")
    resp = api.client.post("/v1/nodes", json={"driver": "ipmi"}, headers={"Origin": origin})
    assert resp.status_code == status, resp.json
    if status == 403:
        assert "[cors]allowed_origin" in error_message(resp)
        assert _count(api, "/v1/nodes") == nodes


@pytest.mark.parametrize("host, status", [
    ("rebound.attacker.example:6385", 400), ("localhost:6385", 200), ("127.0.0.1:6385", 200),
    ("[::1]:6385", 200), ("bmaas.example.com:6385", 200), ("BMAAS.example.com", 200),
])
def test_noauth_checks_the_host(api, host, status):
    resp = api.client.get("/v1/nodes", headers={"Host": host})
    assert resp.status_code == status, resp.json
    if status == 400:
        assert "[api]public_endpoint" in error_message(resp)


def test_with_authentication_any_host_is_served(tmp_path, sqlite_url):
    migration.upgrade(create_engine(sqlite_url))
    users = write_htpasswd(tmp_path / "htpasswd", {"admin": "s3cret-pass"})
    api = Api(api_conf(tmp_path, sqlite_url, api={"auth_strategy": "http_basic",
                                                  "http_basic_auth_user_file": users}))
    try:
        resp = api.client.get("/v1/nodes", headers={"Host": "any.example:6385", **basic()})
        assert resp.status_code == 200
    finally:
        api.close()
