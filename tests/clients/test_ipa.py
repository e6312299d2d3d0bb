"""ironic-python-agent's own inspection (collectors + ``call_inspector``) posting to us.

The payload is built by IPA 13's ``default`` collector from IPA's hardware data structures
(see ipa_script.py); the nodes are set up and checked with openstacksdk, as an operator would.
"""

import pytest

from tests.clients.runners import Ipa, Sdk, call, machine, wait_for

# Every test runs real client processes (about a second of imports each).
pytestmark = pytest.mark.slow

BMC = "192.0.2.99"
#: An InfiniBand NIC: IPA reports its 20-byte hardware address, which is no usable MAC.
IB_ADDRESS = "a0:00:02:20:fe:80:00:00:00:00:00:00:00:02:c9:03:00:0b:a1:b1"


@pytest.fixture(scope="module")
def server(server_factory):
    return server_factory(conf={"auto_discovery": {"enabled": True}})


@pytest.fixture(scope="module")
def sdk(clients_bin, server, client_home):
    return Sdk(clients_bin, server, client_home)


@pytest.fixture(scope="module")
def ipa(clients_bin, server, client_home):
    return Ipa(clients_bin, server, client_home)


def mac(n: int) -> str:
    return f"52:54:00:1a:00:{n:02x}"


def waiting_node(sdk: Sdk, name: str, macs: list[str], **attrs) -> dict:
    """A node with ports for ``macs``, put in ``inspect wait`` through the SDK."""
    node = sdk.call("create_node", name=name, driver="fake-hardware", **attrs)
    result = sdk.run(call("get_node", name),
                     *(call("create_port", node_id=node["id"], address=m) for m in macs),
                     call("set_node_provision_state", name, "manage", wait=True, timeout=30),
                     call("set_node_provision_state", name, "inspect"),
                     call("wait_for_nodes_provision_state", [name], "inspect wait",
                          timeout=30))
    assert result.ok(len(macs) + 3)[0]["provision_state"] == "inspect wait"
    return node


def test_known_node_found_by_mac(sdk, ipa):
    node = waiting_node(sdk, "ipa-known", [mac(1)])
    posted = ipa.inspect(machine([mac(2), mac(1)], bmc="192.0.2.98", serial="SN-KNOWN"))
    assert posted["error"] is None, posted["error"]
    assert posted["uuid"] == node["id"]
    # IPA's own collector shaped it: root disk guessed, PXE NIC from BOOTIF.
    assert posted["sent"]["root_disk"]["name"] == "/dev/sda"
    assert posted["sent"]["boot_interface"] == "01-" + mac(2).replace(":", "-")

    result = sdk.run(call("wait_for_nodes_provision_state", ["ipa-known"], "manageable",
                          timeout=60),
                     call("get_node_inventory", "ipa-known"))
    assert result.ok(0)[0]["last_error"] is None
    stored = result.ok(1)
    assert stored["inventory"] == posted["sent"]["inventory"]


def test_unknown_machine_is_discovered(sdk, ipa, server):
    posted = ipa.inspect(machine([mac(0x10), mac(0x11)], bmc="192.0.2.97", serial="SN-NEW"))
    assert posted["error"] is None, posted["error"]
    uuid = posted["uuid"]
    # Processing goes on after the 202: it is done once the inventory is stored.
    wait_for(lambda: server.http("GET", f"/v1/nodes/{uuid}/inventory").ok, what="inventory")
    result = sdk.run(call("get_node", uuid), call("ports", node_id=uuid, details=True),
                     call("get_node_inventory", uuid))
    assert result.ok(0)["provision_state"] == "enroll" and result.ok(0)["last_error"] is None
    # [inspector]add_ports = pxe (the default): one port, the boot interface's, as in Ironic.
    assert [p["address"] for p in result.ok(1)] == [mac(0x10)]
    assert result.ok(2)["inventory"] == posted["sent"]["inventory"]
    # auto_discovered is ours: the SDK has no attribute for it.
    assert server.http("GET", f"/v1/nodes/{uuid}").json()["auto_discovered"] is True


def test_machine_not_waiting_gets_the_generic_404(sdk, ipa):
    node = sdk.call("create_node", name="ipa-idle", driver="fake-hardware")
    sdk.call("create_port", node_id=node["id"], address=mac(0x20))
    posted = ipa.inspect(machine([mac(0x20)]))
    assert posted["uuid"] is None
    assert posted["error"].startswith("error 404: ")
    assert "could not be found" in posted["error"]  # one message, whatever the reason


def test_bmc_only_inventory_is_looked_up_by_bmc(sdk, ipa):
    node = waiting_node(sdk, "ipa-bmc", [], driver_info={"ipmi_address": BMC})
    described = machine([IB_ADDRESS], bmc=BMC, serial="SN-IB")
    described["interfaces"][0]["name"] = "ib0"
    posted = ipa.inspect(described)
    assert posted["sent"]["inventory"]["bmc_address"] == BMC
    assert posted["error"] is None, posted["error"]
    assert posted["uuid"] == node["id"]
    # As in Ironic 39: found by its BMC, then refused by validate-interfaces (no usable NIC).
    result = sdk.run(call("wait_for_nodes_provision_state", ["ipa-bmc"], "inspect failed",
                          timeout=60))
    assert "interface" in result.ok(0)[0]["last_error"]
