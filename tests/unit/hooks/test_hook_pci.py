"""accelerators and pci-devices: matching PCI ids, configuration checked at start."""

import json
import pathlib

import pytest
import yaml

from inspection.hooks.accelerators import DEFAULT_FILE
from inspection.hooks.base import HookConfigError, InspectionHookError, load_hooks
from tests.unit.hooks.helpers import load_data, make_conf, make_ctx, run

REPO = pathlib.Path(__file__).parents[3]


def test_shipped_sample_equals_the_built_in_list():
    sample = REPO / "etc" / "ironic-inspection" / "known-accelerators.yaml"
    assert yaml.safe_load(sample.read_text()) == yaml.safe_load(
        pathlib.Path(DEFAULT_FILE).read_text())


def test_accelerators_found_on_the_dell(session, conf):
    ctx = make_ctx(session, conf, load_data("uefi-dell-r640"))
    run(ctx, ["accelerators"])
    assert ctx.node.properties["accelerators"] == [{
        "vendor_id": "10de", "device_id": "1eb8", "type": "GPU",
        "device_info": "NVIDIA Corporation Tesla T4", "pci_address": "0000:d8:00.0"}]


def test_no_known_accelerator_gives_an_empty_list(session, conf):
    ctx = make_ctx(session, conf, load_data("aarch64-gigabyte"),
                   properties={"accelerators": [{"type": "GPU"}]})
    run(ctx, ["accelerators"])
    assert ctx.node.properties["accelerators"] == []


def test_no_pci_data_leaves_accelerators_alone(session, conf):
    ctx = make_ctx(session, conf, load_data("bios-vm-x86_64"),
                   properties={"accelerators": [{"type": "GPU"}]})
    run(ctx, ["accelerators"])
    assert ctx.node.properties["accelerators"] == [{"type": "GPU"}]


def test_pci_devices_in_the_inventory_and_odd_ids(session, tmp_path):
    known = tmp_path / "acc.yaml"
    known.write_text('pci_devices:\n  - {vendor_id: "0x1002", device_id: "740F", type: GPU}\n')
    data = load_data("bios-vm-x86_64")
    data["inventory"]["pci_devices"] = [
        {"vendor_id": "1002", "product_id": "740f", "bus": "0000:c1:00.0"},
        {"vendor_id": None, "product_id": "740f", "bus": "0000:c2:00.0"},
        "garbage"]
    ctx = make_ctx(session, make_conf(tmp_path, known_accelerators=str(known)), data)
    run(ctx, ["accelerators"])
    assert ctx.node.properties["accelerators"] == [
        {"vendor_id": "1002", "device_id": "740f", "type": "GPU",
         "pci_address": "0000:c1:00.0"}]


def test_malformed_pci_devices_list_fails_clearly(session, conf):
    data = load_data("uefi-dell-r640")
    data["pci_devices"] = "10de:1eb8"
    ctx = make_ctx(session, conf, data)
    with pytest.raises(InspectionHookError, match="'pci_devices' must be a list"):
        run(ctx, ["accelerators"])


@pytest.mark.parametrize(("content", "message"), [
    (None, "cannot read"),
    ("pci_devices: [", "not valid YAML"),
    ("devices: []", "must contain a 'pci_devices' list"),
    ("pci_devices:\n  - {vendor_id: '10de'}", "entry 0 .* needs vendor_id and device_id"),
])
def test_bad_known_accelerators_file_is_refused_at_start(tmp_path, content, message):
    path = tmp_path / "known.yaml"
    if content is not None:
        path.write_text(content)
    conf = make_conf(tmp_path, known_accelerators=str(path))
    with pytest.raises(HookConfigError, match=f"'accelerators': .*{message}"):
        load_hooks(conf, ["accelerators"])


ALIASES = [json.dumps({"vendor_id": "8086", "product_id": "1572", "name": "intel_x710"}),
           json.dumps({"vendor_id": "10DE", "product_id": "1eb8", "name": "nvidia_t4"}),
           json.dumps({"vendor_id": "15b3", "product_id": "1017", "name": "cx5"})]


def test_pci_devices_counted_into_capabilities(session, tmp_path):
    conf = make_conf(tmp_path, pci_device_alias=ALIASES)
    ctx = make_ctx(session, conf, load_data("uefi-dell-r640"),
                   properties={"capabilities": "boot_mode:uefi,cx5:2"})
    run(ctx, ["pci-devices"])
    # cx5 is gone from this machine: its stale count is removed.
    assert ctx.node.properties["capabilities"] == "boot_mode:uefi,intel_x710:2,nvidia_t4:1"


def test_pci_devices_without_data_changes_nothing(session, tmp_path, caplog):
    conf = make_conf(tmp_path, pci_device_alias=ALIASES)
    ctx = make_ctx(session, conf, load_data("bios-vm-x86_64"),
                   properties={"capabilities": "cx5:2"})
    run(ctx, ["pci-devices"])
    assert ctx.node.properties["capabilities"] == "cx5:2"
    assert "No PCI device information" in caplog.text


@pytest.mark.parametrize(("alias", "message"), [
    ("{oops", "not JSON"),
    ('{"vendor_id": "8086", "product_id": "1572"}', "exactly the keys"),
    ('{"vendor_id": "8086", "product_id": "1572", "name": "a", "x": 1}', "exactly the keys"),
    ('{"vendor_id": "80865", "product_id": "1572", "name": "a"}', "4 hex digits"),
    ('{"vendor_id": "8086", "product_id": "1572", "name": "a,b"}', "without ','"),
])
def test_bad_pci_alias_is_refused_at_start(tmp_path, alias, message):
    conf = make_conf(tmp_path, pci_device_alias=[alias])
    with pytest.raises(HookConfigError, match=message):
        load_hooks(conf, ["pci-devices"])
