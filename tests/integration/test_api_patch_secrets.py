"""Masked means masked in JSON PATCH too: no operation copies, moves or tests a secret, for
the admin (noauth; http_basic authorises the same way). Keystone roles: tests/clients."""

import pytest

from inspection.db import migration
from pxe_filter.common.database import create_engine
from tests.integration.api_helpers import (
    PASSWORD,
    USER,
    Api,
    api_conf,
    basic,
    error_message,
    write_htpasswd,
)

SECRET = "Redfish-Pa55"
DRIVER_INFO = {"redfish_address": "https://bmc.example.com", "redfish_username": "root",
               "redfish_password": SECRET}


@pytest.fixture(scope="module")
def api(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("patch-secrets")
    url = f"sqlite:///{tmp}/inspection.sqlite"
    migration.upgrade(create_engine(url))
    api = Api(api_conf(tmp, url))
    yield api
    api.close()


@pytest.fixture
def node(api):
    node = api.client.post("/v1/nodes", json={
        "driver": "redfish", "driver_info": DRIVER_INFO,
        "extra": {"token": "tok-123", "note": "x"},
        "properties": {"bmc": "https://admin:UrlPa55@bmc.example.com/redfish"}}).json
    yield node
    api.client.delete(f"/v1/nodes/{node['uuid']}")


def _stored(api, uuid: str) -> dict:
    with api.context.session() as session:
        from inspection.db.models import Node  # noqa: PLC0415
        row = session.query(Node).filter_by(uuid=uuid).one()
        return {"driver_info": row.driver_info, "extra": row.extra,
                "properties": row.properties, "description": row.description,
                "name": row.name}


@pytest.mark.parametrize("operation", [
    {"op": "copy", "from": "/driver_info/redfish_password", "path": "/extra/leak"},
    {"op": "copy", "from": "/driver_info/redfish_password", "path": "/description"},
    {"op": "copy", "from": "/driver_info/redfish_password", "path": "/name"},
    {"op": "copy", "from": "/driver_info", "path": "/extra/all"},
    {"op": "copy", "from": "/extra/token", "path": "/description"},
    {"op": "copy", "from": "/properties/bmc", "path": "/description"},
    {"op": "move", "from": "/driver_info/redfish_password", "path": "/extra/leak"},
    {"op": "move", "from": "/driver_info", "path": "/instance_info/x"},
    {"op": "test", "path": "/driver_info/redfish_password", "value": SECRET},
    {"op": "test", "path": "/driver_info/redfish_password", "value": "wrong"},
    {"op": "test", "path": "/driver_info", "value": DRIVER_INFO},
    {"op": "test", "path": "/driver_info/ipmi_password", "value": None},
], ids=lambda op: f"{op['op']}-{op.get('from', op['path'])}")
def test_no_patch_operation_reads_a_secret(api, node, operation):
    before = _stored(api, node["uuid"])
    resp = api.client.patch(f"/v1/nodes/{node['uuid']}",
                            json=[{"op": "replace", "path": "/extra/note", "value": "y"},
                                  operation])
    assert resp.status_code == 400, resp.json
    assert "masked secret" in error_message(resp)
    assert SECRET not in resp.text and "tok-123" not in resp.text
    assert _stored(api, node["uuid"]) == before  # refused before anything was applied


def test_secrets_are_still_written_and_other_fields_copied(api, node):
    uuid = node["uuid"]
    resp = api.client.patch(f"/v1/nodes/{uuid}", json=[
        {"op": "replace", "path": "/driver_info/redfish_password", "value": "New-Pa55"},
        {"op": "copy", "from": "/driver_info/redfish_username", "path": "/extra/user"},
        {"op": "test", "path": "/driver_info/redfish_address",
         "value": "https://bmc.example.com"},
        {"op": "move", "from": "/extra/note", "path": "/extra/moved"}])
    assert resp.status_code == 200, resp.json
    assert resp.json["driver_info"]["redfish_password"] == "******"
    stored = _stored(api, uuid)
    assert stored["driver_info"]["redfish_password"] == "New-Pa55"
    assert stored["extra"] == {"token": "tok-123", "user": "root", "moved": "x"}
    resp = api.client.patch(f"/v1/nodes/{uuid}", json=[
        {"op": "remove", "path": "/driver_info/redfish_password"}])
    assert resp.status_code == 200, resp.json
    assert "redfish_password" not in _stored(api, uuid)["driver_info"]


def test_port_patches_cannot_read_secrets_either(api, node):
    port = api.client.post("/v1/ports", json={
        "node_uuid": node["uuid"], "address": "52:54:00:12:34:56",
        "extra": {"switch_password": "Sw1tch"}}).json
    for operation in ({"op": "copy", "from": "/extra/switch_password",
                       "path": "/local_link_connection/port_id"},
                      {"op": "test", "path": "/extra/switch_password", "value": "Sw1tch"}):
        resp = api.client.patch(f"/v1/ports/{port['uuid']}", json=[operation])
        assert resp.status_code == 400, resp.json
        assert "Sw1tch" not in resp.text
    api.client.delete(f"/v1/ports/{port['uuid']}")


def test_an_http_basic_admin_cannot_read_a_secret_either(tmp_path):
    url = f"sqlite:///{tmp_path}/inspection.sqlite"
    migration.upgrade(create_engine(url))
    htpasswd = write_htpasswd(tmp_path / "htpasswd", {USER: PASSWORD})
    api = Api(api_conf(tmp_path, url, api={"auth_strategy": "http_basic",
                                           "http_basic_auth_user_file": htpasswd}))
    try:
        node = api.client.post("/v1/nodes", headers=basic(),
                               json={"driver": "redfish", "driver_info": DRIVER_INFO}).json
        for operation in ({"op": "copy", "from": "/driver_info/redfish_password",
                           "path": "/extra/leak"},
                          {"op": "test", "path": "/driver_info/redfish_password",
                           "value": SECRET}):
            resp = api.client.patch(f"/v1/nodes/{node['uuid']}", json=[operation],
                                    headers=basic())
            assert resp.status_code == 400, resp.json
            assert SECRET not in resp.text
    finally:
        api.close()
