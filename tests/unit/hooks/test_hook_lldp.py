"""parse-lldp and local-link-connection: Dell LLDP TLVs, bad hex, undecodable TLVs."""

import pytest

from inspection.hooks import lldp
from tests.unit.hooks.helpers import load_data, make_conf, make_ctx, run

DELL_PXE = "b0:7b:25:d3:0a:10"


def test_parse_lldp_on_the_dell(session, conf):
    ctx = make_ctx(session, conf, load_data("uefi-dell-r640"))
    run(ctx, ["parse-lldp"])
    parsed = ctx.plugin_data["parsed_lldp"]
    assert sorted(parsed) == ["eno1", "eno2"]  # empty TLV lists give nothing
    eno1 = parsed["eno1"]
    assert eno1["switch_chassis_id"] == "88:5a:92:ec:54:00"
    assert eno1["switch_port_id"] == "Ethernet1/10"
    assert eno1["switch_system_name"] == "leaf-a-r12.example.net"
    assert eno1["switch_port_description"] == "server-r12-u08 eno1"
    assert eno1["switch_capabilities_enabled"] == ["Bridge", "Router"]
    assert eno1["switch_mgmt_addresses"] == ["192.0.2.250"]
    assert eno1["switch_port_untagged_vlan_id"] == 100
    assert eno1["switch_port_vlans"] == [{"id": 100, "name": "provision"},
                                         {"id": 200, "name": "tenant"}]
    assert eno1["switch_port_mtu"] == 9216
    assert eno1["switch_port_link_aggregation_enabled"] is True
    assert parsed["eno2"]["switch_port_vlans"] == [{"id": 300, "name": "storage"}]


def test_lldp_raw_in_plugin_data_wins(session, conf):
    data = load_data("bios-vm-x86_64")
    data["lldp_raw"] = {"ens3": [[1, "04aabbccddeeff"], [2, "0545746831"],
                                 [5, "737731"]]}
    ctx = make_ctx(session, conf, data)
    run(ctx, ["parse-lldp"])
    assert ctx.plugin_data["parsed_lldp"] == {"ens3": {
        "switch_chassis_id": "aa:bb:cc:dd:ee:ff", "switch_port_id": "Eth1",
        "switch_system_name": "sw1"}}


@pytest.mark.parametrize(("tlvs", "warning"), [
    ([[5, "not hex!"]], "not hexadecimal"),
    ([[5, "zz"]], "not hexadecimal"),
    ([[5, "ff"]], "not valid UTF-8"),
    ([[1, "04aabb"]], "MAC address needs 6 bytes"),
    ([[7, "0014"]], "system capabilities needs 4 bytes"),
    ([[8, "ff"]], "management address TLV too short"),
    ([[127, "0080"]], "organisationally specific TLV too short"),
    ([[127, "0080c203006407"]], "VLAN name TLV too short"),
    ([["5", "737731"]], "not a [type, hex value] pair"),
    ([[5]], "not a [type, hex value] pair"),
    ("0105", "must be a list"),
])
def test_undecodable_tlvs_are_warnings(session, conf, caplog, tlvs, warning):
    data = load_data("bios-vm-x86_64")
    good = [[2, "0545746831"]]
    data["inventory"]["interfaces"][1]["lldp"] = tlvs + good if isinstance(tlvs, list) else tlvs
    ctx = make_ctx(session, conf, data)
    run(ctx, ["parse-lldp"])
    assert warning in caplog.text
    if isinstance(tlvs, list):
        # The rest of the interface's TLVs are still decoded.
        assert ctx.plugin_data["parsed_lldp"]["ens3"]["switch_port_id"] == "Eth1"


def test_first_tlv_wins_and_addresses_decode():
    info = lldp.parse_tlvs([
        [1, "0501c0000201"],                       # chassis id: IPv4 address 192.0.2.1
        [1, "04aabbccddeeff"],                     # a second chassis id is ignored
        [2, "04" + "02" + "20010db8" + "00" * 11 + "01"],  # port id: IPv6 2001:db8::1
        [8, "110220010db80000000000000000000000050200000001" + "00"],
    ])
    assert info.warnings == []
    assert info.fields == {"switch_chassis_id": "192.0.2.1", "switch_port_id": "2001:db8::1",
                           "switch_mgmt_addresses": ["2001:db8::5"]}
    assert info.chassis_id_is_mac is False


def test_local_link_connection_on_the_dell(session, tmp_path):
    conf = make_conf(tmp_path, add_ports="all")
    existing = [("b0:7b:25:d3:0a:11", False)]
    ctx = make_ctx(session, conf, load_data("uefi-dell-r640"), ports=existing)
    ctx.edit.ports[0].local_link_connection = {"switch_info": "set by operator"}
    run(ctx, ["validate-interfaces", "ports", "local-link-connection"])
    session.flush()
    by_mac = {p.address: p for p in ctx.edit.ports}
    assert by_mac[DELL_PXE].local_link_connection == {
        "switch_id": "88:5a:92:ec:54:00", "port_id": "Ethernet1/10",
        "switch_info": "leaf-a-r12.example.net"}
    assert by_mac["b0:7b:25:d3:0a:11"].local_link_connection == {
        "switch_id": "88:5a:92:ec:61:00", "port_id": "Ethernet1/10",
        "switch_info": "set by operator"}
    assert by_mac["3c:fd:fe:a1:77:e0"].local_link_connection == {}


def test_local_link_connection_with_bad_hex_is_a_warning(session, conf, caplog):
    data = load_data("bios-vm-x86_64")
    data["inventory"]["interfaces"][1]["lldp"] = [[1, "04aabbccddeeff"], [2, "GG"]]
    ctx = make_ctx(session, conf, data)
    run(ctx, ["validate-interfaces", "ports", "local-link-connection"])
    assert ctx.edit.ports[0].local_link_connection == {"switch_id": "aa:bb:cc:dd:ee:ff"}
    assert "not hexadecimal" in caplog.text


def test_non_mac_chassis_id_is_not_a_switch_id(session, conf):
    data = load_data("bios-vm-x86_64")
    data["inventory"]["interfaces"][1]["lldp"] = [[1, "07" + b"sw-chassis".hex()],
                                                  [2, "0545746831"]]
    ctx = make_ctx(session, conf, data)
    run(ctx, ["validate-interfaces", "ports", "local-link-connection"])
    assert ctx.edit.ports[0].local_link_connection == {"port_id": "Eth1"}
