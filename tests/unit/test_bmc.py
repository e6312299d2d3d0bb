"""BMC address extraction and resolution (Ironic's BMC cache examples) and reported values."""

import pytest

from inspection import bmc

NAMES = {"bmc1.example.test": ["192.0.2.77", "2001:DB8::77", "127.0.1.1"],
         "loop.example.test": ["127.0.0.1", "::1"]}


def fake_resolver(name):
    """A resolver the test controls: unknown names resolve to nothing."""
    return NAMES.get(name, [])


@pytest.mark.parametrize(("driver_info", "expected"), [
    ({"ipmi_address": "127.0.0.1"}, []),
    ({"redfish_address": "https://192.0.2.1/redfish"}, ["192.0.2.1"]),
    ({"redfish_address": "https://[2001:db8::42]/redfish"}, ["2001:db8::42"]),
    ({"redfish_address": "https://[2001:DB8:0::42]:8443/redfish/v1"}, ["2001:db8::42"]),
    ({"ipmi_address": "[2001:db8::5]"}, ["2001:db8::5"]),
    ({"ipmi_address": "192.0.2.9", "redfish_address": "http://192.0.2.9:8000"}, ["192.0.2.9"]),
    ({"ipmi_address": "bmc1.example.test"},
     ["192.0.2.77", "2001:db8::77", "bmc1.example.test"]),
    ({"ipmi_address": "https://BMC1.example.test./redfish"},
     ["192.0.2.77", "2001:db8::77", "bmc1.example.test"]),
    ({"ipmi_address": "loop.example.test"}, []),
    ({"ipmi_address": "unresolvable.example.test"}, ["unresolvable.example.test"]),
    ({"ipmi_address": "0.0.0.0", "drac_address": "::"}, []),
    # Not BMC locations: IPMB hex addresses, non-strings, empty values, other keys.
    ({"ipmi_target_address": "0x82", "ipmi_transit_address": "10.1",
      "ipmi_username": "192.0.2.5", "ipmi_port": 623}, []),
    ({"ipmi_address": None, "redfish_address": "", "irmc_address": 42}, []),
    ({"ipmi_address": "not a host/../name"}, []),
    ({}, []),
    (None, []),
])
def test_bmc_addresses(driver_info, expected):
    assert bmc.bmc_addresses(driver_info, fake_resolver) == sorted(expected)


def test_localhost_through_the_system_resolver_is_excluded():
    assert bmc.bmc_addresses({"ipmi_address": "localhost"}) == []


def test_system_resolver_on_a_literal_ip():
    assert bmc.system_resolver("192.0.2.3") == ["192.0.2.3"]


@pytest.mark.parametrize(("values", "expected"), [
    (("192.0.2.1", None), ["192.0.2.1"]),
    (("0.0.0.0", "::/0"), []),
    (("192.0.2.1", "2001:DB8::1"), ["192.0.2.1", "2001:db8::1"]),
    (("127.0.0.1", "::1", "", None, "garbage", 5), []),
    (("192.0.2.1", "192.0.2.1"), ["192.0.2.1"]),
])
def test_reported_addresses(values, expected):
    assert bmc.reported_addresses(*values) == expected


def test_cached_addresses_tolerates_foreign_values():
    info = {bmc.CACHE_KEY: ["2001:DB8:0::1", "Name.Example", 3, None]}
    assert bmc.cached_addresses(info) == {"2001:db8::1", "name.example"}
    assert bmc.cached_addresses({bmc.CACHE_KEY: "192.0.2.1"}) == set()
    assert bmc.cached_addresses(None) == set()
