"""architecture, memory, cpus, boot-mode and cpu-capabilities: realistic and malformed input."""

import pytest

from inspection.hooks.base import InspectionHookError
from tests.unit.hooks.helpers import load_data, make_conf, make_ctx, run

FIXTURES = ["bios-vm-x86_64", "uefi-dell-r640", "aarch64-gigabyte"]


@pytest.mark.parametrize(("fixture", "expected"), [
    ("bios-vm-x86_64", {"cpu_arch": "x86_64", "memory_mb": 4096, "cpus": 2,
                        "capabilities": "boot_mode:bios,cpu_hugepages:true"}),
    ("uefi-dell-r640", {"cpu_arch": "x86_64", "memory_mb": 196608, "cpus": 80,
                        "capabilities": "boot_mode:uefi,cpu_vt:true,cpu_aes:true,"
                                        "cpu_hugepages:true,cpu_hugepages_1g:true,cpu_txt:true"}),
    ("aarch64-gigabyte", {"cpu_arch": "aarch64", "memory_mb": 262144, "cpus": 80,
                          "capabilities": "boot_mode:uefi,cpu_aes:true"}),
])
def test_properties_from_realistic_inventories(session, conf, fixture, expected):
    ctx = make_ctx(session, conf, load_data(fixture))
    run(ctx, ["architecture", "memory", "cpus", "boot-mode", "cpu-capabilities"])
    session.flush()
    assert ctx.node.properties == expected


def test_capabilities_updated_in_place_never_duplicated(session, conf):
    props = {"capabilities": "cpu_vt:false,boot_mode:bios,profile:compute"}
    ctx = make_ctx(session, conf, load_data("uefi-dell-r640"), properties=props)
    for _ in range(2):
        run(ctx, ["boot-mode", "cpu-capabilities"])
    assert ctx.node.properties["capabilities"] == (
        "cpu_vt:true,boot_mode:uefi,profile:compute,cpu_aes:true,cpu_hugepages:true,"
        "cpu_hugepages_1g:true,cpu_txt:true")


def test_cpu_capabilities_map_is_configurable(session, tmp_path):
    conf = make_conf(tmp_path, cpu_capabilities="avx512f:cpu_avx512,sse4_2:cpu_sse42")
    ctx = make_ctx(session, conf, load_data("uefi-dell-r640"))
    run(ctx, ["cpu-capabilities"])
    assert ctx.node.properties["capabilities"] == "cpu_avx512:true,cpu_sse42:true"


def _set(path, value):
    def mutate(inventory):
        *parents, last = path
        target = inventory
        for key in parents:
            target = target[key]
        if value is KeyError:
            target.pop(last)
        else:
            target[last] = value
    return mutate


@pytest.mark.parametrize(("hook", "mutate", "message"), [
    ("architecture", _set(["cpu"], KeyError), "no 'cpu' section"),
    ("architecture", _set(["cpu", "architecture"], KeyError), "malformed CPU architecture"),
    ("architecture", _set(["cpu", "architecture"], 64), "malformed CPU architecture"),
    ("architecture", _set(["cpu"], "x86_64"), "'cpu' must be an object"),
    ("memory", _set(["memory"], KeyError), "no 'memory' section"),
    ("memory", _set(["memory"], {"physical_mb": 0}), "no memory size"),
    ("memory", _set(["memory", "physical_mb"], "lots"), "physical_mb must be an integer"),
    ("memory", _set(["memory", "physical_mb"], -5), "at least 1"),
    ("memory", _set(["memory", "physical_mb"], True), "got a boolean"),
    ("cpus", _set(["cpu", "count"], "many"), "cpu.count must be an integer"),
    ("boot-mode", _set(["boot", "current_boot_mode"], "uefi,x:y"), "malformed"),
    ("boot-mode", _set(["boot"], ["uefi"]), "'boot' must be an object"),
    ("cpu-capabilities", _set(["cpu", "flags"], "vmx aes"), "cpu.flags must be a list"),
])
def test_malformed_inventory_fails_with_a_clear_message(session, conf, hook, mutate, message):
    data = load_data("uefi-dell-r640")
    mutate(data["inventory"])
    ctx = make_ctx(session, conf, data)
    with pytest.raises(InspectionHookError, match=message) as exc:
        run(ctx, [hook])
    assert str(exc.value).startswith(f"{hook} hook: ")
    assert ctx.node.properties == {}


def test_inventory_that_is_not_an_object(session, conf):
    ctx = make_ctx(session, conf, {"inventory": ["cpu"]})
    with pytest.raises(InspectionHookError, match="inventory must be a JSON object"):
        run(ctx, ["architecture"])


@pytest.mark.parametrize(("hook", "mutate"), [
    ("cpus", _set(["cpu", "count"], KeyError)),
    ("boot-mode", _set(["boot"], KeyError)),
    ("cpu-capabilities", _set(["cpu", "flags"], [])),
])
def test_optional_data_missing_is_only_a_warning(session, conf, caplog, hook, mutate):
    data = load_data("uefi-dell-r640")
    mutate(data["inventory"])
    ctx = make_ctx(session, conf, data)
    run(ctx, [hook])
    assert ctx.node.properties == {}
    assert "WARNING" in caplog.text


def test_memory_falls_back_to_total(session, conf):
    data = load_data("bios-vm-x86_64")
    del data["inventory"]["memory"]["physical_mb"]
    ctx = make_ctx(session, conf, data)
    run(ctx, ["memory"])
    assert ctx.node.properties["memory_mb"] == 3933  # 4124041216 bytes, rounded up


def test_malformed_existing_capabilities_fail_clearly(session, conf):
    ctx = make_ctx(session, conf, load_data("bios-vm-x86_64"),
                   properties={"capabilities": "boot_option"})
    with pytest.raises(InspectionHookError,
                       match="boot-mode hook: cannot update the node's capabilities: "
                             "malformed capabilities 'boot_option'"):
        run(ctx, ["boot-mode"])


def test_ramdisk_error_fails_with_the_ramdisk_message(session, conf):
    data = load_data("bios-vm-x86_64")
    data["error"] = "The following errors were encountered:\n* no disks found"
    ctx = make_ctx(session, conf, data)
    with pytest.raises(InspectionHookError) as exc:
        run(ctx, ["ramdisk-error", "architecture"])
    assert str(exc.value) == ("Ramdisk reported error: The following errors were "
                              "encountered:\n* no disks found")
    assert ctx.node.properties == {}


def test_no_ramdisk_error_passes(session, conf):
    data = load_data("bios-vm-x86_64")
    data["error"] = None
    ctx = make_ctx(session, conf, data)
    run(ctx, ["ramdisk-error", "architecture"])
    assert ctx.node.properties == {"cpu_arch": "x86_64"}
