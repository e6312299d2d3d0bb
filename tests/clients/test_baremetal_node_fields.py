"""Ironic's node fields, traits and honest refusals through the real ``baremetal`` CLI (and
openstacksdk for the fields and traits it knows).

Every field round-trips through ``node create``, ``node set``, ``node unset`` and ``node show``
as python-ironicclient sends and reads it; the list filters filter; traits go through ``node
add trait``, ``node trait list`` and ``node remove trait``; endpoints this service does not
serve are refused with a message naming the feature. One API process on PostgreSQL.
"""

import json

import pytest
import sqlalchemy as sa

from inspection.db.models import Node
from pxe_filter.common.database import create_engine
from tests.clients.runners import Baremetal, Sdk, call

pytestmark = pytest.mark.slow

INTERFACES = {"bios": "no-bios", "boot": "pxe", "console": "no-console", "deploy": "direct",
              "firmware": "no-firmware", "inspect": "agent", "management": "ipmitool",
              "network": "noop", "power": "ipmitool", "raid": "no-raid",
              "rescue": "no-rescue", "storage": "noop", "vendor": "no-vendor"}
NETWORK_DATA = {
    "links": [{"id": "port-1", "type": "phy", "ethernet_mac_address": "52:54:00:12:34:56"}],
    "networks": [{"id": "net-1", "link": "port-1", "network_id": "n1", "type": "ipv4_dhcp"}],
    "services": [{"type": "dns", "address": "192.0.2.53"}],
}


@pytest.fixture(scope="module")
def server(server_factory):
    return server_factory(postgresql=True)


@pytest.fixture(scope="module")
def bm(clients_bin, server, client_home):
    return Baremetal(clients_bin, server, client_home)


@pytest.fixture(scope="module")
def parent(bm):
    return bm.json("node", "create", "--driver", "ipmi", "--name", "fields-parent")


@pytest.fixture(scope="module")
def node(bm, parent):
    """A node created with every field ``node create`` takes."""
    interfaces = [arg for name, value in INTERFACES.items()
                  for arg in (f"--{name}-interface", value)]
    return bm.json("node", "create", "--driver", "ipmi", "--name", "fields-1", *interfaces,
                   "--owner", "proj-owner", "--lessee", "proj-lessee",
                   "--description", "Rack 7, slot 3", "--shard", "shard-a",
                   "--parent-node", "fields-parent", "--network-data", json.dumps(NETWORK_DATA))


def test_create_and_show_every_field(bm, node, parent):
    for shown in (node, bm.json("node", "show", "fields-1")):
        assert {name: shown[f"{name}_interface"] for name in INTERFACES} == INTERFACES
        assert (shown["owner"], shown["lessee"], shown["description"], shown["shard"]) == (
            "proj-owner", "proj-lessee", "Rack 7, slot 3", "shard-a")
        assert shown["parent_node"] == parent["uuid"]
        assert shown["network_data"] == NETWORK_DATA
        assert (shown["protected"], shown["retired"]) == (False, False)


def test_set_unset_and_show_every_field(bm, node):
    bm.ok("node", "set", "fields-1", "--owner", "proj-2", "--lessee", "proj-3",
          "--description", "moved", "--shard", "shard-b", "--power-interface", "redfish",
          "--boot-interface", "ipxe", "--retired", "--retired-reason", "end of life",
          "--network-data", json.dumps({**NETWORK_DATA, "services": []}))
    shown = bm.json("node", "show", "fields-1")
    assert (shown["owner"], shown["lessee"], shown["description"], shown["shard"]) == (
        "proj-2", "proj-3", "moved", "shard-b")
    assert (shown["power_interface"], shown["boot_interface"]) == ("redfish", "ipxe")
    assert (shown["retired"], shown["retired_reason"]) == (True, "end of life")
    assert shown["network_data"]["services"] == []
    bm.ok("node", "unset", "fields-1", "--owner", "--lessee", "--description", "--shard",
          "--power-interface", "--retired", "--network-data", "--parent-node")
    shown = bm.json("node", "show", "fields-1")
    assert [shown[k] for k in ("owner", "lessee", "description", "shard",
                               "retired_reason", "parent_node")] == [None] * 6
    # an unset interface falls back to the hardware type's default, as in Ironic
    assert shown["power_interface"] == "ipmitool"
    assert (shown["retired"], shown["network_data"]) == (False, {})


def test_maintenance_reason_round_trips(bm, node):
    bm.ok("node", "maintenance", "set", "fields-1", "--reason", "disk swap")
    shown = bm.json("node", "show", "fields-1", "--fields", "maintenance",
                    "maintenance_reason")
    assert (shown["maintenance"], shown["maintenance_reason"]) == (True, "disk swap")
    bm.ok("node", "maintenance", "unset", "fields-1")
    assert bm.json("node", "show", "fields-1")["maintenance_reason"] is None


def test_protection_on_a_deployed_node(bm, server):
    bm.ok("node", "create", "--driver", "ipmi", "--name", "fields-deployed")
    refused = bm.fails("node", "set", "fields-deployed", "--protected")
    assert "can only be made protected in provision states 'active'" in refused
    # No API call deploys a node here: the test sets the state Ironic would have left.
    engine = create_engine(server.db_url)
    with engine.begin() as conn:
        conn.execute(sa.update(Node).where(Node.name == "fields-deployed")
                     .values(provision_state="active"))
    engine.dispose()
    bm.ok("node", "set", "fields-deployed", "--protected", "--protected-reason", "tenant")
    shown = bm.json("node", "show", "fields-deployed")
    assert (shown["protected"], shown["protected_reason"]) == (True, "tenant")
    assert "is protected and cannot be undeployed, rebuilt or deleted" in bm.fails(
        "node", "delete", "fields-deployed")
    bm.ok("node", "unset", "fields-deployed", "--protected")
    shown = bm.json("node", "show", "fields-deployed")
    assert (shown["protected"], shown["protected_reason"]) == (False, None)


def test_list_filters_filter(bm, parent):
    for name, args in (("fields-f1", ("--owner", "p-x", "--description", "GPU box",
                                      "--shard", "s-1", "--lessee", "p-y")),
                       ("fields-f2", ("--owner", "p-y", "--description", "storage",
                                      "--shard", "s-2")),
                       ("fields-child", ("--parent-node", "fields-parent"))):
        bm.ok("node", "create", "--driver", "ipmi", "--name", name, *args)

    def names(*args):
        # Every page (--limit 0); the API's own keys, as --fields shows them.
        found = bm.json("node", "list", "--limit", "0", "--fields", "name", *args)
        return sorted(n["name"] for n in found if n["name"].startswith("fields-"))

    assert names("--owner", "p-x") == ["fields-f1"]
    assert names("--lessee", "p-y") == ["fields-f1"]
    assert names("--description-contains", "gpu") == ["fields-f1"]
    assert names("--shards", "s-2") == ["fields-f2"]
    assert names("--shards", "s-1", "s-2") == ["fields-f1", "fields-f2"]
    assert "fields-child" not in names()  # as Ironic: children only when asked for
    assert "fields-child" in names("--include-children")
    assert names("--parent-node", "fields-parent") == ["fields-child"]
    child = bm.json("node", "show", "fields-child")["uuid"]
    children = bm.json("node", "children", "list", "fields-parent")
    assert children == {"children": [child]}
    shards = {s["name"]: s["count"] for s in bm.json("shard", "list")}
    assert shards["s-1"] == 1 and shards["s-2"] == 1


def test_traits(bm):
    bm.ok("node", "create", "--driver", "ipmi", "--name", "fields-traits")
    bm.ok("node", "add", "trait", "fields-traits", "CUSTOM_GPU", "HW_CPU_X86_AVX2")
    listed = bm.json("node", "trait", "list", "fields-traits")
    assert sorted(t["traits"] for t in listed) == ["CUSTOM_GPU", "HW_CPU_X86_AVX2"]
    assert bm.json("node", "show", "fields-traits")["traits"] == ["CUSTOM_GPU",
                                                                  "HW_CPU_X86_AVX2"]
    bm.ok("node", "remove", "trait", "fields-traits", "CUSTOM_GPU")
    assert [t["traits"] for t in bm.json("node", "trait", "list", "fields-traits")] == [
        "HW_CPU_X86_AVX2"]
    assert "Invalid trait 'lower_case'" in bm.fails("node", "add", "trait", "fields-traits",
                                                   "lower_case")
    assert "doesn't have a trait 'CUSTOM_NONE'" in bm.fails(
        "node", "remove", "trait", "fields-traits", "CUSTOM_NONE")
    bm.ok("node", "remove", "trait", "fields-traits", "--all")
    assert bm.json("node", "trait", "list", "fields-traits") == []


@pytest.mark.parametrize(("args", "words"), [
    (("driver", "list"), "Driver listing is not available through this service"),
    (("port", "group", "list"), "Port group management is not available through this service"),
    (("node", "history", "list", "fields-parent"), "Node history is not available"),
    (("node", "vif", "list", "fields-parent"), "VIF attachment is not available"),
])
def test_unserved_endpoints_are_refused_by_name(bm, parent, args, words):
    error = bm.fails(*args)
    assert words in error and "could not be found" not in error


def test_openstacksdk_fields_and_traits(clients_bin, server, client_home):
    sdk = Sdk(clients_bin, server, client_home)
    result = sdk.run(
        call("create_node", name="fields-sdk", driver="ipmi", owner="p-sdk",
             description="from the SDK", shard="s-sdk", boot_interface="pxe"),
        call("update_node", "fields-sdk", lessee="p-lease", is_retired=True,
             retired_reason="old"),
        call("add_node_trait", "fields-sdk", "CUSTOM_SDK"),
        call("set_node_traits", "fields-sdk", ["CUSTOM_A", "CUSTOM_B"]),
        call("remove_node_trait", "fields-sdk", "CUSTOM_A"),
        call("get_node", "fields-sdk"))
    created, shown = result.ok(0), result.ok(5)
    assert (created["owner"], created["description"], created["shard"],
            created["boot_interface"]) == ("p-sdk", "from the SDK", "s-sdk", "pxe")
    assert (shown["lessee"], shown["is_retired"], shown["retired_reason"]) == (
        "p-lease", True, "old")
    assert shown["traits"] == ["CUSTOM_B"]
