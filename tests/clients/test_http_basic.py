"""The clients with ``http_basic`` against an API that requires HTTP basic credentials."""

import dataclasses
import json

import pytest

from tests.clients.runners import Baremetal, Ipa, Sdk, call, machine, wait_for

# Every test runs real client processes (about a second of imports each).
pytestmark = pytest.mark.slow

ACTIONS = [{"op": "set-attribute", "args": ["/extra/basic", "yes"]}]


@pytest.fixture(scope="module")
def server(server_factory):
    return server_factory(auth=True)


@pytest.fixture(scope="module")
def bm(clients_bin, server, client_home):
    return Baremetal(clients_bin, server, client_home)


@pytest.fixture(scope="module")
def sdk(clients_bin, server, client_home):
    return Sdk(clients_bin, server, client_home)


def wrong_password(server):
    return dataclasses.replace(server, auth=(server.auth[0], "not-the-password"))


def test_baremetal_cli(bm, server, clients_bin, client_home):
    node = bm.json("node", "create", "--driver", "fake-hardware", "--name", "basic-1")
    port = bm.json("port", "create", "52:54:00:ba:00:01", "--node", node["uuid"],
                   "--pxe-enabled", "false")
    assert port["pxe_enabled"] is False
    bm.ok("node", "set", "basic-1", "--extra", "auth=basic")
    long = bm.json("node", "list", "--long", "--provision-state", "enroll")
    assert [(n["name"], n["extra"]) for n in long] == [("basic-1", {"auth": "basic"})]
    bm.ok("node", "manage", "basic-1", "--wait", "30")
    # Without --conditions the client sends null: Ironic refuses it, we read "none" (api.md).
    rule = bm.json("inspection", "rule", "create", "--actions", json.dumps(ACTIONS))
    assert rule["conditions"] == [] and rule["actions"] == ACTIONS
    assert rule["uuid"] in {r["uuid"] for r in bm.json("inspection", "rule", "list")}
    bm.ok("inspection", "rule", "delete", rule["uuid"])

    # The same through python-openstackclient's plugin: `openstack baremetal ...`.
    osc = Baremetal(clients_bin, server, client_home, command="openstack")
    shown = osc.json("baremetal", "node", "show", "basic-1")
    assert shown["uuid"] == node["uuid"] and shown["provision_state"] == "manageable"

    denied = Baremetal(clients_bin, wrong_password(server), client_home)
    message = denied.fails("node", "list")
    assert "Authentication required" in message and "(HTTP 401)" in message


def test_openstacksdk(sdk, server, clients_bin, client_home):
    node = sdk.call("create_node", name="basic-sdk", driver="fake-hardware")
    result = sdk.run(
        call("get_node", "basic-sdk"),
        call("create_port", node_id=node["id"], address="52:54:00:ba:00:02"),
        call("set_node_provision_state", "basic-sdk", "manage", wait=True, timeout=30),
        call("nodes", provision_state="manageable"),
        call("ports", address="52:54:00:ba:00:02"),
    )
    assert result.ok(2)["provision_state"] == "manageable"
    assert "basic-sdk" in [n["name"] for n in result.ok(3)]
    assert [p["id"] for p in result.ok(4)] == [result.ok(1)["id"]]

    error = Sdk(clients_bin, wrong_password(server), client_home).run(call("nodes")).error()
    assert error["status"] == 401 and "Authentication required" in error["message"]

    # The same cloud from clouds.yaml, the way Ansible's openstack.cloud modules connect.
    from_yaml = Sdk(clients_bin, server, client_home, cloud="inspection").run(
        call("get_node", "basic-sdk"))
    assert from_yaml.ok()["provision_state"] == "manageable"


def test_ramdisk_needs_no_credentials(sdk, server, clients_bin, client_home):
    node = sdk.call("create_node", name="basic-ipa", driver="fake-hardware")
    sdk.run(call("create_port", node_id=node["id"], address="52:54:00:ba:00:03"),
            call("set_node_provision_state", "basic-ipa", "manage", wait=True, timeout=30),
            call("set_node_provision_state", "basic-ipa", "inspect")).ok(2)
    anonymous = dataclasses.replace(server, auth=None)
    posted = Ipa(clients_bin, anonymous, client_home).inspect(
        machine(["52:54:00:ba:00:03"], serial="SN-BASIC"))
    assert posted["error"] is None and posted["uuid"]
    wait_for(lambda: server.http("GET", "/v1/nodes/basic-ipa").json()["provision_state"]
             == "manageable", what="manageable")
