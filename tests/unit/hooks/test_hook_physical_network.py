"""physical-network: CIDR map (IPv4 and IPv6, last-colon split), MACs compared normalised."""

import pytest

from inspection.hooks.base import HookConfigError, load_hooks
from tests.unit.hooks.helpers import load_data, make_conf, make_ctx, run

CIDR_MAP = "192.0.2.0/24:physnet-prov,2001:db8:20::/64:physnet-storage,10.0.0.0/8:physnet-x"


def test_ipv4_and_ipv6_interfaces_get_their_physnet(session, tmp_path):
    conf = make_conf(tmp_path, add_ports="all", physical_network_cidr_map=CIDR_MAP)
    ctx = make_ctx(session, conf, load_data("uefi-dell-r640"))
    run(ctx, ["validate-interfaces", "ports", "physical-network"])
    by_mac = {p.address: p.physical_network for p in ctx.edit.ports}
    assert by_mac == {"b0:7b:25:d3:0a:10": "physnet-prov",
                      "b0:7b:25:d3:0a:11": "physnet-storage",
                      "3c:fd:fe:a1:77:e0": None, "3c:fd:fe:a1:77:e1": None,
                      "b0:7b:25:d3:0a:1e": None}


def test_first_matching_entry_wins_and_upper_case_port_matches(session, tmp_path):
    conf = make_conf(tmp_path, add_ports="disabled",
                     physical_network_cidr_map="192.0.2.0/25:first,192.0.2.0/24:second")
    ctx = make_ctx(session, conf, load_data("uefi-dell-r640"),
                   ports=[("B0:7B:25:D3:0A:10", True)])
    run(ctx, ["validate-interfaces", "ports", "physical-network"])
    assert ctx.edit.ports[0].physical_network == "first"


def test_unmapped_port_keeps_its_physnet(session, tmp_path):
    conf = make_conf(tmp_path, physical_network_cidr_map="198.51.100.0/24:other")
    ctx = make_ctx(session, conf, load_data("uefi-dell-r640"),
                   ports=[("b0:7b:25:d3:0a:10", True)])
    ctx.edit.ports[0].physical_network = "manual"
    run(ctx, ["validate-interfaces", "ports", "physical-network"])
    assert ctx.edit.ports[0].physical_network == "manual"


@pytest.mark.parametrize("entry", ["192.0.2.0/24", "192.0.2.0/24:", "nonsense:physnet",
                                   "2001:db8::/64", "192.0.2.0/33:physnet"])
def test_bad_cidr_map_is_refused_at_start(tmp_path, entry):
    conf = make_conf(tmp_path, physical_network_cidr_map=entry)
    with pytest.raises(HookConfigError, match="physical_network_cidr_map entry"):
        load_hooks(conf, ["validate-interfaces", "physical-network"])
