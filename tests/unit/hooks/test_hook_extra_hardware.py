"""extra-hardware: python-hardware data into a nested dictionary."""

import pytest

from inspection.hooks.base import InspectionHookError
from tests.unit.hooks.helpers import load_data, make_conf, make_ctx, run


def test_converts_the_dell_data(session, conf):
    ctx = make_ctx(session, conf, load_data("uefi-dell-r640"))
    run(ctx, ["extra-hardware"])
    extra = ctx.plugin_data["extra"]
    assert "data" not in ctx.plugin_data
    assert extra["cpu"]["logical"]["number"] == 80
    assert extra["cpu"]["physical_0"]["vendor"] == "GenuineIntel"
    assert extra["network"]["eno1"] == {"serial": "b0:7b:25:d3:0a:10", "link": "yes"}
    assert extra["disk"]["sda"]["size"] == 479


@pytest.mark.parametrize("strict", [False, True])
def test_malformed_items(session, tmp_path, strict, caplog):
    data = load_data("bios-vm-x86_64")
    data["data"] = [["cpu", "logical", "number", "2"], ["short", "item"], [["list"], "a", "b", 1],
                    "text"]
    ctx = make_ctx(session, make_conf(tmp_path, extra_hardware_strict=strict), data)
    if strict:
        with pytest.raises(InspectionHookError, match="extra-hardware hook: 3 extra hardware"):
            run(ctx, ["extra-hardware"])
        assert "data" in ctx.plugin_data and "extra" not in ctx.plugin_data
    else:
        run(ctx, ["extra-hardware"])
        assert ctx.plugin_data["extra"] == {"cpu": {"logical": {"number": 2}}}
        assert "ignoring malformed extra hardware item" in caplog.text


@pytest.mark.parametrize("strict", [False, True])
def test_data_not_a_list(session, tmp_path, strict):
    data = load_data("bios-vm-x86_64")
    data["data"] = {"cpu": 1}
    ctx = make_ctx(session, make_conf(tmp_path, extra_hardware_strict=strict), data)
    if strict:
        with pytest.raises(InspectionHookError, match="must be a list"):
            run(ctx, ["extra-hardware"])
    else:
        run(ctx, ["extra-hardware"])
        assert ctx.plugin_data["data"] == {"cpu": 1}  # nothing lost


def test_no_data_is_a_warning(session, conf, caplog):
    ctx = make_ctx(session, conf, load_data("bios-vm-x86_64"))
    run(ctx, ["extra-hardware"])
    assert "extra" not in ctx.plugin_data
    assert "No extra hardware data" in caplog.text
