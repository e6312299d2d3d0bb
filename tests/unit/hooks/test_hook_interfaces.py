"""validate-interfaces and ports on realistic inventories, and on malformed ones."""

import copy

import pytest
from sqlalchemy import select

from inspection.db.models import Port
from inspection.hooks.base import InvalidInventoryError
from tests.unit.hooks.helpers import load_data, make_conf, make_ctx, make_node, run

DELL_PXE = "b0:7b:25:d3:0a:10"
DELL_ALL = ["eno1", "eno2", "ens1f0", "ens1f1", "idrac"]


def stored_ports(session, node):
    session.flush()
    return {p.address: p for p in session.scalars(select(Port).where(Port.node_id == node.id))}


@pytest.mark.parametrize(("add_ports", "valid", "ports"), [
    ("pxe", ["eno1"], {DELL_PXE}),
    ("active", ["eno1", "eno2", "idrac"],
     {DELL_PXE, "b0:7b:25:d3:0a:11", "b0:7b:25:d3:0a:1e"}),
    ("all", DELL_ALL, {"b0:7b:25:d3:0a:10", "b0:7b:25:d3:0a:11", "3c:fd:fe:a1:77:e0",
                       "3c:fd:fe:a1:77:e1", "b0:7b:25:d3:0a:1e"}),
    ("disabled", DELL_ALL, set()),
])
def test_add_ports_modes(session, tmp_path, add_ports, valid, ports):
    conf = make_conf(tmp_path, add_ports=add_ports)
    ctx = make_ctx(session, conf, load_data("uefi-dell-r640"))
    inventory_before = copy.deepcopy(ctx.inventory)
    run(ctx, ["validate-interfaces", "ports"])

    assert sorted(ctx.plugin_data["all_interfaces"]) == DELL_ALL  # lo is never there
    assert sorted(ctx.plugin_data["valid_interfaces"]) == valid
    assert sorted(ctx.plugin_data["macs"]) == sorted(
        ctx.plugin_data["all_interfaces"][n]["mac_address"] for n in valid)
    created = stored_ports(session, ctx.node)
    assert set(created) == ports
    for mac, port in created.items():
        assert port.pxe_enabled is (mac == DELL_PXE)
    for iface in ctx.plugin_data["valid_interfaces"].values():
        assert iface["is_added"] is (iface["mac_address"] in ports)
    assert ctx.inventory == inventory_before


def test_pxelinux_form_and_ipv6_zone(session, conf):
    ctx = make_ctx(session, conf, load_data("bios-vm-x86_64"))
    run(ctx, ["validate-interfaces", "ports"])
    ens3 = ctx.plugin_data["valid_interfaces"]["ens3"]
    assert ens3["pxe_enabled"] is True
    assert ens3["ipv6_address"] == "fe80::5054:ff:fe6e:1a01"
    assert list(stored_ports(session, ctx.node)) == ["52:54:00:6e:1a:01"]


def test_upper_case_and_dash_macs_are_normalised(session, conf):
    data = load_data("bios-vm-x86_64")
    data["inventory"]["interfaces"][1]["mac_address"] = "52-54-00-6E-1A-01"
    data["inventory"]["boot"]["pxe_interface"] = "52:54:00:6E:1A:01"
    ctx = make_ctx(session, conf, data)
    run(ctx, ["validate-interfaces", "ports"])
    assert ctx.plugin_data["macs"] == ["52:54:00:6e:1a:01"]
    assert stored_ports(session, ctx.node)["52:54:00:6e:1a:01"].pxe_enabled is True


def test_malformed_interface_records_are_skipped(session, tmp_path):
    data = load_data("uefi-dell-r640")
    ifaces = data["inventory"]["interfaces"]
    ifaces[2]["mac_address"] = "3c:fd:fe:a1:77"          # too short
    ifaces[3]["mac_address"] = "../../etc/passwd"      # never a path
    ifaces[4].pop("name")
    ifaces.append("not an interface")
    ctx = make_ctx(session, make_conf(tmp_path, add_ports="all"), data)
    run(ctx, ["validate-interfaces", "ports"])
    assert sorted(ctx.plugin_data["all_interfaces"]) == ["eno1", "eno2"]
    assert set(stored_ports(session, ctx.node)) == {DELL_PXE, "b0:7b:25:d3:0a:11"}


@pytest.mark.parametrize(("mutate", "message"), [
    (lambda inv: inv.pop("interfaces"), "no 'interfaces' list"),
    (lambda inv: inv.update(interfaces="eth0"), "'interfaces' must be a list"),
    (lambda inv: inv.update(interfaces=[{"name": "lo", "mac_address": "00:00:00:00:00:00",
                                         "ipv4_address": "127.0.0.1"}]),
     "no usable network interface"),
    (lambda inv: inv.update(interfaces=[{"name": "eth0", "mac_address": "zz"}]),
     "no usable network interface"),
    (lambda inv: inv.update(interfaces=[{"name": "eth0", "mac_address": "52:54:00:00:00:01"}],
                            boot={"pxe_interface": "52:54:00:00:00:02"}),
     "add_ports=pxe: the PXE interface 52:54:00:00:00:02 \\(boot.pxe_interface\\) is not "
     "among the usable interfaces \\(eth0\\); set \\[inspector\\]add_ports=all"),
])
def test_unusable_interfaces_fail_clearly(session, conf, mutate, message):
    data = load_data("bios-vm-x86_64")
    mutate(data["inventory"])
    ctx = make_ctx(session, conf, data)
    with pytest.raises(InvalidInventoryError, match=message) as exc:
        run(ctx, ["validate-interfaces"])
    assert str(exc.value).startswith("validate-interfaces hook: ")


@pytest.mark.parametrize("mode", ["pxe", "active"])
def test_no_interface_with_an_ip_says_why_and_what_to_change(session, tmp_path, caplog, mode):
    # Without boot.pxe_interface, add_ports=pxe falls back to the interfaces with an IP: the
    # warning says so, and the failure when none has one must say the same, not claim that
    # "no interface matches add_ports=pxe".
    data = load_data("bios-vm-x86_64")
    del data["inventory"]["boot"]["pxe_interface"]
    for iface in data["inventory"]["interfaces"]:
        iface["ipv4_address"] = iface["ipv6_address"] = None
    ctx = make_ctx(session, make_conf(tmp_path, add_ports=mode), data)
    with caplog.at_level("WARNING"), pytest.raises(InvalidInventoryError) as exc:
        run(ctx, ["validate-interfaces"])
    message = str(exc.value)
    assert f"[inspector]add_ports={mode}: " in message
    assert "ens3) has an IP address" in message
    assert "set [inspector]add_ports=all" in message
    if mode == "pxe":
        assert "does not say which interface PXE booted (boot.pxe_interface)" in message
        warning = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
        assert any("(boot.pxe_interface)" in w and "add_ports=pxe falls back to the "
                   "interfaces with an IP address" in w for w in warning), warning


def test_unknown_pxe_interface_falls_back_to_active_and_keeps_pxe(session, conf):
    data = load_data("uefi-dell-r640")
    del data["inventory"]["boot"]["pxe_interface"]
    ctx = make_ctx(session, conf, data, ports=[("3c:fd:fe:a1:77:e0", True)])
    run(ctx, ["validate-interfaces", "ports"])
    assert sorted(ctx.plugin_data["valid_interfaces"]) == ["eno1", "eno2", "idrac"]
    ports = stored_ports(session, ctx.node)
    # Without knowing the PXE NIC nothing loses PXE, including the existing port.
    assert all(p.pxe_enabled for p in ports.values())


@pytest.mark.parametrize(("keep_ports", "kept"), [
    ("all", {"11:22:33:44:55:66", DELL_PXE, "3c:fd:fe:a1:77:e0", "b0:7b:25:d3:0a:11"}),
    ("present", {DELL_PXE, "3c:fd:fe:a1:77:e0", "b0:7b:25:d3:0a:11"}),
    ("added", {DELL_PXE}),
])
def test_keep_ports(session, tmp_path, keep_ports, kept):
    conf = make_conf(tmp_path, keep_ports=keep_ports)
    existing = [("11:22:33:44:55:66", True), ("3c:fd:fe:a1:77:e0", True),
                ("b0:7b:25:d3:0a:11", False)]
    ctx = make_ctx(session, conf, load_data("uefi-dell-r640"), ports=existing)
    run(ctx, ["validate-interfaces", "ports"])
    assert set(stored_ports(session, ctx.node)) == kept
    assert {p.address for p in ctx.edit.ports} == kept


@pytest.mark.parametrize("update", [True, False])
def test_update_pxe_enabled(session, tmp_path, update):
    conf = make_conf(tmp_path, update_pxe_enabled=update)
    existing = [(DELL_PXE, False), ("b0:7b:25:d3:0a:11", True)]
    ctx = make_ctx(session, conf, load_data("uefi-dell-r640"), ports=existing)
    run(ctx, ["validate-interfaces", "ports"])
    ports = stored_ports(session, ctx.node)
    assert ports[DELL_PXE].pxe_enabled is update
    assert ports["b0:7b:25:d3:0a:11"].pxe_enabled is not update
    assert ctx.plugin_data["valid_interfaces"]["eno1"]["is_added"] is False


def test_existing_upper_case_port_is_recognised(session, conf):
    ctx = make_ctx(session, conf, load_data("uefi-dell-r640"),
                   ports=[(DELL_PXE.upper(), False)])
    run(ctx, ["validate-interfaces", "ports"])
    assert len(ctx.edit.ports) == 1
    assert ctx.edit.ports[0].pxe_enabled is True


def test_mac_of_another_node_is_left_alone(session, conf, caplog):
    other = make_node(session, ports=[(DELL_PXE, True)])
    ctx = make_ctx(session, conf, load_data("uefi-dell-r640"))
    run(ctx, ["validate-interfaces", "ports"])
    session.flush()  # no unique-constraint failure
    assert stored_ports(session, ctx.node) == {}
    assert set(stored_ports(session, other)) == {DELL_PXE}
    assert f"already a port of node {other.uuid}" in caplog.text


def test_client_id_goes_to_port_extra(session, tmp_path):
    data = load_data("aarch64-gigabyte")
    client_id = "ff:00:00:00:00:00:02:00:00:02:c9:00:e8:eb:d3:03:00:4f:90:2a"
    data["inventory"]["interfaces"][0]["client_id"] = client_id
    ctx = make_ctx(session, make_conf(tmp_path, add_ports="all"), data,
                   ports=[("e8:eb:d3:4f:90:2b", False)])
    run(ctx, ["validate-interfaces", "ports"])
    ports = stored_ports(session, ctx.node)
    assert ports["e8:eb:d3:4f:90:2a"].extra == {"client-id": client_id}
    assert ports["e8:eb:d3:4f:90:2b"].extra == {}


@pytest.mark.parametrize(("add_ports", "ports"), [
    ("all", {"aa:00:00:00:00:01", "aa:00:00:00:00:02", "aa:00:00:00:00:03"}),
    ("pxe", {"aa:00:00:00:00:01", "aa:00:00:00:00:02", "aa:00:00:00:00:03"}),
    ("active", {"aa:00:00:00:00:01"}),
])
def test_out_of_band_add_ports_without_ips(session, tmp_path, add_ports, ports):
    """An inventory read from a BMC has no IP and no PXE interface: ``pxe`` is every
    interface, ``active`` those whose link the BMC reports up."""
    conf = make_conf(tmp_path, add_ports=add_ports)
    node = make_node(session, inspect_interface="redfish")
    ctx = make_ctx(session, conf, {"inventory": {"interfaces": [
        {"name": "1", "mac_address": "aa:00:00:00:00:01", "has_carrier": True},
        {"name": "2", "mac_address": "aa:00:00:00:00:02", "has_carrier": False},
        {"name": "3", "mac_address": "aa:00:00:00:00:03"}]}}, node=node)
    run(ctx, ["validate-interfaces", "ports"])
    created = stored_ports(session, ctx.node)
    assert set(created) == ports
    assert all(port.pxe_enabled for port in created.values())


def test_out_of_band_active_without_a_link_says_so(session, tmp_path):
    conf = make_conf(tmp_path, add_ports="active")
    node = make_node(session, inspect_interface="redfish")
    ctx = make_ctx(session, conf, {"inventory": {"interfaces": [
        {"name": "1", "mac_address": "aa:00:00:00:00:01", "has_carrier": False}]}}, node=node)
    with pytest.raises(InvalidInventoryError, match="the BMC reports no link up"):
        run(ctx, ["validate-interfaces"])
