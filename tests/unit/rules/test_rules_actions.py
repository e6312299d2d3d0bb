"""Every built-in action on an in-memory node, and plugin actions from an entry point."""

import logging
import sys

import pytest

from inspection.rules import (
    ActionRegistry,
    InspectionFailed,
    RuleExecutionError,
    RulesEngine,
    validate_rule,
)
from tests.unit.rules.conftest import NODE_UUID, make_rule, run

PORT_MAC = "e4:43:4b:5c:10:a0"
PORT_UUID = "0a5c3d2e-8c59-4c3a-9b1e-5f6f0b0e0001"


def apply(actions, inventory, node, plugin_data=None, **kw):
    rule = make_rule(actions=actions, phase="main", **kw)
    data = {} if plugin_data is None else plugin_data
    run([rule], inventory, data, node=node)
    return data


NODE_CASES = [
    # (actions, check(node) -> observed, expected)
    ([{"op": "set-attribute", "args": ["/driver_info/ipmi_address", "10.0.0.1"]}],
     lambda n: n.node["driver_info"]["ipmi_address"], "10.0.0.1"),
    ([{"op": "set-attribute", "args": {"path": "/extra/a/b", "value": [1]}}],
     lambda n: n.node["extra"], {"a": {"b": [1]}}),
    ([{"op": "set-attribute", "args": ["/driver", "redfish"]}],
     lambda n: n.node["driver"], "redfish"),
    ([{"op": "set-attribute", "args": ["/properties/memory_mb",
                                       "{inventory[memory][physical_mb]}"]}],
     lambda n: n.node["properties"]["memory_mb"], 393216),
    ([{"op": "extend-attribute", "args": ["/extra/tags", "a"]},
      {"op": "extend-attribute", "args": ["/extra/tags", "a"]},
      {"op": "extend-attribute", "args": {"path": "/extra/tags", "value": "a", "unique": True}},
      {"op": "extend-attribute", "args": {"path": "/extra/tags", "value": "b", "unique": True}}],
     lambda n: n.node["extra"]["tags"], ["a", "a", "b"]),
    ([{"op": "del-attribute", "args": ["/driver_info/ipmi_password"]}],
     lambda n: "ipmi_password" in n.node["driver_info"], False),
    ([{"op": "del-attribute", "args": ["/extra/missing/deeper"]}],
     lambda n: n.node["extra"], {}),
    ([{"op": "del-attribute", "args": ["/name"]}], lambda n: n.node["name"], None),
    ([{"op": "set-capability", "args": ["boot_mode", "bios"]}],
     lambda n: n.node["properties"]["capabilities"], "boot_mode:bios,cpu_vt:true"),
    ([{"op": "set-capability", "args": ["gpu", "{inventory[cpu][count]}"]},
      {"op": "set-capability", "args": ["gpu", "2"]}],
     lambda n: n.node["properties"]["capabilities"], "boot_mode:uefi,cpu_vt:true,gpu:2"),
    ([{"op": "unset-capability", "args": ["boot_mode"]},
      {"op": "unset-capability", "args": ["absent"]}],
     lambda n: n.node["properties"]["capabilities"], "cpu_vt:true"),
    ([{"op": "add-trait", "args": ["CUSTOM_GPU"]}, {"op": "add-trait", "args": ["CUSTOM_GPU"]},
      {"op": "remove-trait", "args": ["CUSTOM_EXISTING"]},
      {"op": "remove-trait", "args": ["CUSTOM_ABSENT"]}],
     lambda n: n.traits(), ["CUSTOM_GPU"]),
    ([{"op": "set-port-attribute", "args": [PORT_MAC.upper(), "/physical_network", "ph1"]}],
     lambda n: n.port_list[0]["physical_network"], "ph1"),
    ([{"op": "set-port-attribute", "args": [PORT_UUID, "/extra/switch", "sw1"]}],
     lambda n: n.port_list[0]["extra"], {"switch": "sw1"}),
    ([{"op": "set-port-attribute", "args": ["e4-43-4b-5c-10-a0", "/pxe_enabled", False]}],
     lambda n: n.port_list[0]["pxe_enabled"], False),
    ([{"op": "extend-port-attribute", "args": {"port_id": PORT_MAC, "path": "/extra/vlans",
                                               "value": 10, "unique": True}},
      {"op": "extend-port-attribute", "args": {"port_id": PORT_MAC, "path": "/extra/vlans",
                                               "value": 10, "unique": True}}],
     lambda n: n.port_list[0]["extra"]["vlans"], [10]),
    ([{"op": "set-port-attribute", "args": [PORT_MAC, "/local_link_connection/port_id", "x"]},
      {"op": "del-port-attribute", "args": [PORT_UUID.upper(), "/local_link_connection/port_id"]},
      {"op": "del-port-attribute", "args": [PORT_MAC, "/extra/not_there"]}],
     lambda n: n.port_list[0]["local_link_connection"], {}),
    # Loops: one action per item, item fields as real objects.
    ([{"op": "set-attribute", "args": ["/extra/{item[name]}", "{item[speed_mbps]}"],
       "loop": "{inventory[interfaces]}"}],
     lambda n: n.node["extra"], {"eno1": 25000, "eno2": 25000, "ens3f0": 100000}),
    ([{"op": "set-port-attribute", "args": ["{item}", "/extra/seen", True],
       "loop": "{ports}"}], None, None),
]


@pytest.mark.parametrize(("actions", "check", "expected"), NODE_CASES[:-1])
def test_node_action(actions, check, expected, inventory, node):
    apply(actions, inventory, node)
    assert check(node) == expected


def test_loop_over_ports_with_port_uuid(inventory, node):
    apply([{"op": "set-port-attribute", "args": ["{item[uuid]}", "/extra/seen", True],
            "loop": "{ports}"}], inventory, node)
    assert node.port_list[0]["extra"] == {"seen": True}


@pytest.mark.parametrize(("actions", "expected"), [
    ([{"op": "set-plugin-data", "args": ["/a/b", 1]}], {"a": {"b": 1}, "keep": 1}),
    ([{"op": "set-plugin-data", "args": ["a.b", "{inventory[bmc_address]}"]}],
     {"a": {"b": "192.168.25.31"}, "keep": 1}),
    ([{"op": "extend-plugin-data", "args": ["/l", 1]},
      {"op": "extend-plugin-data", "args": {"path": "/l", "value": 1, "unique": True}},
      {"op": "extend-plugin-data", "args": {"path": "/l", "value": 2, "unique": True}}],
     {"l": [1, 2], "keep": 1}),
    ([{"op": "unset-plugin-data", "args": ["/keep"]},
      {"op": "unset-plugin-data", "args": ["/never/there"]}], {}),
])
def test_plugin_data_actions_in_early_phase(actions, expected, inventory):
    data = {"keep": 1}
    run([make_rule(actions=actions)], inventory, data, phase="early")
    assert data == expected


def test_set_attribute_copies_objects_instead_of_aliasing_inventory(inventory, node):
    apply([{"op": "set-attribute", "args": ["/extra/cpu", "{inventory[cpu]}"]}],
          inventory, node)
    node.node["extra"]["cpu"]["count"] = 1
    assert inventory["cpu"]["count"] == 80


def test_fail_raises_with_interpolated_masked_message(inventory, node):
    rule = make_rule(actions=[{"op": "fail", "args": [
        "bad BMC {node.driver_info[ipmi_address]} pw={node.driver_info[ipmi_password]}"]}],
        phase="main")
    with pytest.raises(InspectionFailed) as info:
        RulesEngine("never").apply([rule], "main", inventory, {}, node)
    assert str(info.value) == "bad BMC 192.168.25.31 pw=***"
    assert info.value.rule_uuid == rule.uuid


def test_log_action_levels_and_masking(inventory, node, caplog):
    caplog.set_level(logging.DEBUG, logger="inspection.rules")
    apply([{"op": "log", "args": ["hello {node.name} {node.driver_info}"]},
           {"op": "log", "args": {"msg": "careful", "level": "warning"}}], inventory, node)
    records = [(r.levelno, r.getMessage()) for r in caplog.records if "rule" in r.getMessage()
               and ("hello" in r.getMessage() or "careful" in r.getMessage())]
    assert records[0][0] == logging.INFO
    assert "hello r640-1" in records[0][1] and "s3cret" not in records[0][1]
    # masked by the rule engine, then again by the free-text mask every log line gets
    assert "'ipmi_password': '******'" in records[0][1]
    assert records[1] == (logging.WARNING, f"rule {records[1][1].split()[1]} careful")


@pytest.mark.parametrize("actions", [
    [{"op": "set-port-attribute", "args": ["00:00:00:00:00:01", "/extra/x", 1]}],
    [{"op": "set-port-attribute", "args": ["{inventory[hostname]}", "/extra/x", 1]}],
    [{"op": "set-attribute", "args": ["/properties", "not a dict"]}],
    [{"op": "set-attribute", "args": ["/maintenance", "yes"]}],
    [{"op": "extend-attribute", "args": ["/driver_info/ipmi_address", "x"]}],
    [{"op": "set-attribute", "args": ["/extra/x", "{inventory[missing]}"]}],
    [{"op": "set-attribute", "args": ["/extra/{inventory[missing]}", 1]}],
    [{"op": "add-trait", "args": ["not a trait"]}],
    [{"op": "set-capability", "args": ["a", "b,c"]}],
    [{"op": "set-attribute", "args": ["/extra/x", 1], "loop": "{inventory[hostname]}"}],
])
def test_action_failures_raise_execution_error(actions, inventory, node):
    rule = make_rule(actions=actions, phase="main")
    with pytest.raises(RuleExecutionError) as info:
        run([rule], inventory, node=node)
    assert info.value.rule_uuid == rule.uuid and f"rule {rule.uuid}" in str(info.value)


def test_sensitive_rule_error_is_terse(inventory, node):
    rule = make_rule(actions=[{"op": "set-attribute",
                               "args": ["/driver_info/ipmi_password", "{inventory[secretx]}"]}],
                     phase="main", sensitive=True)
    with pytest.raises(RuleExecutionError) as info:
        run([rule], inventory, node=node)
    assert "secretx" not in str(info.value) and "ipmi_password" not in str(info.value)


def test_plugin_action_from_entry_point(tmp_path, monkeypatch, inventory):
    pkg = tmp_path / "my_rule_plugin.py"
    pkg.write_text(
        "def tag(ctx, name, *, value='yes'):\n"
        "    ctx.plugin_data.setdefault('tags', {})[name] = value\n"
        "tag.supports_early = True\n"
        "class Broken:\n"
        "    def __init__(self):\n"
        "        raise RuntimeError('cannot start')\n")
    dist = tmp_path / "my_rule_plugin-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: my-rule-plugin\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        "[inspection.rules.actions]\ntag = my_rule_plugin:tag\nbroken = my_rule_plugin:Broken\n"
        "fail = my_rule_plugin:tag\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    registry = ActionRegistry()
    assert registry.supports_early("tag")
    assert registry.get("fail").__module__ == "inspection.rules.actions"
    rule = validate_rule({"phase": "early", "actions": [
        {"op": "tag", "args": {"name": "arch", "value": "{inventory[cpu][architecture]}"}},
        {"op": "tag", "args": ["other"]}]}, registry=registry)
    data = {}
    RulesEngine(registry=registry).apply([rule], "early", inventory, data)
    assert data == {"tags": {"arch": "x86_64", "other": "yes"}}
    with pytest.raises(Exception, match=r"actions\[0\].args.nope: unknown argument") as info:
        validate_rule({"actions": [{"op": "tag", "args": {"name": "x", "nope": 1}}]},
                      registry=registry)
    with pytest.raises(Exception, match="plugin failed to load: RuntimeError: cannot start"):
        validate_rule({"actions": [{"op": "broken", "args": []}]}, registry=registry)
    assert info.value.problems
    sys.modules.pop("my_rule_plugin", None)


def test_node_uuid_is_reported_to_the_log(inventory, node, caplog):
    caplog.set_level(logging.INFO, logger="inspection.rules")
    apply([{"op": "log", "args": ["x"]}], inventory, node)
    assert any(NODE_UUID in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("action", [
    {"op": "set-attribute", "args": ["/extra/deep/list/0/key", "new"]},
    {"op": "extend-attribute", "args": ["/extra/deep/list", "added"]},
    {"op": "del-attribute", "args": ["/extra/deep/list/0"]},
])
def test_node_edits_leave_the_previous_value_untouched(action, inventory, node):
    # a rollback restores the previous value object: no edit may reach into it
    node.node["extra"] = {"deep": {"list": [{"key": "old"}]}, "other": {"kept": 1}}
    before = node.node["extra"]
    apply([action], inventory, node)
    assert before == {"deep": {"list": [{"key": "old"}]}, "other": {"kept": 1}}
    assert node.node["extra"] is not before and node.node["extra"] != before
    assert node.node["extra"]["other"] == {"kept": 1}
