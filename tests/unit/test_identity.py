"""Hardware identity: which inventory values identify a machine, and which never do."""

import pathlib
import re

import pytest

from inspection import identity
from inspection.db.models import Node


def inventory(serial="8XJ4T53", manufacturer="Dell Inc.", product="PowerEdge R640",
              **more):
    vendor = {"serial_number": serial, "manufacturer": manufacturer, "product_name": product}
    vendor.update(more.pop("vendor", {}))
    return {"system_vendor": vendor, **more}


@pytest.mark.parametrize("serial", [
    "", "   ", "To Be Filled By O.E.M.", "to be filled by o.e.m.", "System Serial Number",
    "DEFAULT STRING", "0123456789", "Not Specified", "N/A", "None", "0", "00000000",
    "XXXXXXXX", "........", None, 12345, ["8XJ4T53"], "x" * 300])
def test_placeholder_serials_identify_nothing(serial):
    assert "serial" not in identity.from_inventory(inventory(serial))


def test_serial_is_scoped_by_manufacturer_and_product_without_case_or_blanks():
    assert identity.from_inventory(inventory()) == {
        "serial": "dell inc.|poweredge r640|8xj4t53"}
    assert identity.from_inventory(inventory(" 8xj4t53 ", "DELL   INC.", "PowerEdge  R640")) \
        == identity.from_inventory(inventory())
    assert identity.from_inventory(inventory(product="PowerEdge R650")) \
        != identity.from_inventory(inventory())


def test_placeholder_manufacturer_and_product_count_as_unknown():
    keys = identity.from_inventory(inventory(manufacturer="To Be Filled By O.E.M.",
                                             product="System Product Name"))
    assert keys == {"serial": "||8xj4t53"}


def test_system_uuid_and_bmc_mac_where_present_and_real():
    keys = identity.from_inventory(inventory(
        vendor={"system_uuid": "4C4C4544-0058-4A10-8034-B8C04F543533"},
        bmc_mac="D0-94-66-2B-6C-00"))
    assert keys["system_uuid"] == "4c4c4544-0058-4a10-8034-b8c04f543533"
    assert keys["bmc_mac"] == "d0:94:66:2b:6c:00"
    for fake in ({"system_uuid": "03000200-0400-0500-0006-000700080009"},
                 {"system_uuid": "00000000-0000-0000-0000-000000000000"},
                 {"system_uuid": "not a uuid"}):
        assert "system_uuid" not in identity.from_inventory(inventory(vendor=fake))
    for mac in ("00:00:00:00:00:00", "ff:ff:ff:ff:ff:ff", "nonsense", None):
        assert "bmc_mac" not in identity.from_inventory(inventory(bmc_mac=mac))


@pytest.mark.parametrize("data", [None, [], "text", {}, {"system_vendor": "Dell"}])
def test_odd_inventories_have_no_identity(data):
    assert identity.from_inventory(data) == {}


def test_record_keeps_other_extra_keys_and_drops_a_stale_identity():
    node = Node(extra={"owner_tag": "x", identity.EXTRA_KEY: {"serial": "old"}})
    identity.record(node, inventory())
    assert node.extra == {"owner_tag": "x",
                          identity.EXTRA_KEY: {"serial": "dell inc.|poweredge r640|8xj4t53"}}
    identity.record(node, inventory(serial="Default string"))
    assert node.extra == {"owner_tag": "x"}


def test_the_documented_placeholder_list_is_the_one_in_the_code():
    doc = (pathlib.Path(__file__).parents[2] / "docs" / "discovery.md").read_text()
    section = doc.split("### Placeholder values identify nothing", 1)[1]
    values, uuids = section.split("; the empty string", 1)
    uuids = uuids.split("System UUIDs that many boards share", 1)[1].split("; and BMC", 1)[0]
    assert set(re.findall(r"`([^`]+)`", values.split("never used:", 1)[1])) \
        == identity.PLACEHOLDERS
    assert set(re.findall(r"`([^`]+)`", uuids)) == identity.PLACEHOLDER_UUIDS
