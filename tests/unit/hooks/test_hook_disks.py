"""root-device (root device hints, local_gb) and raid-device (new disk since last time)."""

import copy

import pytest

from inspection.hooks.base import InspectionHookError
from tests.unit.hooks.helpers import load_data, make_conf, make_ctx, run

GIB = 1024 ** 3


@pytest.mark.parametrize(("hints", "disk"), [
    ({"name": "/dev/sdb"}, "/dev/sdb"),
    ({"name": "sdb"}, "/dev/sdb"),
    ({"size": 446}, "/dev/sda"),
    ({"size": ">= 1000"}, "/dev/sdb"),
    ({"size": "<range-in> [1000 2000]"}, "/dev/nvme0n1"),
    ({"size": "<range-in> ( 1000 1490 ]"}, "/dev/nvme0n1"),
    ({"model": "dell ent nvme v2 agn mu u.2 1.6tb"}, "/dev/nvme0n1"),
    ({"model": "<in> NVMe"}, "/dev/nvme0n1"),
    ({"vendor": "DELL", "rotational": True}, "/dev/sdb"),
    ({"rotational": "false", "vendor": "dell"}, "/dev/sda"),
    ({"serial": "S4YPNE0R602695"}, "/dev/nvme0n1"),
    ({"wwn": "0x6d0946606f4a1f002b3a2c5e10b7a9c1"}, "/dev/sdb"),
    ({"hctl": "0:2:1:0"}, "/dev/sdb"),
    ({"by_path": "/dev/disk/by-path/pci-0000:3b:00.0-nvme-1"}, "/dev/nvme0n1"),
    ({"name": "<or> /dev/sdx <or> /dev/sdb"}, "/dev/sdb"),
    ({"serial": "s!= 006d0946606f4a1f002b3a2c1e0c8d3f2a", "vendor": "dell"}, "/dev/sdb"),
])
def test_root_device_hints_pick_the_disk(session, conf, hints, disk):
    data = load_data("uefi-dell-r640")
    ctx = make_ctx(session, conf, data, properties={"root_device": hints})
    run(ctx, ["root-device"])
    root = next(d for d in data["inventory"]["disks"] if d["name"] == disk)
    assert ctx.plugin_data["root_disk"]["name"] == disk
    assert ctx.node.properties["local_gb"] == root["size"] // GIB - 1
    assert ctx.plugin_data["local_gb"] == ctx.node.properties["local_gb"]


@pytest.mark.parametrize(("spacing", "local_gb"), [(True, 445), (False, 446)])
def test_ramdisk_root_disk_and_partitioning_spacing(session, tmp_path, spacing, local_gb):
    conf = make_conf(tmp_path, disk_partitioning_spacing=spacing)
    ctx = make_ctx(session, conf, load_data("uefi-dell-r640"))
    run(ctx, ["root-device"])
    assert ctx.plugin_data["root_disk"]["name"] == "/dev/sda"
    assert ctx.node.properties["local_gb"] == local_gb


def test_without_ramdisk_choice_the_smallest_disk_of_4_gib(session, conf):
    data = load_data("aarch64-gigabyte")  # root_disk is null in this callback
    data["inventory"]["disks"].insert(0, {"name": "/dev/sdz", "size": 2 * GIB})
    ctx = make_ctx(session, conf, data)
    run(ctx, ["root-device"])
    assert ctx.plugin_data["root_disk"]["name"] == "/dev/nvme0n1"
    assert ctx.node.properties["local_gb"] == 893


def test_skip_block_devices(session, conf):
    props = {"root_device": {"vendor": "dell"}, "skip_block_devices": [{"name": "/dev/sda"}]}
    ctx = make_ctx(session, conf, load_data("uefi-dell-r640"), properties=props)
    run(ctx, ["root-device"])
    assert ctx.plugin_data["root_disk"]["name"] == "/dev/sdb"


def test_diskless_node(session, conf):
    data = load_data("bios-vm-x86_64")
    data["inventory"]["disks"] = []
    del data["root_disk"]
    ctx = make_ctx(session, conf, data)
    run(ctx, ["root-device"])
    assert ctx.node.properties["local_gb"] == 0
    assert "root_disk" not in ctx.plugin_data


@pytest.mark.parametrize(("hints", "message"), [
    ({"serial": "nope"}, "no disk satisfies the root device hints"),
    ({"colour": "blue"}, "unknown root device hint\\(s\\) colour"),
    ({"size": "big"}, "size must be an integer"),
    ({"size": -1}, "size must be positive"),
    ({"size": "<range-in> 1 2"}, "not a range"),
    ({"rotational": "maybe"}, "rotational must be a boolean"),
    ({"model": ["a"]}, "model has an invalid value"),
    ("sda", "must be a non-empty object"),
])
def test_bad_or_unmatched_hints_fail_clearly(session, conf, hints, message):
    ctx = make_ctx(session, conf, load_data("uefi-dell-r640"),
                   properties={"root_device": hints})
    with pytest.raises(InspectionHookError, match=message) as exc:
        run(ctx, ["root-device"])
    assert str(exc.value).startswith("root-device hook: ")
    assert "local_gb" not in ctx.node.properties


def test_malformed_disks(session, conf):
    data = load_data("uefi-dell-r640")
    disks = data["inventory"]["disks"]
    disks[0]["size"] = "big"
    disks.append("garbage")
    ctx = make_ctx(session, conf, data, properties={"root_device": {"vendor": "dell"}})
    run(ctx, ["root-device"])  # the disk with a bad size cannot match a hint
    assert ctx.plugin_data["root_disk"]["name"] == "/dev/sdb"
    data["inventory"]["disks"] = "sda"
    ctx = make_ctx(session, conf, data)
    with pytest.raises(InspectionHookError, match="'disks' must be a list"):
        run(ctx, ["root-device"])


def _with_new_disk(data, serial="6d0946606f4a1f00ffff000000000001"):
    data = copy.deepcopy(data)
    data["inventory"]["disks"].append({"name": "/dev/sdc", "size": 900 * GIB,
                                       "serial": serial, "model": "PERC H740P Mini"})
    return data


def test_raid_device_sets_the_new_disk_as_root(session, conf):
    before = load_data("uefi-dell-r640")
    ctx = make_ctx(session, conf, _with_new_disk(before),
                   previous_inventory=before["inventory"])
    run(ctx, ["raid-device", "root-device"])
    assert ctx.node.properties["root_device"] == {
        "serial": "6d0946606f4a1f00ffff000000000001"}
    assert ctx.plugin_data["root_disk"]["name"] == "/dev/sdc"
    assert ctx.node.properties["local_gb"] == 899


@pytest.mark.parametrize("case", ["no previous", "no new disk", "two new disks",
                                  "already set", "previous malformed"])
def test_raid_device_leaves_the_node_alone(session, conf, case):
    before = load_data("uefi-dell-r640")
    after, previous, props = _with_new_disk(before), before["inventory"], {}
    if case == "no previous":
        previous = None
    elif case == "no new disk":
        after = before
    elif case == "two new disks":
        after = _with_new_disk(after, serial="another")
    elif case == "already set":
        props = {"root_device": {"name": "/dev/sda"}}
    else:
        previous = {"disks": "corrupted"}
    ctx = make_ctx(session, conf, after, properties=props, previous_inventory=previous)
    run(ctx, ["raid-device"])
    assert ctx.node.properties == props
