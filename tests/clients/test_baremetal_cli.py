"""The ``baremetal`` CLI (python-ironicclient) with ``--os-auth-type none`` against our API.

One API process on PostgreSQL for the module, with ``[api]max_limit`` small enough that every
list crosses pages. Every filter is checked against the full list: the filtered answer must be
exactly the matching nodes, and a strict subset, so an ignored filter fails.
"""

import datetime
import json
import uuid

import pytest

from tests.clients.conftest import MAX_LIMIT
from tests.clients.runners import Baremetal, Ipa, Sdk, call, machine, wait_for

# Every test runs real client processes (about a second of imports each).
pytestmark = pytest.mark.slow

MISSING = "00000000-0000-4000-8000-00000000dead"


@pytest.fixture(scope="module")
def server(server_factory):
    return server_factory(postgresql=True)


@pytest.fixture(scope="module")
def bm(clients_bin, server, client_home):
    return Baremetal(clients_bin, server, client_home)


@pytest.fixture(scope="module")
def ipa(clients_bin, server, client_home):
    return Ipa(clients_bin, server, client_home)


def mac(n: int) -> str:
    """A MAC of this module's own range."""
    return f"52:54:00:c1:{n // 256:02x}:{n % 256:02x}"


@pytest.fixture(scope="module")
def sdk(clients_bin, server, client_home):
    return Sdk(clients_bin, server, client_home)


@pytest.fixture(scope="module")
def fleet(sdk):
    """Nodes that differ in every attribute the filters look at (name -> node)."""
    # Made with openstacksdk in one process: eleven `baremetal` processes would cost ~15 s.
    specs = {"fleet-a": ("fake-hardware", "rc-big", "rack1"),
             "fleet-b": ("fake-hardware", "rc-big", "rack2"),
             "fleet-c": ("fake-hardware", "rc-big", ""),
             "fleet-d": ("ipmi", "rc-big", ""),
             "fleet-e": ("ipmi", "rc-big", ""),
             "fleet-f": ("fake-hardware", "rc-small", "rack1"),
             "fleet-g": ("fake-hardware", "rc-small", "")}
    result = sdk.run(*(call("create_node", name=name, driver=driver, resource_class=rc,
                            conductor_group=group)
                       for name, (driver, rc, group) in specs.items()),
                     *(call("set_node_provision_state", name, "manage", wait=True, timeout=30)
                       for name in ("fleet-b", "fleet-c", "fleet-f")),
                     call("set_node_maintenance", "fleet-g"))
    nodes = {node["name"]: {"uuid": node["id"], **node}
             for node in (result.ok(i) for i in range(len(specs)))}
    for i in range(len(specs), len(specs) + 3):
        assert result.ok(i)["provision_state"] == "manageable"
    assert result.ok(len(specs) + 3)["is_maintenance"] is True
    return nodes


@pytest.fixture(scope="module")
def everything(bm, fleet):
    """Every node with the fields the filters look at (read once: the filters change nothing)."""
    return full_list(bm, "provision_state", "driver", "resource_class", "conductor_group",
                     "maintenance", "fault")


def full_list(bm: Baremetal, *fields: str) -> list[dict]:
    """Every node, all pages followed (``--limit 0``), with ``fields``."""
    return bm.json("node", "list", "--limit", "0", "--fields", "uuid", "name", *fields)


def assert_filtered(rows: list[dict], everything: list[dict], predicate) -> None:
    """``rows`` are exactly the rows of ``everything`` that match, and not all of them."""
    expected = sorted(row["uuid"] for row in everything if predicate(row))
    assert sorted(row["uuid"] for row in rows) == expected
    assert expected, "the filter must match something"
    assert len(expected) < len(everything), "the filter must leave something out"


def test_version_negotiation(bm):
    # Every command negotiates silently (the client asks for its latest, 1.115, and
    # settles on our maximum); a version out of range is refused with the server's range.
    refused = bm.fails("--os-baremetal-api-version", "1.200", "node", "list")
    assert "Supported version range is 1.1 to 1." in refused
    maximum = refused.rsplit("to 1.", 1)[1].split()[0]
    assert int(maximum) >= 96, refused  # inspection rules need 1.96 in the clients
    # A version older than the resource gets Ironic's answer.
    too_old = bm.fails("--os-baremetal-api-version", "1.50", "inspection", "rule", "list")
    assert "The API version does not allow inspection rules (HTTP 404)" in too_old


def test_node_crud_and_patch(bm):
    node = bm.json("node", "create", "--driver", "fake-hardware", "--name", "crud-1",
                   "--property", "cpus=4", "--property", "memory_mb=8192",
                   "--extra", "rack=r1", "--driver-info", "ipmi_address=192.0.2.50",
                   "--driver-info", "ipmi_password=secret", "--resource-class", "rc-crud")
    assert node["provision_state"] == "enroll"
    assert node["properties"] == {"cpus": 4, "memory_mb": 8192}  # the client parses values
    assert node["driver_info"]["ipmi_password"] == "******"
    shown = bm.json("node", "show", "crud-1")
    assert shown["uuid"] == node["uuid"] and shown["extra"] == {"rack": "r1"}

    bm.ok("node", "set", "crud-1", "--extra", "owner=team-a", "--property", "cpus=8",
          "--name", "crud-renamed", "--resource-class", "rc-crud-2")
    bm.ok("node", "unset", "crud-renamed", "--extra", "rack", "--property", "memory_mb")
    bm.ok("node", "maintenance", "set", "crud-renamed")
    shown = bm.json("node", "show", node["uuid"])
    assert shown["maintenance"] is True
    assert shown["name"] == "crud-renamed" and shown["resource_class"] == "rc-crud-2"
    assert shown["extra"] == {"owner": "team-a"} and shown["properties"] == {"cpus": 8}
    assert shown["driver_info"] == {"ipmi_address": "192.0.2.50", "ipmi_password": "******"}
    for stamp in (shown["created_at"], shown["updated_at"]):  # with a timezone, as Ironic's
        assert datetime.datetime.fromisoformat(stamp).utcoffset() == datetime.timedelta(0)

    fields = bm.json("node", "show", node["uuid"], "--fields", "uuid", "name")
    assert set(fields) == {"uuid", "name"}, fields

    bm.ok("node", "delete", "crud-renamed")
    assert f"Node {node['uuid']} could not be found" in bm.fails("node", "show", node["uuid"])


def test_port_crud_and_patch(bm, fleet):
    node = fleet["fleet-c"]
    port = bm.json("port", "create", mac(1), "--node", node["uuid"], "--pxe-enabled", "false",
                   "--extra", "slot=1", "--physical-network", "physnet1")
    assert port["pxe_enabled"] is False and port["node_uuid"] == node["uuid"]
    assert port["address"] == mac(1) and port["physical_network"] == "physnet1"

    bm.ok("port", "set", port["uuid"], "--pxe-enabled", "--extra", "switch=sw1",
          "--local-link-connection", "switch_id=aa:bb:cc:dd:ee:ff",
          "--local-link-connection", "port_id=Eth1/1")
    bm.ok("port", "unset", port["uuid"], "--extra", "slot", "--physical-network")
    shown = bm.json("port", "show", port["uuid"])
    assert shown["pxe_enabled"] is True and shown["extra"] == {"switch": "sw1"}
    assert shown["physical_network"] is None
    assert shown["local_link_connection"] == {"switch_id": "aa:bb:cc:dd:ee:ff",
                                              "port_id": "Eth1/1"}
    assert bm.json("port", "show", mac(1).upper(), "--address")["uuid"] == port["uuid"]

    duplicate = bm.fails("port", "create", mac(1), "--node", node["uuid"])
    assert mac(1) in duplicate and "(HTTP 409)" in duplicate

    bm.ok("port", "delete", port["uuid"])
    assert f"Port {port['uuid']} could not be found" in bm.fails("port", "show", port["uuid"])


@pytest.mark.parametrize("option, predicate", [
    (["--provision-state", "manageable"], lambda n: n["provision_state"] == "manageable"),
    (["--provision-state", "enroll"], lambda n: n["provision_state"] == "enroll"),
    (["--driver", "ipmi"], lambda n: n["driver"] == "ipmi"),
    (["--resource-class", "rc-small"], lambda n: n["resource_class"] == "rc-small"),
    # Five nodes over two pages of four: the next link must keep the filter.
    (["--resource-class", "rc-big"], lambda n: n["resource_class"] == "rc-big"),
    (["--conductor-group", "rack1"], lambda n: n["conductor_group"] == "rack1"),
    (["--maintenance"], lambda n: n["maintenance"]),
    (["--no-maintenance"], lambda n: not n["maintenance"]),
], ids=lambda value: "-".join(value) if isinstance(value, list) else "")
def test_node_list_filters(bm, everything, option, predicate):
    assert_filtered(bm.json("node", "list", "--limit", "0", *option), everything, predicate)


def test_filters_we_cannot_answer_are_refused(bm):
    # No port groups: an answer would ignore the filter.
    refused = bm.fails("port", "list", "--port-group", MISSING)
    assert "Unexpected arguments: " in refused and "(HTTP 400)" in refused


def test_node_list_filter_nothing_matches(bm, everything):
    # No node here has a fault (only conductors set one): the right answer is empty.
    assert everything and bm.json("node", "list", "--limit", "0", "--fault",
                                  "power failure") == []


def test_node_list_long_and_fields(bm, fleet, everything):
    long = bm.json("node", "list", "--long", "--limit", "0")
    by_name = {row["name"]: row for row in long}
    assert by_name["fleet-d"]["driver"] == "ipmi"
    assert by_name["fleet-a"]["conductor_group"] == "rack1"
    assert by_name["fleet-a"]["resource_class"] == "rc-big"
    assert len(long) == len(everything) > MAX_LIMIT

    filtered = bm.json("node", "list", "--long", "--limit", "0", "--resource-class", "rc-big")
    assert sorted(row["name"] for row in filtered) == [
        "fleet-a", "fleet-b", "fleet-c", "fleet-d", "fleet-e"]


def test_node_list_pagination(bm, fleet, everything):
    assert len(everything) > MAX_LIMIT
    # Without --limit the client shows one page of [api]max_limit nodes, as with Ironic.
    page = bm.json("node", "list")
    assert [n["uuid"] for n in page] == [n["uuid"] for n in everything[:MAX_LIMIT]]
    # Ironic's columns; what we do not store shows as Ironic shows an unset value.
    assert {(n["instance_uuid"], n["power_state"]) for n in page} == {(None, None)}
    assert [n["uuid"] for n in bm.json("node", "list", "--limit", "2")] == [
        n["uuid"] for n in everything[:2]]
    after = bm.json("node", "list", "--limit", "3", "--marker", everything[1]["uuid"])
    assert [n["uuid"] for n in after] == [n["uuid"] for n in everything[2:5]]

    by_name = bm.json("node", "list", "--limit", "0", "--sort", "name:desc")
    names = [n["name"] for n in by_name]
    assert names == sorted(names, reverse=True) and len(names) == len(everything)
    fleet_names = [n for n in names if n.startswith("fleet-")]
    assert fleet_names == sorted(fleet, reverse=True)

    by_state = bm.json("node", "list", "--limit", "0", "--sort", "provision_state",
                       "--fields", "uuid", "provision_state")
    states = [n["provision_state"] for n in by_state]
    assert states == sorted(states)

    unknown = bm.fails("node", "list", "--marker", MISSING)  # as Ironic: 404 for the marker
    assert f"Node {MISSING} could not be found" in unknown and "(HTTP 404)" in unknown


def test_port_list_filters_and_pages(bm, sdk, fleet):
    # fleet-a's ports fill more than one page: the next link must keep the filter.
    owners = ("fleet-a",) * (MAX_LIMIT + 1) + ("fleet-b", "fleet-g")
    made = sdk.run(*(call("create_port", node_id=fleet[name]["uuid"], address=mac(100 + i))
                     for i, name in enumerate(owners)))
    assert [made.ok(i)["address"] for i in range(len(owners))] == [
        mac(100 + i) for i in range(len(owners))]
    everything = bm.json("port", "list", "--limit", "0", "--fields", "uuid", "address",
                         "node_uuid")
    assert len(everything) > MAX_LIMIT

    of_a = bm.json("port", "list", "--limit", "0", "--node", "fleet-a")
    assert_filtered(of_a, everything, lambda p: p["node_uuid"] == fleet["fleet-a"]["uuid"])
    of_b = bm.json("port", "list", "--node", fleet["fleet-b"]["uuid"])
    assert_filtered(of_b, everything, lambda p: p["node_uuid"] == fleet["fleet-b"]["uuid"])
    one = bm.json("port", "list", "--address", mac(101))
    assert_filtered(one, everything, lambda p: p["address"] == mac(101))

    long = bm.json("port", "list", "--long", "--limit", "0", "--node", "fleet-a")
    assert sorted(p["address"] for p in long) == [mac(100 + i) for i in range(MAX_LIMIT + 1)]
    assert all(p["pxe_enabled"] is True for p in long)
    assert [p["uuid"] for p in bm.json("port", "list", "--limit", "2")] == [
        p["uuid"] for p in everything[:2]]


def test_provision_states_with_wait_and_inventory(bm, ipa, server, fleet, tmp_path):
    node = bm.json("node", "create", "--driver", "fake-hardware", "--name", "prov-1",
                   "--driver-info", "ipmi_address=192.0.2.60")
    bm.ok("port", "create", mac(200), "--node", node["uuid"])
    refused = bm.fails("node", "inspect", "prov-1")
    assert (f'The requested action "inspect" can not be performed on node "{node["uuid"]}" '
            f'while it is in state "enroll".') in refused and "(HTTP 400)" in refused

    bm.ok("node", "manage", "prov-1", "--wait", "30")  # exits 0 once manageable

    bm.ok("node", "inspect", "prov-1")
    assert bm.json("node", "show", "prov-1")["provision_state"] == "inspect wait"
    bm.ok("node", "abort", "prov-1")
    aborted = bm.json("node", "show", "prov-1")
    assert aborted["provision_state"] == "inspect failed"

    # inspect --wait returns once the ramdisk's data made the node manageable again.
    waiting = bm.popen("node", "inspect", "prov-1", "--wait", "60")
    try:
        wait_for(lambda: server.http("GET", f"/v1/nodes/{node['uuid']}").json()
                 ["provision_state"] == "inspect wait", what="inspect wait")
        result = ipa.inspect(machine([mac(200)], bmc="192.0.2.60", serial="SN-PROV"))
        assert result["error"] is None and result["uuid"] == node["uuid"]
        _, err = waiting.communicate(timeout=60)
    finally:
        if waiting.poll() is None:
            waiting.kill()
            waiting.wait()
    assert waiting.returncode == 0, err
    shown = bm.json("node", "show", "prov-1")
    assert shown["provision_state"] == "manageable" and shown["last_error"] is None

    stored = json.loads(bm.ok("node", "inventory", "save", "prov-1"))
    assert stored["inventory"]["system_vendor"]["serial_number"] == "SN-PROV"
    assert stored["inventory"]["interfaces"][0]["mac_address"] == mac(200)
    assert stored["inventory"]["cpu"]["count"] == 8
    saved = tmp_path / "inventory.json"
    bm.ok("node", "inventory", "save", "prov-1", "--file", str(saved))
    assert json.loads(saved.read_text()) == stored

    missing = bm.fails("node", "inventory", "save", "fleet-a")  # never inspected
    assert "(HTTP 404)" in missing and "Not Found (HTTP 404)" not in missing


def test_error_messages_are_ours(bm):
    bad_port = bm.fails("port", "create", mac(300), "--node", MISSING)
    assert MISSING in bad_port and "Bad Request (HTTP 400)" not in bad_port
    rule = bm.fails("inspection", "rule", "show", MISSING)
    assert MISSING in rule and "(HTTP 404)" in rule
    not_allowed = bm.fails("node", "set", "no-such-node", "--extra", "a=b")
    assert "Node no-such-node could not be found" in not_allowed


RULE_ACTIONS = [{"op": "set-attribute", "args": ["/extra/rule_ran", "yes"]},
                {"op": "set-attribute", "args": ["/extra/second", "yes"]}]
RULE_CONDITIONS = [{"op": "eq", "args": ["{inventory[cpu][count]}", 8]}]


def test_inspection_rules_crud_and_patch(bm):
    # Client bug: `rule create --priority 20` sends "20", a string; Ironic refuses it too.
    refused = bm.fails("inspection", "rule", "create", "--priority", "20",
                       "--conditions", "[]", "--actions", json.dumps(RULE_ACTIONS))
    assert "'20'" in refused or "priority" in refused  # Ironic: "'20' is not of type..."
    assert "(HTTP 400)" in refused and "Bad Request (HTTP 400)" not in refused
    # Client bug: `--sensitive true` sends "true", a string; Ironic refuses it too.
    sensitive = bm.fails("inspection", "rule", "create", "--sensitive", "true",
                         "--actions", json.dumps(RULE_ACTIONS))
    assert "sensitive" in sensitive and "(HTTP 400)" in sensitive
    created = bm.json("inspection", "rule", "create", "--description", "cli rule",
                      "--phase", "main", "--conditions", json.dumps(RULE_CONDITIONS),
                      "--actions", json.dumps(RULE_ACTIONS))
    rule = created["uuid"]
    assert uuid.UUID(rule) and created["priority"] == 0 and created["phase"] == "main"

    listed = {r["uuid"]: r for r in bm.json("inspection", "rule", "list")}
    assert listed[rule]["description"] == "cli rule"
    long = {r["uuid"]: r for r in bm.json("inspection", "rule", "list", "--long")}
    assert long[rule]["actions"] == RULE_ACTIONS
    assert long[rule]["conditions"] == RULE_CONDITIONS

    bm.ok("inspection", "rule", "set", rule, "--description", "renamed", "--priority", "7")
    bm.ok("inspection", "rule", "unset", rule, "--description")
    shown = bm.json("inspection", "rule", "show", rule)
    assert shown["priority"] == 7 and shown["description"] is None
    assert shown["actions"] == RULE_ACTIONS

    # Client bugs (docs/api.md, "Known client bugs"): Ironic refuses these requests too.
    unset_action = bm.fails("inspection", "rule", "unset", rule, "--action", "0")
    assert "member 'action' not found" in unset_action and "(HTTP 400)" in unset_action
    assert bm.json("inspection", "rule", "show", rule)["actions"] == RULE_ACTIONS
    delete_all = bm.fails("inspection", "rule", "delete", "all")
    assert "Failed to delete rule all" in delete_all

    bm.ok("inspection", "rule", "delete", rule)  # so "delete all" left it in place
    gone = bm.fails("inspection", "rule", "show", rule)
    assert rule in gone and "(HTTP 404)" in gone
