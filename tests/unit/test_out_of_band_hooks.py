"""[redfish]inspection_hooks: the hooks run on inventories read from a BMC."""

import logging

import pytest

from inspection.processing.out_of_band import load_out_of_band_hooks
from pxe_filter.common.config import ConfigError
from tests.integration.node_factory import make_conf


def test_defaults_are_ironics(tmp_path):
    hooks = load_out_of_band_hooks(make_conf(tmp_path))
    assert [h.name for h in hooks] == ["validate-interfaces", "ports", "architecture"]


def test_default_list_expands_and_ramdisk_only_hooks_are_skipped(tmp_path, caplog):
    conf = make_conf(tmp_path, redfish={"inspection_hooks": "ramdisk-error,"
                                        "$default_inspection_hooks,cpus,parse-lldp,"
                                        "local-link-connection,memory"})
    with caplog.at_level(logging.WARNING):
        hooks = load_out_of_band_hooks(conf)
    assert [h.name for h in hooks] == ["validate-interfaces", "ports", "architecture", "cpus",
                                       "memory"]
    for name in ("ramdisk-error", "parse-lldp", "local-link-connection"):
        assert f"Hook {name} in [redfish]inspection_hooks is skipped" in caplog.text


@pytest.mark.parametrize(("value", "message"), [
    ("validate-interfaces,no-such-hook", "unknown inspection hook 'no-such-hook'"),
    ("ports,validate-interfaces", "depends on 'validate-interfaces'"),
])
def test_a_broken_list_names_the_option(tmp_path, value, message):
    conf = make_conf(tmp_path, redfish={"inspection_hooks": value})
    with pytest.raises(ConfigError, match=message) as error:
        load_out_of_band_hooks(conf)
    assert "[redfish]inspection_hooks" in str(error.value)
    assert "[inspector]hooks" not in str(error.value)
